//! What every test suite of the workspace needs and must not write again:
//! where the repository is, whether this is CI, whether a tool a test needs
//! is here, a simulated cluster with its kubeconfig ([`World`]; several as
//! one kubeconfig's contexts: [`Fleet`]), the committed schemas
//! ([`schema`]) and the sample documents ([`samples`]). A dev-dependency
//! only; it knows the simulator and the documents' types, never the
//! engine, so the engine's tests and the plugin's each add how they run
//! against the world.
//!
//! The rule it carries (the project's): in CI (`CI=true`) a test whose tool
//! is missing *fails*; on a developer's machine it says SKIPPING and
//! returns, so `cargo test` works without Go or kubectl.

#![deny(missing_docs, unreachable_pub)]

use std::path::PathBuf;

pub mod samples;
pub mod schema;
mod world;

pub use world::{calm, closed_url, mark_of, stale_names, Fleet, World, TEST_TIMEOUT};

/// `relative` under the repository's root (the workspace directory).
pub fn repo_path(relative: &str) -> PathBuf {
    // This crate sits at `crates/cilium-gc-testkit`.
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

/// Whether `CI=true`: in CI a test whose tool is missing fails.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Whether the external `tool` can be run. When it cannot: in CI the test
/// fails here; elsewhere it says SKIPPING `what` and the caller returns.
pub fn tool_or_skip(tool: &str, what: &str) -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            !in_ci(),
            "{tool} not found and CI=true: {what} cannot run (.ci/run installs it)"
        );
        eprintln!("{tool} not found: SKIPPING {what} (.ci/run installs it)");
    }
    found
}

/// Random cases per property test: `CHAOS_CASES`, else 6. Each suite
/// scales it to what one case costs.
pub fn chaos_cases() -> u32 {
    std::env::var("CHAOS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

/// A ConfigMap's `data` from `(key, value)` pairs: the `cilium-config` a
/// test hands to the settings it is read into.
pub fn config_data(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_path_is_the_workspace_root() {
        assert!(repo_path("Cargo.toml").exists());
        assert!(repo_path("crates/cilium-gc-testkit/src/lib.rs").exists());
    }

    #[test]
    fn a_present_tool_is_found() {
        assert!(tool_or_skip("sh", "this test"));
    }
}
