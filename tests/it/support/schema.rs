//! Loading `schema/report-v1.json` and validating documents against it, with
//! the `jsonschema` crate's bundled draft 2020-12 meta-schema: no network.

use serde_json::Value;

/// Where the committed schema lives, relative to the repository.
pub const SCHEMA_FILE: &str = cilium_gc_testkit::schema::REPORT_SCHEMA_FILE;

/// The committed schema file, parsed.
pub fn committed() -> Value {
    cilium_gc_testkit::schema::committed(SCHEMA_FILE)
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
    cilium_gc_testkit::schema::errors(schema, instance)
}

/// Where the diagnosis schema lives, relative to the repository.
pub const DIAGNOSIS_SCHEMA_FILE: &str = "schema/diagnosis-v1.json";

/// The committed diagnosis schema, parsed.
pub fn committed_diagnosis() -> Value {
    cilium_gc_testkit::schema::committed(DIAGNOSIS_SCHEMA_FILE)
}

/// Why `schema` does not document itself: properties and definitions
/// without a description, enums whose `enum` does not list their lower-kebab
/// values, `time_fields` not typed `date-time`. Empty when all is well.
pub fn documentation_problems(schema: &Value, time_fields: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let empty = serde_json::Map::new();
    let defs = schema["$defs"].as_object().unwrap_or(&empty);
    let mut objects: Vec<(String, &Value)> = vec![("#".to_string(), schema)];
    for (name, def) in defs {
        if def
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            problems.push(format!("$defs/{name} has no description"));
        }
        objects.push((format!("$defs/{name}"), def));
        if let Some(variants) = def.get("oneOf").and_then(Value::as_array) {
            let consts: Vec<&Value> = variants.iter().filter_map(|v| v.get("const")).collect();
            let listed = def.get("enum").and_then(Value::as_array);
            if listed.map(|l| l.iter().collect::<Vec<_>>()) != Some(consts.clone()) {
                problems.push(format!("$defs/{name}: `enum` does not list {consts:?}"));
            }
            for v in variants {
                if v.get("description").is_none() {
                    problems.push(format!("$defs/{name}: value {} undocumented", v["const"]));
                }
            }
            for c in consts {
                let c = c.as_str().unwrap_or_default();
                let kebab =
                    !c.is_empty() && c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '-');
                if !kebab {
                    problems.push(format!("$defs/{name}: {c:?} is not lower-kebab"));
                }
            }
        }
    }
    for (at, obj) in objects {
        for (field, prop) in obj
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if prop
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                problems.push(format!("{at}/properties/{field} has no description"));
            }
            if time_fields.contains(&field.as_str())
                && prop.get("format") != Some(&Value::from("date-time"))
            {
                problems.push(format!("{at}/properties/{field} is not format date-time"));
            }
        }
    }
    problems
}

/// Where the fleet report's schema lives, relative to the repository.
pub const FLEET_SCHEMA_FILE: &str = "schema/fleet-report-v1.json";

/// The committed fleet schema, parsed.
pub fn committed_fleet() -> Value {
    cilium_gc_testkit::schema::committed(FLEET_SCHEMA_FILE)
}

/// Where the fleet diagnosis' schema lives, relative to the repository.
pub const FLEET_DIAGNOSIS_SCHEMA_FILE: &str = "schema/fleet-diagnosis-v1.json";

/// The committed fleet diagnosis schema, parsed.
pub fn committed_fleet_diagnosis() -> Value {
    cilium_gc_testkit::schema::committed(FLEET_DIAGNOSIS_SCHEMA_FILE)
}
