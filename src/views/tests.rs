//! The report rendered byte for byte, from the testkit's sample report
//! (`cilium_gc_testkit::samples::report`), which the Markdown and metrics
//! tests use too.

use cilium_gc::{human_duration, thousands};
use cilium_gc_cluster::policy::Reason;
use cilium_gc_documents::report::*;
use cilium_gc_testkit::samples::{item, report as sample};

use super::format::*;
use super::next_steps::next_steps;
use super::report::render;

fn rendered(r: &Report, f: OutputFormat, color: bool) -> String {
    let mut out = Vec::new();
    render(r, f, Style { color }, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn json_is_one_document_that_round_trips() {
    let r = sample();
    let out = rendered(&r, OutputFormat::Json, true);
    assert!(out.ends_with("}\n") && !out.ends_with("\n\n"));
    assert!(!out.contains('\x1b'), "JSON is never coloured");
    let mut docs = serde_json::Deserializer::from_str(&out).into_iter::<serde_json::Value>();
    let doc = docs.next().unwrap().unwrap();
    assert!(docs.next().is_none(), "exactly one document");
    let back: Report = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), doc);
    assert_eq!(doc, serde_json::to_value(&r).unwrap());
    assert_eq!(doc["items"][0]["outcome"], "failed");
}

#[test]
fn yaml_parses_to_the_same_report() {
    let r = sample();
    let out = rendered(&r, OutputFormat::Yaml, true);
    assert!(!out.contains('\x1b'));
    let back: Report = serde_saphyr::from_str(&out).unwrap();
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&r).unwrap()
    );
}

