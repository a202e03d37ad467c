//! Code shared by the integration tests.

pub mod example;
pub mod schema;

use std::path::PathBuf;

/// A path inside the repository.
pub fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}
pub mod world;
