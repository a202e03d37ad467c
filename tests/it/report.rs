//! The report contract (issue 4): `schema/report-v1.json` is a valid draft
//! 2020-12 schema, documents every field, and accepts real reports while
//! rejecting broken ones. That it is what the types generate is the
//! documents crate's test (`cargo test -p cilium-gc-documents --test schema`).

use serde_json::{json, Value};

use crate::support::schema;
use cilium_gc_testkit::samples::full_report;

#[test]
fn schema_is_valid_draft_2020_12() {
    let s = schema::committed();
    let errors = schema::meta_errors(&s);
    assert!(
        errors.is_empty(),
        "not a valid draft 2020-12 schema:\n{errors:#?}"
    );
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["$id"], cilium_gc_documents::report::SCHEMA_ID);
}

/// Every property and definition says what it is; enums list their
/// lower-kebab values; times are `date-time`.
#[test]
fn schema_documents_every_field() {
    let problems = schema::documentation_problems(
        &schema::committed(),
        &["startedAt", "finishedAt", "createdAt", "markedAt", "time"],
    );
    assert!(
        problems.is_empty(),
        "schema problems:\n{}",
        problems.join("\n")
    );
}

#[test]
fn full_example_report_conforms() {
    let report = serde_json::to_value(full_report()).unwrap();
    // The example really does set every optional field the types have.
    for (path, v) in [
        ("aborted", &report["aborted"]),
        ("tool.commit", &report["tool"]["commit"]),
        ("cluster.server", &report["cluster"]["server"]),
        ("options.maxDeletions", &report["options"]["maxDeletions"]),
        (
            "options.requestTimeoutSeconds",
            &report["options"]["requestTimeoutSeconds"],
        ),
        ("items[3].lastError", &report["items"][3]["lastError"]),
        (
            "items[3].conflicts[1].time",
            &report["items"][3]["conflicts"][1]["time"],
        ),
    ] {
        assert!(!v.is_null(), "example misses {path}");
    }
    let errors = schema::errors(&schema::committed(), &report);
    assert!(errors.is_empty(), "example report rejected:\n{errors:#?}");
}

#[test]
fn minimal_report_conforms() {
    let mut r = full_report();
    r.aborted = None;
    r.header.tool.commit = None;
    r.cluster = Default::default();
    r.items.clear();
    r.errors.clear();
    r.preflight = Default::default();
    let errors = schema::errors(&schema::committed(), &serde_json::to_value(r).unwrap());
    assert!(errors.is_empty(), "{errors:#?}");
}

/// Turns a good report into a broken one.
type Breakage = fn(&mut Value);

#[test]
fn broken_reports_are_rejected() {
    let s = schema::committed();
    let good = serde_json::to_value(full_report()).unwrap();
    let cases: [(&str, Breakage); 6] = [
        ("unknown outcome", |r| {
            r["items"][0]["outcome"] = json!("vanished")
        }),
        ("camelCase reason", |r| {
            r["items"][0]["reason"] = json!("inUse")
        }),
        ("not a time", |r| r["startedAt"] = json!("yesterday")),
        ("negative count", |r| r["summary"]["scanned"] = json!(-1)),
        ("missing summary", |r| {
            r.as_object_mut().unwrap().remove("summary");
        }),
        ("unknown mode", |r| r["mode"] = json!("purge")),
    ];
    for (what, break_it) in cases {
        let mut bad = good.clone();
        break_it(&mut bad);
        assert!(
            !schema::errors(&s, &bad).is_empty(),
            "{what}: the schema accepted a broken report"
        );
    }
}

/// New optional fields from a later v1 must not break v1 consumers.
#[test]
fn unknown_fields_are_allowed() {
    let mut r = serde_json::to_value(full_report()).unwrap();
    r["somethingNew"] = json!({"added": "in v1.1"});
    r["summary"]["alsoNew"] = json!(1);
    assert!(schema::errors(&schema::committed(), &r).is_empty());
    let back: cilium_gc::report::Report = serde_json::from_value(r).unwrap();
    assert_eq!(back.summary.scanned, 12);
}
