//! Code shared by the integration tests.

pub mod image;
pub mod schema;
pub mod sysdump;
pub mod tools;

pub use cilium_gc_testkit::{calm, repo_path, tool_or_skip};
pub mod world;