#[test]
fn text_has_the_numbers_and_next_steps() {
    let out = rendered(&sample(), OutputFormat::Text, false);
    for want in [
        "delete on https://10.0.0.1:6443 (context prod-eu) in 12.5s",
        "1,234,567",
        "12,403",
        "2,470 / 1",
        "8.0/s",
        "Failed (1):",
        "70001",
        "503 Service Unavailable after 3 retries",
        "cilium-agent",
        "[malformed-object] ciliumidentities/abc",
        "Next: 1 deletion failed: see the failed items; rerun to retry them",
        "Next: 12,403 unused identities are unmarked: rerun with --mark, then again after 30m",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // Reasons sorted by count: unmarked (12,403) before in-use (1,000) before stale (2).
    let pos = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(pos("unmarked") < pos("in-use") && pos("in-use") < pos("stale"));
}

#[test]
fn colour_only_when_asked() {
    let r = sample();
    assert!(!rendered(&r, OutputFormat::Text, false).contains('\x1b'));
    assert!(rendered(&r, OutputFormat::Text, true).contains("\x1b["));
}

#[test]
fn banners_for_abort_and_interrupt() {
    let mut r = sample();
    r.aborted = Some(Abort {
        reason: AbortReason::BlastRadius,
        message: "2 candidates exceed --max-deletions 1".into(),
    });
    r.options.max_deletions = Some(1);
    let out = rendered(&r, OutputFormat::Text, false);
    assert!(out.contains("ABORTED (blast-radius): 2 candidates exceed"));
    assert!(out.contains("raise --max-deletions"));
    assert!(out.contains("-l/-n"));

    let mut r = sample();
    r.interrupted = true;
    r.summary.not_attempted = 1_500;
    let out = rendered(&r, OutputFormat::Text, false);
    assert!(out.contains("INTERRUPTED"));
    assert!(out.contains("1,500 candidates not attempted: rerun to finish"));
}

#[test]
fn failed_items_are_capped() {
    let mut r = sample();
    r.items = (0..25)
        .map(|n| {
            let mut i = item(&format!("{}", 1000 + n), Reason::Stale, Outcome::Failed);
            i.last_error = Some("boom".into());
            i
        })
        .collect();
    let out = rendered(&r, OutputFormat::Text, false);
    assert!(out.contains("Failed (25):"));
    assert!(out.contains("1019") && !out.contains("1020 "));
    assert!(out.contains("... and 5 more (see -o json)"));
}

#[test]
fn next_steps_per_mode() {
    let mut r = sample();
    r.mode = Mode::Scan;
    r.summary.failed = 0;
    let steps = next_steps(&r);
    assert_eq!(
        steps,
        vec![
            "2 identities are stale: run `kubectl cilium-gc delete` to remove them",
            "12,403 unused identities are unmarked: run `kubectl cilium-gc delete --mark`, \
             then again after 30m",
        ]
    );

    r.mode = Mode::Delete;
    r.options.mark = true;
    r.options.heartbeat_timeout_seconds = 7200.0;
    r.summary.marked = 12_403;
    assert_eq!(
        next_steps(&r),
        vec!["12,403 identities were marked: rerun after 2h to delete those still unused"]
    );

    r.summary.marked = 0;
    r.summary.reasons = ReasonCounts::default();
    assert!(next_steps(&r).is_empty());

    r.mode = Mode::DryRunServer;
    r.summary.deleted = 0;
    r.summary.validated = 1;
    assert_eq!(
        next_steps(&r),
        vec![
            "The server accepted 1 deletion: run `kubectl cilium-gc delete` without \
              --dry-run=server to delete them"
        ]
    );
}

#[test]
fn colour_truth_table() {
    use ColorChoice::*;
    // (choice, terminal, NO_COLOR) -> colour
    let table = [
        (Auto, true, false, true),
        (Auto, true, true, false),
        (Auto, false, false, false),
        (Auto, false, true, false),
        (Always, true, false, true),
        (Always, true, true, true),
        (Always, false, false, true),
        (Always, false, true, true),
        (Never, true, false, false),
        (Never, true, true, false),
        (Never, false, false, false),
        (Never, false, true, false),
    ];
    for (choice, tty, no_color, want) in table {
        assert_eq!(
            color_allowed(choice, tty, no_color),
            want,
            "{choice:?} tty={tty} NO_COLOR={no_color}"
        );
    }
}

#[test]
fn value_enum_names() {
    use clap::ValueEnum;
    let names = |v: &[OutputFormat]| -> Vec<String> {
        v.iter()
            .map(|f| f.to_possible_value().unwrap().get_name().to_string())
            .collect()
    };
    assert_eq!(
        names(OutputFormat::value_variants()),
        ["text", "json", "yaml", "markdown"]
    );
    let colors: Vec<_> = ColorChoice::value_variants()
        .iter()
        .map(|c| c.to_possible_value().unwrap().get_name().to_string())
        .collect();
    assert_eq!(colors, ["auto", "always", "never"]);
}

#[test]
fn numbers_and_durations() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1_000), "1,000");
    assert_eq!(thousands(12_403), "12,403");
    assert_eq!(thousands(1_234_567), "1,234,567");
    assert_eq!(human_duration(1800.0), "30m");
    assert_eq!(human_duration(7200.0), "2h");
    assert_eq!(human_duration(5400.0), "1h30m");
    assert_eq!(human_duration(45.0), "45s");
    assert_eq!(human_duration(172_800.0), "2d");
    assert_eq!(human_duration(0.0), "0s");
    assert_eq!(run_duration(0.25), "250ms");
    assert_eq!(run_duration(12.44), "12.4s");
    assert_eq!(run_duration(125.0), "2m5s");
}

#[test]
fn report_file_is_written_whole_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    std::fs::write(&path, "old").unwrap();
    let r = sample();
    write_report_file(&path, &r).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with("}\n"));
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back, serde_json::to_value(&r).unwrap());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "report.json")
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn report_file_error_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    // The target is a directory: the rename fails after the temp file was written.
    let path = dir.path().join("taken");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("keep"), "x").unwrap();
    assert!(write_report_file(&path, &sample()).is_err());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["taken"]);
    assert!(write_report_file(&dir.path().join("missing/report.json"), &sample()).is_err());
}
