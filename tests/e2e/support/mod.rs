//! Code shared by the real-apiserver tests.

pub mod audit;
pub mod cluster;
pub mod freeze;
pub mod objects;
pub mod operator;
pub mod runs;
pub mod workload;

/// The real Pushgateway (and krew, promtool), shared with the integration suite.
#[path = "../../it/support/tools.rs"]
pub mod tools;

/// What a diagnosis of a real cilium-cli archive must say, shared with the
/// integration test that reads the recorded one.
#[path = "../../it/support/sysdump.rs"]
pub mod sysdump;

/// The container image `.ci/image` builds, and a loopback registry, shared
/// with the integration suite.
#[path = "../../it/support/image.rs"]
pub mod image;

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

pub use cilium_gc_testkit::{repo_path, tool_or_skip};

/// Every run of the plugin gives up after this long rather than hang CI.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The plugin binary, with no colour and no inherited kubeconfig.
pub fn plugin() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc"));
    cmd.env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    cmd
}

/// Run the plugin with `--kubeconfig kubeconfig` and `args`.
pub async fn run(kubeconfig: &std::path::Path, args: &[&str]) -> Output {
    let mut cmd = plugin();
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
    finish(cmd).await
}

/// Wait for a started command, bounded by [`RUN_TIMEOUT`].
pub async fn finish(mut cmd: tokio::process::Command) -> Output {
    tokio::time::timeout(RUN_TIMEOUT, cmd.output())
        .await
        .expect("the plugin finished in time")
        .expect("the plugin runs")
}

/// The JSON report on stdout, validated against the published schema.
pub fn report(out: &Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report on stdout ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let schema_file = match v["kind"].as_str() {
        Some("CiliumIdentityDiagnosis") => "schema/diagnosis-v1.json",
        _ => "schema/report-v1.json",
    };
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_path(schema_file)).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "report does not validate: {errors:?}");
    v
}

/// Fail with stderr unless the command exited with `code`.
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit code; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `summary.<field>` of a report as a number.
pub fn summary(report: &Value, field: &str) -> u64 {
    report["summary"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("summary.{field} missing: {}", report["summary"]))
}

/// The simulator's default scenario with no actors or faults.
pub fn calm_default() -> cilium_gc_sim::Scenario {
    cilium_gc_sim::Scenario::default().calm()
}
