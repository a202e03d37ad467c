//! Code shared by the integration tests.

pub mod example;
pub mod schema;
pub mod tools;

use std::path::PathBuf;

/// A path inside the repository.
pub fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}
pub mod world;

/// The `name` preset made quiet: no agents or operator acting, no injected
/// faults. Tests that count exact outcomes start from it.
pub fn calm(name: &str) -> cilium_gc_sim::Scenario {
    cilium_gc_sim::Scenario::preset(name)
        .unwrap_or_else(|| panic!("no preset {name:?}"))
        .calm()
}

/// Whether `CI=true`: in CI a test whose tool is missing fails, since
/// `.ci/run` installs every tool; only a developer's machine may skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Whether the external `tool` can be run. When it cannot: in CI the test
/// fails here; elsewhere it says SKIPPING and the caller returns.
pub fn tool_or_skip(tool: &str, test: &str) -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            !in_ci(),
            "{tool} not found and CI=true: {test} cannot run (.ci/run installs it)"
        );
        eprintln!("{tool} not found: SKIPPING {test} (.ci/run installs it)");
    }
    found
}
