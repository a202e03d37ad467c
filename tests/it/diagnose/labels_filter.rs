//! `diagnose --labels` judged by Cilium's own code (issue 36, 3): the
//! program in `tests/cilium/labelsfilter` runs `pkg/labelsfilter` of
//! v1.15.6 and of the current release (built by
//! `tests/cilium/labelsfilter.sh` with each release's go.mod) on the same
//! label sets and filters; the plugin's filter must keep exactly the labels
//! Cilium keeps, and refuse exactly the filters Cilium refuses.

use std::io::Write as _;
use std::process::{Command, Stdio};

use cilium_gc_diagnose::{FilterDefaults, LabelFilter};

use super::*;

/// Labels that exercise every built-in pattern of both releases, and the
/// user patterns below. One label per key: Cilium's `Labels` is a map by
/// key, so `k8s:app` and `container:app` cannot both be in one set.
const LABELS: &[&str] = &[
    "k8s:app=web",
    "k8s:apple=x",
    "k8s:job-name=nightly-1",
    "k8s:controller-uid=0f3c",
    "k8s:batch.kubernetes.io/controller-uid=0f3c",
    "k8s:batch.kubernetes.io/job-completion-index=3",
    "k8s:batch.kubernetes.io/job-name=nightly-1",
    "k8s:io.kubernetes.pod.namespace=team-a",
    "k8s:io.cilium.k8s.namespace.labels.team=a",
    "k8s:io.cilium.k8s.policy.cluster=default",
    "k8s:io.cilium.k8s.policy.serviceaccount=web",
    "k8s:app.kubernetes.io/name=web",
    "k8s:statefulset.kubernetes.io/pod-name=db-0",
    "k8s:apps.kubernetes.io/pod-index=0",
    "k8s:pod-template-hash=7c9d",
    "k8s:pod-template-generation=2",
    "k8s:controller-revision-hash=5f",
    "k8s:topology.kubernetes.io/zone=z1",
    "k8s:failure-domain.beta.kubernetes.io/zone=z1",
    "k8s:k8s.io/part=x",
    "k8s:kubernetes.io/hostname=n1",
    "k8s:annotation.foo=x",
    "k8s:etcd_node=e1",
    "k8s:tier=front",
    "k8s:run-id=8812",
    // Cilium keys a label set by key alone: one source per key.
    "container:build=7",
    "reserved:host",
];

/// The `labels` values judged: the defaults, exclusions, whitelists,
/// sources, regexes, zero-length matches and filters Cilium refuses.
const FILTERS: &[&str] = &[
    "",
    "k8s:!job-name",
    "!k8s:job-name",
    "k8s:app",
    "k8s:!name",
    "k8s:!run-.*",
    "k8s:!app k8s:apple",
    r"k8s:!io\.kubernetes\.pod\.namespace",
    "app",
    "!app",
    r"k8s:io\.kubernetes",
    "k8s:!.*",
    "k8s:tier k8s:!ti",
    "k8s:!controller",
    "any:app",
    "k8s:!build",
    "container:!build",
    "reserved:!host",
    ":!app",
    "k8s:!",
    "k8s:!x*",
    "k8s:!(job|run)-",
    r"k8s:!batch\.kubernetes\.io/ k8s:!job-name k8s:!controller-uid",
    r"k8s:io\.cilium\.k8s\.policy k8s:!io\.cilium",
    "k8s:!job-(name",
    "k8s:",
    "k8s:![",
];

#[derive(serde::Deserialize)]
struct Answer {
    release: String,
    results: Vec<Verdict>,
}

#[derive(serde::Deserialize)]
struct Verdict {
    kept: Vec<String>,
    #[serde(default)]
    error: Option<String>,
}

/// Cilium's verdicts of release `which` (`v1.15` or `current`), one per
/// filter in [`FILTERS`] on [`LABELS`]; `None` when Go is missing outside CI.
fn cilium(which: &str) -> Option<Answer> {
    if !cilium_gc_testkit::tool_or_skip("go", "labels filter against Cilium's code") {
        return None;
    }
    let build = Command::new(cilium_gc_testkit::repo_path("tests/cilium/labelsfilter.sh"))
        .arg(which)
        .output()
        .expect("labelsfilter.sh runs");
    assert!(
        build.status.success(),
        "labelsfilter.sh {which}: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    let bin = String::from_utf8(build.stdout).unwrap();
    let cases: Vec<Value> = FILTERS
        .iter()
        .map(|f| json!({"filter": f.split_whitespace().collect::<Vec<_>>(), "labels": LABELS}))
        .collect();
    let mut child = Command::new(bin.trim())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("labelsfilter runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json!({ "cases": cases }).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("labelsfilter's JSON"))
}

/// What the plugin keeps of [`LABELS`] under `filter`, or its refusal.
fn plugin(filter: &str, defaults: FilterDefaults) -> Result<Vec<String>, Vec<String>> {
    let parsed = LabelFilter::with_defaults(filter, defaults);
    if !parsed.problems.is_empty() {
        return Err(parsed.problems);
    }
    let f = parsed.filter;
    let mut kept: Vec<String> = LABELS
        .iter()
        .map(|l| l.split_once('=').map_or(*l, |(k, _)| k).to_string())
        .filter(|l| f.accepts(l))
        .collect();
    kept.sort();
    Ok(kept)
}

#[test]
fn the_plugin_keeps_exactly_the_labels_cilium_keeps() {
    for (which, defaults, release) in [
        ("v1.15", FilterDefaults::Cilium115, "v1.15.6"),
        ("current", FilterDefaults::Cilium119, "v1.19.3"),
    ] {
        let Some(answer) = cilium(which) else {
            return;
        };
        assert_eq!(answer.release, release);
        assert_eq!(defaults.release(), release);
        assert_eq!(answer.results.len(), FILTERS.len());
        let mut refused = 0;
        for (filter, verdict) in FILTERS.iter().zip(&answer.results) {
            match (plugin(filter, defaults), &verdict.error) {
                (Ok(kept), None) => {
                    assert_eq!(kept, verdict.kept, "{release} labels={filter:?}")
                }
                (Err(_), Some(_)) => refused += 1,
                (ours, theirs) => panic!(
                    "{release} labels={filter:?}: plugin {ours:?}, Cilium {theirs:?} {:?}",
                    verdict.kept
                ),
            }
        }
        // The premise: the table has filters Cilium refuses, and the
        // defaults keep some labels and drop others.
        assert_eq!(refused, 3, "{release}: refused filters");
        let defaults_kept = &answer.results[0].kept;
        assert!(defaults_kept.len() > 3 && defaults_kept.len() < LABELS.len() - 3);
    }
}

/// The releases' defaults differ where the code does: 1.19 keeps the
/// policy labels by name and drops topology labels.
#[test]
fn the_defaults_follow_the_release() {
    let d115 = plugin("", FilterDefaults::Cilium115).unwrap();
    let d119 = plugin("", FilterDefaults::Cilium119).unwrap();
    assert!(d115.contains(&"k8s:topology.kubernetes.io/zone".to_string()));
    assert!(!d119.contains(&"k8s:topology.kubernetes.io/zone".to_string()));
    assert!(!d119.contains(&"k8s:controller-uid".to_string()));
}
