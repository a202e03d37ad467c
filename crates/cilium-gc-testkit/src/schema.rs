//! The committed JSON Schemas (`schema/`), and documents checked against
//! them with the `jsonschema` crate's bundled draft 2020-12 meta-schema: no
//! network.

use serde_json::Value;

use crate::repo_path;

/// Where the report schema lives, relative to the repository.
pub const REPORT_SCHEMA_FILE: &str = "schema/report-v1.json";

/// The committed schema at `relative` (e.g. [`REPORT_SCHEMA_FILE`]), parsed.
pub fn committed(relative: &str) -> Value {
    let path = repo_path(relative);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// Why `instance` does not conform to `schema` (formats such as `date-time`
/// checked); empty when it does.
pub fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("schema does not compile: {e}"));
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Fail with the schema errors, if `report` does not validate against the
/// committed report schema.
pub fn assert_valid_report(report: &Value) {
    let errors = errors(&committed(REPORT_SCHEMA_FILE), report);
    assert!(
        errors.is_empty(),
        "report does not validate:\n{}",
        errors.join("\n")
    );
}
