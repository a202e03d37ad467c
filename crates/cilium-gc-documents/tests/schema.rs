//! The published schemas are what this crate's types generate: each
//! committed `schema/*.json` is compared with the types, byte for byte.
//! `UPDATE_SCHEMA=1 cargo test -p cilium-gc-documents --test schema`
//! rewrites them instead (v1 may only gain optional fields).

use std::path::PathBuf;

use cilium_gc_documents::{diagnosis, fleet, report};

/// `relative` to the repository root.
fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

/// Fails when the committed `file` differs from `schema` as it must be
/// committed (pretty JSON and a newline); with `UPDATE_SCHEMA=1` rewrites it.
fn assert_committed(file: &str, schema: serde_json::Value, source: &str) {
    let mut want = serde_json::to_string_pretty(&schema).expect("schema serializes");
    want.push('\n');
    let path = repo_path(file);
    if std::env::var_os("UPDATE_SCHEMA").is_some_and(|v| !v.is_empty()) {
        std::fs::write(&path, &want).expect("write schema");
        return;
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "{file} is out of date with crates/cilium-gc-documents/src/{source}.\n\
         If the change is intended (v1 may only gain optional fields), regenerate it with\n\
         \n    UPDATE_SCHEMA=1 cargo test -p cilium-gc-documents --test schema\n\
         \nand commit the result.",
    );
}

#[test]
fn committed_report_schema_matches_the_types() {
    assert_committed("schema/report-v1.json", report::schema(), "report.rs");
}

#[test]
fn committed_diagnosis_schema_matches_the_types() {
    assert_committed(
        "schema/diagnosis-v1.json",
        diagnosis::schema(),
        "diagnosis.rs",
    );
}

#[test]
fn committed_fleet_diagnosis_schema_matches_the_types() {
    assert_committed(
        "schema/fleet-diagnosis-v1.json",
        fleet::diagnosis_schema(),
        "fleet.rs",
    );
}

#[test]
fn committed_fleet_schema_matches_the_types() {
    assert_committed("schema/fleet-report-v1.json", fleet::schema(), "fleet.rs");
}
