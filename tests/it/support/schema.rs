//! Loading `schema/report-v1.json` and validating documents against it, with
//! the `jsonschema` crate's bundled draft 2020-12 meta-schema: no network.

use serde_json::Value;

use super::repo_path;

/// Where the committed schema lives, relative to the repository.
pub const SCHEMA_FILE: &str = "schema/report-v1.json";

/// The committed schema file, parsed.
pub fn committed() -> Value {
    let path = repo_path(SCHEMA_FILE);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// The schema exactly as it must be committed: pretty JSON and a newline.
pub fn generated_text() -> String {
    let mut text = serde_json::to_string_pretty(&kubectl_cilium_gc::report::schema())
        .expect("schema serializes");
    text.push('\n');
    text
}

/// Why `schema` is not a valid draft 2020-12 schema; empty when it is.
pub fn meta_errors(schema: &Value) -> Vec<String> {
    let meta = jsonschema::draft202012::meta::validator();
    meta.iter_errors(schema)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
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
