//! Code shared by the integration tests.

pub mod example;
pub mod schema;
pub mod tools;

pub use cilium_gc_testkit::{repo_path, tool_or_skip};
pub mod world;

/// The `name` preset made quiet: no agents or operator acting, no injected
/// faults. Tests that count exact outcomes start from it.
pub fn calm(name: &str) -> cilium_gc_sim::Scenario {
    cilium_gc_sim::Scenario::preset(name)
        .unwrap_or_else(|| panic!("no preset {name:?}"))
        .calm()
}
