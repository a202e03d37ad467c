//! What `diagnose --from <an archive the real cilium-cli wrote>` must say,
//! given what the server held and what the live diagnosis said when the
//! archive was written. Shared by the e2e test that writes the archive
//! (tests/e2e/diagnose_sysdump.rs) and the integration test that reads the
//! recorded one (tests/it/diagnose/sysdump_real.rs).

use std::collections::BTreeSet;

use serde_json::Value;

/// The finding codes and severities.
pub fn findings(d: &Value) -> BTreeSet<(String, String)> {
    d["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A sysdump's `<ts>` (`20060102-150405`) as RFC 3339 UTC.
pub fn rfc3339(ts: &str) -> String {
    format!(
        "{}-{}-{}T{}:{}:{}Z",
        &ts[0..4],
        &ts[4..6],
        &ts[6..8],
        &ts[9..11],
        &ts[11..13],
        &ts[13..15]
    )
}

/// `saved` is the diagnosis of the archive; `expected` holds the archive's
/// `capturedAt`, the server's counts and the live diagnosis (as
/// tests/fixtures/cilium-sysdump/expected.json records them).
pub fn assert_saved_matches(saved: &Value, expected: &Value) {
    let source = &saved["source"];
    assert_eq!(source["capturedAtFrom"], "sysdump-file-name", "{source}");
    assert_eq!(source["capturedAt"], expected["capturedAt"], "{source}");
    assert!(saved["warnings"][0]
        .as_str()
        .unwrap()
        .starts_with("source: saved objects"));
    let server = &expected["server"];
    assert_eq!(saved["identitySpace"]["total"], server["identities"]);
    assert_eq!(saved["cluster"]["endpoints"], server["endpoints"]);
    let live = &expected["live"];
    assert_eq!(saved["identitySpace"]["total"], live["total"]);
    assert_eq!(
        saved["identitySpace"]["states"], live["states"],
        "the same states"
    );
    // The findings the forecast's pace decides are left out of the
    // comparison: the recorded archive's live diagnosis was made when
    // `exhaustion-soon` read the day's rate (it now reads the recent pace,
    // and says "within a week" of this archive). They are judged against
    // the saved diagnosis' own forecast below instead.
    let paced = |c: &(String, String)| c.0 == "exhaustion-soon" || c.0 == "gc-cannot-keep-up";
    let codes: BTreeSet<(String, String)> =
        serde_json::from_value(live["findings"].clone()).unwrap();
    let ours = findings(saved);
    assert_eq!(
        ours.iter().filter(|c| !paced(c)).collect::<BTreeSet<_>>(),
        codes.iter().filter(|c| !paced(c)).collect::<BTreeSet<_>>(),
        "the live findings"
    );
    let full_in = saved["forecast"]["fullIfGcStops"]["seconds"].as_f64();
    assert_eq!(
        ours.iter().any(|c| c.0 == "exhaustion-soon"),
        full_in.is_some_and(|s| s < 7.0 * 86_400.0),
        "exhaustion-soon follows the forecast: {}",
        saved["forecast"]
    );
    assert_eq!(saved["writers"], live["writers"], "the same writers");
    // cilium-cli saves an empty list of slices when the CRD is served: as live.
    assert_eq!(
        saved["cluster"]["endpointSliceCrd"],
        live["endpointSliceCrd"]
    );
    // What a quick sysdump of this cluster leaves out, and only that: it
    // saves managedFields, the config, the Deployment, the DaemonSet and
    // the Pods; no agent ran in a Pod, so it holds no agent log.
    let missing: BTreeSet<String> = serde_json::from_value(source["missing"].clone()).unwrap();
    assert_eq!(
        missing,
        [
            "cilium-operator metrics",
            "cilium-agent logs (`logs-<pod>-cilium-agent-<ts>.log`): the allocator's refusals are unknown",
        ]
        .map(String::from)
        .into(),
        "{source}"
    );
    assert_eq!(
        saved["gcHealth"]["cilium"]["operatorPods"], live["operatorPods"],
        "the operator Pods, from k8s-pods-<ts>.yaml"
    );
    // Nothing in the archive was unreadable.
    let warnings = saved["warnings"].to_string();
    assert!(!warnings.contains("skipped"), "{warnings}");
}
