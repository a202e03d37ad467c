//! The plugin's side of the shared test world (`cilium_gc_testkit::World`):
//! run the built binary against it exactly as a user would, and check what
//! it printed and wrote.

use std::process::Output;

use cilium_gc_sim::Simulator;
use jiff::Timestamp;
use serde_json::Value;

pub use cilium_gc_testkit::{closed_url, stale_names, Fleet, World, TEST_TIMEOUT};

/// What the plugin's tests do with a [`World`].
pub trait Binary {
    /// Run the built binary with `--kubeconfig` to the simulator.
    async fn bin(&self, args: &[&str]) -> Output;
}

impl Binary for World {
    async fn bin(&self, args: &[&str]) -> Output {
        let mut cmd = binary();
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        tokio::time::timeout(TEST_TIMEOUT, cmd.output())
            .await
            .expect("binary finished in time")
            .expect("binary runs")
    }
}

/// The built binary, with a clean environment for colours and kubeconfig.
pub fn binary() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc"));
    cmd.env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    cmd
}

/// Fail with the schema errors, if any.
pub fn assert_valid(report: &Value) {
    cilium_gc_testkit::schema::assert_valid_report(report);
}

/// Fail, showing stderr, unless the command succeeded.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// DELETE requests that reached the server later than `grace` after `at`
/// (server clock): with a stop at `at`, only in-flight ones may arrive.
pub fn deletes_after(
    sim: &Simulator,
    at: Timestamp,
    grace: jiff::SignedDuration,
) -> Vec<cilium_gc_sim::RequestRecord> {
    sim.ledger()
        .requests
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.time > at + grace)
        .collect()
}
