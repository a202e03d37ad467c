//! The published schemas are what this crate's types generate: each
//! committed `schema/*.json` is compared with the types, byte for byte.
//! `UPDATE_SCHEMA=1 cargo test -p cilium-gc-documents --test schema`
//! rewrites them instead (v1 may only gain optional fields). Also how the
//! testkit's sample report serializes where the shape is the contract.

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

/// The pacing sits inline in `options`, in the place and order its five
/// fields had before they became one struct (issue 27), and reads back.
#[test]
fn options_carry_the_pacing_inline() {
    use report::{Options, Pacing};
    let mut options = cilium_gc_testkit::samples::report().options;
    options.pacing = Pacing {
        concurrency: 8,
        qps: 40.0,
        burst: 40,
        max_conflict_retries: 3,
        max_retries: 5,
    };
    options.max_deletions = Some(100);
    let json = serde_json::to_string(&options).unwrap();
    assert_eq!(
        json,
        r#"{"ciliumNamespace":"kube-system","namespaces":[],"heartbeatTimeoutSeconds":1800.0,"localRange":{"min":256,"max":65535},"pageSize":500,"concurrency":8,"qps":40.0,"burst":40,"maxConflictRetries":3,"maxRetries":5,"maxDeletions":100,"mark":false,"force":false,"items":"unused"}"#
    );
    let back: Options = serde_json::from_str(&json).unwrap();
    assert_eq!(back.pacing, options.pacing);
    assert_eq!(back.max_deletions, Some(100));
}

/// The shared header and span are flattened into each document where its
/// own fields were (issue 35): the JSON opens with the same keys in the same
/// order, and a document reads back to the same bytes.
#[test]
fn header_and_span_sit_where_the_fields_were() {
    use cilium_gc_documents::header::{Header, Span};
    let report = cilium_gc_testkit::samples::full_report();
    let json = serde_json::to_string(&report).unwrap();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys[..9],
        [
            "$schema",
            "apiVersion",
            "kind",
            "tool",
            "cluster",
            "startedAt",
            "finishedAt",
            "durationSeconds",
            "mode"
        ]
    );
    assert_eq!(value["$schema"], report::SCHEMA_ID);
    assert_eq!(value["apiVersion"], report::API_VERSION);
    assert_eq!(value["kind"], report::KIND);
    assert_eq!(value["durationSeconds"], 9.75);
    let back: report::Report = serde_json::from_str(&json).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), json);

    let fleet = fleet::FleetDiagnosis {
        header: Header::new(report.header.tool.clone()),
        span: Span::new(
            report.span.started_at,
            report.span.finished_at,
            std::time::Duration::from_millis(1500),
        ),
        parallel: 2,
        exit_code: 0,
        interrupted: false,
        redacted: false,
        summary: Default::default(),
        clusters: vec![],
    };
    let json = serde_json::to_string(&fleet).unwrap();
    assert!(
        json.starts_with(&format!(
            r#"{{"$schema":"{}","apiVersion":"{}","kind":"{}","tool":{{"#,
            fleet::FLEET_DIAGNOSIS_SCHEMA_ID,
            report::API_VERSION,
            fleet::FLEET_DIAGNOSIS_KIND,
        )),
        "{json}"
    );
    assert!(
        json.contains(r#""startedAt":"2026-06-01T12:00:00Z","finishedAt":"2026-06-01T12:00:09.75Z","durationSeconds":1.5,"parallel":2,"#),
        "{json}"
    );
    let back: fleet::FleetDiagnosis = serde_json::from_str(&json).unwrap();
    assert_eq!(back.header, fleet.header);
    assert_eq!(back.span, fleet.span);
    assert_eq!(serde_json::to_string(&back).unwrap(), json);
}
