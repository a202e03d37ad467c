//! `diagnose` (issue 5): the diagnosis contract (`schema/diagnosis-v1.json`
//! is what `diagnose::schema()` generates, is valid draft 2020-12, documents
//! every field, and accepts real diagnoses), and, against the simulator,
//! one scenario per finding.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use cilium_gc::diagnose::types::{Finding, FindingCode, Level, Severity};
use cilium_gc::diagnose::{self, analyze, IdentityRecord, Input};
use cilium_gc::model::{Change, Identity, NAMESPACE_LABEL};
use cilium_gc::preflight::Crds;
use cilium_gc::report::{ConfigSource, IdRange};
use cilium_gc_sim::Kind;
use cilium_gc_sim::{default_cilium_config, Scenario};
use clap::Parser;
use kubectl_cilium_gc::cli::{Cli, Command, DiagnoseArgs};
use serde_json::{json, Value};

use crate::support::calm;
use crate::support::schema;
use crate::support::world::{assert_ok, binary, mark_of, World, TEST_TIMEOUT};

const TIME_FIELDS: [&str; 4] = ["generatedAt", "exhaustedAt", "time", "latest"];

/// Fails when the committed schema drifts from the types.
/// `UPDATE_SCHEMA=1 cargo test --test it diagnose::` rewrites it.
#[test]
fn committed_schema_matches_the_types() {
    schema::assert_committed(
        schema::DIAGNOSIS_SCHEMA_FILE,
        &schema::generated_diagnosis_text(),
        "src/diagnose/types.rs",
        "diagnose::committed_schema_matches_the_types",
    );
}

#[test]
fn schema_is_valid_draft_2020_12() {
    let s = schema::committed_diagnosis();
    let errors = schema::meta_errors(&s);
    assert!(
        errors.is_empty(),
        "not a valid draft 2020-12 schema:\n{errors:#?}"
    );
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["$id"], diagnose::types::SCHEMA_ID);
    assert_eq!(s["title"], "CiliumIdentityDiagnosis");
}

#[test]
fn schema_documents_every_field() {
    let problems = schema::documentation_problems(&schema::committed_diagnosis(), &TIME_FIELDS);
    assert!(
        problems.is_empty(),
        "schema problems:\n{}",
        problems.join("\n")
    );
}

fn ts(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

/// A diagnosis that sets every optional field, built through the public API.
fn full_example() -> diagnose::Diagnosis {
    let record =
        |id: u64, ns: &str, job: &str, mark: Option<&str>, change: Option<&str>| IdentityRecord {
            identity: Identity {
                name: id.to_string(),
                uid: format!("u{id}"),
                resource_version: "1".into(),
                created_at: Some(ts("2026-05-31T23:00:00Z")),
                labels: BTreeMap::new(),
                namespace: Some(ns.into()),
                mark: mark.map(str::to_owned),
                last_change: change.map(|t| Change {
                    manager: "cilium-agent".into(),
                    operation: "Update".into(),
                    time: Some(ts(t)),
                }),
            },
            security_labels: BTreeMap::from([
                ("k8s:io.kubernetes.pod.namespace".into(), ns.into()),
                ("k8s:job-name".into(), job.into()),
            ]),
        };
    let mut identities: Vec<IdentityRecord> = (0..12)
        .map(|k| {
            record(
                1000 + k,
                "jobs",
                &format!("job-{k}"),
                None,
                Some("2026-06-01T11:00:00Z"),
            )
        })
        .collect();
    identities.push(record(2000, "web", "x", Some("2026-06-01T00:00:00Z"), None));
    identities.push(record(2001, "web", "x", Some("not a time"), None));
    let input = Input {
        identities,
        malformed: vec!["ciliumidentity 9: no metadata.uid".into()],
        refs: BTreeMap::from([(1000, 1), (5000, 2)]),
        endpoints: 3,
        endpoint_slices: 0,
        crds: Crds {
            identities: true,
            endpoints: true,
            slices: false,
            slices_v2: false,
        },
        config: Some(BTreeMap::from([
            ("identity-gc-interval".into(), "0".into()),
            ("labels".into(), "k8s:!app".into()),
        ])),
        warnings: vec!["a warning".into()],
        server: Some("https://127.0.0.1:6443".into()),
        context: Some("sim".into()),
        redacted: false,
        workloads: Some(diagnose::gc_health::Workloads {
            operator_images: vec!["quay.io/cilium/operator-generic:v1.15.6".into()],
            agent_images: vec!["quay.io/cilium/cilium:v1.15.6".into()],
            operator_pods: vec![diagnose::types::OperatorPodStatus {
                name: "cilium-operator-1".into(),
                restarts: 2,
                started_at: Some(ts("2026-05-01T00:00:00Z")),
                running_since: Some(ts("2026-06-01T11:50:00Z")),
            }],
            problem: Some("cilium-operator pods in kube-system not found".into()),
        }),
    };
    let mut d = analyze(&input, ts("2026-06-01T12:00:00Z"));
    d.cluster.kubernetes_version = Some("v1.32.0".into());
    d
}

#[test]
fn full_example_conforms() {
    let d = serde_json::to_value(full_example()).unwrap();
    for (path, v) in [
        ("cluster.server", &d["cluster"]["server"]),
        ("cluster.context", &d["cluster"]["context"]),
        ("findings[0].suggestion", &d["findings"][0]["suggestion"]),
        ("age.exhaustionInSeconds", &d["age"]["exhaustionInSeconds"]),
        ("age.exhaustedAt", &d["age"]["exhaustedAt"]),
        (
            "age.created[0].toSeconds",
            &d["age"]["created"][0]["toSeconds"],
        ),
        (
            "configuration.suggestedLabels",
            &d["configuration"]["suggestedLabels"],
        ),
        (
            "configuration.gcIntervalSeconds",
            &d["configuration"]["gcIntervalSeconds"],
        ),
        (
            "integrity.stripLoopExamples[0].namespace",
            &d["integrity"]["stripLoopExamples"][0]["namespace"],
        ),
        (
            "churn.duplicates.examples[0]",
            &d["churn"]["duplicates"]["examples"][0],
        ),
        (
            "modifiers.managers[0].latest",
            &d["modifiers"]["managers"][0]["latest"],
        ),
    ] {
        assert!(!v.is_null(), "example misses {path}");
    }
    assert_eq!(d["kind"], "CiliumIdentityDiagnosis");
    assert_eq!(d["apiVersion"], cilium_gc::report::API_VERSION);
    assert_eq!(d["$schema"], diagnose::types::SCHEMA_ID);
    let errors = schema::errors(&schema::committed_diagnosis(), &d);
    assert!(
        errors.is_empty(),
        "example diagnosis rejected:\n{errors:#?}"
    );
    // YAML carries the same document.
    let mut yaml = Vec::new();
    kubectl_cilium_gc::diagnose::render(
        &full_example(),
        kubectl_cilium_gc::render::OutputFormat::Yaml,
        Default::default(),
        &mut yaml,
    )
    .unwrap();
    let back: Value = serde_saphyr::from_slice(&yaml).unwrap();
    assert_eq!(back, d);
}

/// Turns a good diagnosis into a broken one.
type Breakage = fn(&mut Value);

#[test]
fn broken_diagnoses_are_rejected() {
    let s = schema::committed_diagnosis();
    let good = serde_json::to_value(full_example()).unwrap();
    let cases: [(&str, Breakage); 5] = [
        ("unknown severity", |d| {
            d["findings"][0]["severity"] = json!("meh")
        }),
        ("camelCase code", |d| {
            d["findings"][0]["code"] = json!("gcDisabled")
        }),
        ("not a time", |d| d["generatedAt"] = json!("yesterday")),
        ("negative count", |d| {
            d["identitySpace"]["total"] = json!(-1)
        }),
        ("missing findings", |d| {
            d.as_object_mut().unwrap().remove("findings");
        }),
    ];
    for (what, break_it) in cases {
        let mut bad = good.clone();
        break_it(&mut bad);
        assert!(
            !schema::errors(&s, &bad).is_empty(),
            "{what}: the schema accepted it"
        );
    }
}

#[test]
fn schema_subcommand_prints_the_diagnosis_schema() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc"))
        .args(["schema", "diagnosis"])
        .output()
        .unwrap();
    assert_ok(&out);
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, schema::committed_diagnosis());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc"))
        .args(["schema"])
        .output()
        .unwrap();
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, schema::committed());
}

#[test]
fn unreachable_server_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc"))
        .args([
            "diagnose",
            "-o",
            "json",
            "--request-timeout",
            "2s",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "stdout is the diagnosis's alone");
    assert!(String::from_utf8_lossy(&out.stderr).contains("error:"));
}

// ---- Against the simulator: one scenario per finding ----
//
// Actors are off in every scenario so that the numbers are the seed's and
// the mutations the test makes, nothing else. Expected numbers are read
// back from the simulator's objects, not from the diagnosis.

/// `scenario` with actors and faults off.
/// The small preset, calm.
fn small() -> Scenario {
    Scenario::preset("small").expect("preset").calm()
}

/// `diagnose` flags as the CLI would parse them.
fn diagnose_args(extra: &[&str]) -> DiagnoseArgs {
    let mut argv = vec!["kubectl-cilium_gc", "diagnose"];
    argv.extend_from_slice(extra);
    match Cli::try_parse_from(argv).expect("test flags parse").command {
        Command::Diagnose(a) => a,
        other => panic!("not diagnose: {other:?}"),
    }
}

/// Diagnose the world through the library (real client over HTTPS), and
/// check the document against the committed schema on the way.
async fn diagnose_world(w: &World, extra: &[&str]) -> diagnose::Diagnosis {
    let args = diagnose_args(extra);
    let d = tokio::time::timeout(
        TEST_TIMEOUT,
        diagnose::run_diagnosis(&w.kube(), &args.options()),
    )
    .await
    .expect("diagnosis finished in time")
    .expect("diagnosis succeeds");
    assert_conforms(&serde_json::to_value(&d).unwrap());
    d
}

fn assert_conforms(d: &Value) {
    let errors = schema::errors(&schema::committed_diagnosis(), d);
    assert!(
        errors.is_empty(),
        "diagnosis does not validate:\n{}",
        errors.join("\n")
    );
}

fn codes(d: &diagnose::Diagnosis) -> Vec<FindingCode> {
    d.findings.iter().map(|f| f.code).collect()
}

fn finding(d: &diagnose::Diagnosis, code: FindingCode) -> &Finding {
    d.findings
        .iter()
        .find(|f| f.code == code)
        .unwrap_or_else(|| panic!("no {code:?} in {:#?}", d.findings))
}

/// Findings must come most severe first.
fn assert_sorted(d: &diagnose::Diagnosis) {
    let sev: Vec<Severity> = d.findings.iter().map(|f| f.severity).collect();
    let mut sorted = sev.clone();
    sorted.sort();
    assert_eq!(sev, sorted, "findings not most severe first");
}

/// Every identity object on the server.
fn identity_objects(w: &World) -> Vec<Value> {
    w.sim
        .identity_names()
        .iter()
        .filter_map(|n| w.sim.identity(n))
        .collect()
}

/// Per security-label key: (distinct values, identities carrying it).
fn label_key_counts(objs: &[Value]) -> BTreeMap<String, (u64, u64)> {
    let mut m: BTreeMap<String, (BTreeSet<String>, u64)> = BTreeMap::new();
    for o in objs {
        for (k, v) in o["security-labels"].as_object().into_iter().flatten() {
            let e = m.entry(k.clone()).or_default();
            e.0.insert(v.as_str().unwrap_or_default().to_owned());
            e.1 += 1;
        }
    }
    m.into_iter()
        .map(|(k, (vals, n))| (k, (vals.len() as u64, n)))
        .collect()
}

/// Endpoint references per identity id, counted from the CiliumEndpoints.
fn endpoint_refs(w: &World) -> HashMap<u64, u64> {
    let mut refs = HashMap::new();
    for key in w.sim.endpoint_keys() {
        let ep = w.sim.object(Kind::Endpoint, &key).expect("endpoint");
        let id = ep
            .pointer("/status/identity/id")
            .and_then(Value::as_u64)
            .expect("endpoint has an identity id");
        *refs.entry(id).or_default() += 1;
    }
    refs
}

fn percent(part: u64, whole: u64) -> f64 {
    (part as f64 * 1000.0 / whole as f64).round() / 10.0
}

fn config(extra: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    let mut c = default_cilium_config("crd");
    for (k, v) in extra {
        c.insert((*k).into(), (*v).into());
    }
    Some(c)
}

const JOB_KEYS: [&str; 4] = [
    "k8s:batch.kubernetes.io/controller-uid",
    "k8s:batch.kubernetes.io/job-name",
    "k8s:controller-uid",
    "k8s:job-name",
];

/// A batch cluster: 1,000 identities, 90% of them for Jobs (one label value
/// per Job), all created in the last 12 hours.
fn batch_cluster(labels: Option<&str>) -> Scenario {
    Scenario {
        identities: 1_000,
        job_ratio: 0.9,
        endpoints: 600,
        stale_ratio: 0.4,
        namespaces: 5,
        age_spread: Duration::from_secs(12 * 3600),
        cilium_config: config(&labels.map(|l| [("labels", l)]).unwrap_or_default()),
        ..small()
    }
}

/// 31,000 identities in a range of 32,512 (cluster-id 0 with 511 clusters:
/// 256-32767): 95.3% full, all created in the last hour, so at that rate the
/// remaining 1,512 ids last about an hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_exhaustion_is_critical_with_the_numbers() {
    let s = Scenario {
        identities: 31_000,
        endpoints: 200,
        job_ratio: 0.0,
        age_spread: Duration::from_secs(3600),
        cilium_config: config(&[("max-connected-clusters", "511")]),
        ..small()
    };
    let w = World::start(s).await;
    let d = diagnose_world(&w, &["--page-size", "5000"]).await;
    let sp = &d.identity_space;
    assert_eq!(
        sp.local_range,
        IdRange {
            min: 256,
            max: 32_767
        }
    );
    assert_eq!(sp.total, 31_001, "31,000 local and one cluster-mesh id");
    assert_eq!(sp.capacity, 32_512);
    assert_eq!(sp.allocated, 31_000);
    assert_eq!(sp.headroom, 1_512);
    assert_eq!(sp.utilisation_percent, 95.3);
    assert_eq!(sp.level, Level::Critical);
    assert_eq!(sp.states.not_local, 1);
    assert_eq!(sp.states.in_use as usize, w.sim.referenced_ids().len());
    assert_eq!(sp.states.in_use, 200);
    let st = &sp.states;
    assert_eq!(
        st.in_use
            + st.stale_candidates
            + st.unused_marked
            + st.unused_unmarked
            + st.too_young
            + st.not_local
            + st.malformed_mark,
        sp.total,
        "every identity counted once"
    );

    let full = finding(&d, FindingCode::IdentitySpaceNearlyFull);
    assert_eq!(full.severity, Severity::Critical);
    assert_eq!(
        full.evidence[0],
        "31,000 of 32,512 local ids allocated (95.3%), 1,512 free (range 256-32767)"
    );
    assert!(full.message.contains("95.3% full"), "{}", full.message);

    // Everything was created within the last 61 minutes; the cluster-mesh
    // id does not use up the local range, so only the 31,000 count for the
    // rate.
    assert_eq!(d.age.created[0].count + d.age.created[1].count, 31_001);
    assert_eq!(d.age.created_last24h, 31_000);
    let rate = 31_000.0 / 24.0;
    assert_eq!(
        d.age.creation_rate_per_hour,
        (rate * 100.0_f64).round() / 100.0
    );
    let secs = (1_512.0 / rate * 3600.0_f64).round();
    assert_eq!(d.age.exhaustion_in_seconds, Some(secs));
    let soon = finding(&d, FindingCode::ExhaustionSoon);
    assert_eq!(soon.severity, Severity::Critical, "under a day");
    assert!(
        soon.evidence[0].starts_with("31,000 identities created in the last 24h"),
        "{:?}",
        soon.evidence
    );
    assert_eq!(d.findings[0].severity, Severity::Critical);
    assert_sorted(&d);
    assert!(!codes(&d).contains(&FindingCode::GcDisabled));
}

/// Jobs with no `labels` filter: the four job keys split the space and the
/// suggested filter excludes exactly them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_churn_names_the_keys_and_the_filter_to_set() {
    let w = World::start(batch_cluster(None)).await;
    let objs = identity_objects(&w);
    let counts = label_key_counts(&objs);
    let d = diagnose_world(&w, &[]).await;
    let total = objs.len() as u64;
    assert_eq!(d.identity_space.total, total);

    let jobs = counts["k8s:job-name"].1;
    assert!(jobs > 800, "90% of 1,000 are Jobs ({jobs})");
    for key in JOB_KEYS {
        let stat = d
            .churn
            .label_keys
            .iter()
            .find(|k| k.key == key)
            .unwrap_or_else(|| panic!("{key} not ranked"));
        let (distinct, carried) = counts[key];
        assert_eq!(
            (stat.distinct_values, stat.identities),
            (distinct, carried),
            "{key}"
        );
        assert_eq!(distinct, jobs, "{key}: one value per Job");
        assert_eq!(stat.share_percent, percent(carried, total));
        assert!(stat.high_cardinality, "{key}");
    }
    let high: Vec<&str> = d
        .churn
        .label_keys
        .iter()
        .filter(|k| k.high_cardinality)
        .map(|k| k.key.as_str())
        .collect();
    assert_eq!(high, JOB_KEYS, "only the job keys drive churn");
    let app = d
        .churn
        .label_keys
        .iter()
        .find(|k| k.key == "k8s:app")
        .unwrap();
    assert_eq!(app.distinct_values, counts["k8s:app"].0);

    let hc = finding(&d, FindingCode::HighCardinalityLabels);
    assert_eq!(hc.severity, Severity::Warning);
    assert!(
        hc.message.starts_with("4 security-label keys"),
        "{}",
        hc.message
    );
    assert_eq!(hc.evidence.len(), 4);
    let missing = finding(&d, FindingCode::LabelsFilterMissing);
    assert_eq!(missing.severity, Severity::Warning);
    assert_eq!(d.configuration.leaky_keys, JOB_KEYS);
    assert_eq!(
        d.configuration.suggested_labels.as_deref(),
        Some(
            r"k8s:!batch\.kubernetes\.io/controller-uid k8s:!batch\.kubernetes\.io/job-name k8s:!controller-uid k8s:!job-name"
        )
    );
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterLeaky));

    // Created over the last 12 hours: every local identity is the day's
    // churn (the cluster-mesh one does not count), but 64k free ids at
    // 41.7/h last longer than a week.
    let local = total - 1;
    assert_eq!(d.age.created_last24h, local);
    assert_eq!(
        d.age.creation_rate_per_hour,
        (local as f64 / 24.0 * 100.0).round() / 100.0
    );
    assert!(!codes(&d).contains(&FindingCode::ExhaustionSoon));
    assert_sorted(&d);
}

/// A filter that excludes the `batch.kubernetes.io/` keys but not their
/// short twins is leaky; the suggestion keeps the current patterns, adds the
/// missing two, and a cluster configured with it has no leak left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_labels_filter_is_extended_and_the_extension_closes_it() {
    let current = r"k8s:!batch\.kubernetes\.io/controller-uid k8s:!batch\.kubernetes\.io/job-name";
    let w = World::start(batch_cluster(Some(current))).await;
    let d = diagnose_world(&w, &[]).await;
    assert_eq!(
        d.configuration.leaky_keys,
        ["k8s:controller-uid", "k8s:job-name"]
    );
    let suggested = format!("{current} k8s:!controller-uid k8s:!job-name");
    assert_eq!(
        d.configuration.suggested_labels.as_deref(),
        Some(suggested.as_str())
    );
    let leaky = finding(&d, FindingCode::LabelsFilterLeaky);
    assert_eq!(leaky.severity, Severity::Warning);
    assert!(leaky.message.contains("lets 2 high-cardinality keys"));
    assert_eq!(
        leaky.evidence,
        vec![
            format!("current labels: {current:?}"),
            "passes: k8s:controller-uid".to_string(),
            "passes: k8s:job-name".to_string(),
        ]
    );
    assert!(leaky
        .suggestion
        .as_ref()
        .unwrap()
        .contains(&suggested.replace('\\', r"\\")));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterMissing));
    let labels = d
        .configuration
        .values
        .iter()
        .find(|v| v.key == "labels")
        .unwrap();
    assert_eq!(
        (labels.value.as_str(), labels.source),
        (current, ConfigSource::CiliumConfig)
    );
    w.sim.shutdown().await;

    // Same cluster with the suggestion applied: the keys are still
    // high-cardinality in the existing objects, but none passes the filter.
    let w = World::start(batch_cluster(Some(&suggested))).await;
    let d = diagnose_world(&w, &[]).await;
    assert!(d.configuration.leaky_keys.is_empty());
    assert!(d.configuration.suggested_labels.is_none());
    assert!(codes(&d).contains(&FindingCode::HighCardinalityLabels));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterLeaky));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterMissing));
}

/// Identities that CiliumEndpoints still reference are deleted behind their
/// backs: the diagnosis names the ids and counts the references.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_references_are_counted_per_endpoint() {
    let w = World::start(small()).await;
    let refs = endpoint_refs(&w);
    // Two ids several endpoints share, three with one endpoint each.
    let mut shared: Vec<u64> = refs
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| *id)
        .collect();
    let mut single: Vec<u64> = refs
        .iter()
        .filter(|(_, n)| **n == 1)
        .map(|(id, _)| *id)
        .collect();
    shared.sort_unstable();
    single.sort_unstable();
    assert!(
        shared.len() >= 2 && single.len() >= 3,
        "seed shares some ids"
    );
    let mut gone: Vec<u64> = shared[..2].iter().chain(&single[..3]).copied().collect();
    gone.sort_unstable();
    let in_use_before = w.sim.referenced_ids().len() as u64;
    for id in &gone {
        w.sim
            .delete_object(Kind::Identity, &id.to_string(), "someone", false)
            .unwrap();
    }
    let d = diagnose_world(&w, &[]).await;
    let want_refs: u64 = gone.iter().map(|id| refs[id]).sum();
    assert!(want_refs > 5);
    let i = &d.integrity;
    assert_eq!(i.dangling_ids, 5);
    assert_eq!(i.dangling_references, want_refs);
    assert_eq!(i.dangling_examples, gone);
    assert_eq!(d.identity_space.states.in_use, in_use_before - 5);
    assert_eq!(d.cluster.endpoints as usize, w.sim.endpoint_keys().len());
    let f = finding(&d, FindingCode::DanglingReferences);
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.message.starts_with(&format!(
            "{want_refs} endpoint references point at 5 identities that do not exist"
        )),
        "{}",
        f.message
    );
    let ids: Vec<String> = gone.iter().map(u64::to_string).collect();
    assert_eq!(f.evidence, vec![format!("missing ids: {}", ids.join(", "))]);
}

/// Endpoint references per identity id, counted from the
/// CiliumEndpointSlices as a client lists them (one per endpoint entry).
async fn slice_refs(w: &World) -> HashMap<u64, u64> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&w.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let req = http::Request::get("/apis/cilium.io/v2alpha1/ciliumendpointslices")
        .body(Vec::new())
        .unwrap();
    let list: Value = client.request(req).await.expect("slices listed");
    let mut refs = HashMap::new();
    for ces in list["items"].as_array().unwrap() {
        for ep in ces["endpoints"].as_array().into_iter().flatten() {
            *refs.entry(ep["id"].as_u64().unwrap()).or_default() += 1;
        }
    }
    refs
}

/// The same over CiliumEndpointSlices: a slice counts once per endpoint in
/// it, and usage comes from the slices alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_references_are_counted_in_endpoint_slices() {
    let w = World::preset("slices").await;
    assert_eq!(w.sim.actor_rates(), Default::default(), "no actors");
    let refs = slice_refs(&w).await;
    let mut by_count: Vec<(u64, u64)> = refs.iter().map(|(id, n)| (*n, *id)).collect();
    by_count.sort_unstable_by(|a, b| b.cmp(a));
    let mut gone: Vec<u64> = by_count[..3].iter().map(|(_, id)| *id).collect();
    gone.sort_unstable();
    let in_use_before = w.sim.referenced_ids().len() as u64;
    assert_eq!(in_use_before as usize, refs.len());
    for id in &gone {
        w.sim
            .delete_object(Kind::Identity, &id.to_string(), "someone", false)
            .unwrap();
    }
    let d = diagnose_world(&w, &[]).await;
    assert!(d.cluster.endpoint_slice_crd);
    assert_eq!(
        d.cluster.endpoint_slices as usize,
        w.sim.count(Kind::EndpointSlice)
    );
    assert_eq!(d.cluster.endpoints, 0);
    assert_eq!(d.identity_space.states.in_use, in_use_before - 3);
    let want_refs: u64 = gone.iter().map(|id| refs[id]).sum();
    assert!(want_refs > 3, "the most shared ids were deleted");
    assert_eq!(d.integrity.dangling_ids, 3);
    assert_eq!(d.integrity.dangling_references, want_refs);
    assert_eq!(d.integrity.dangling_examples, gone);
    assert!(!codes(&d).contains(&FindingCode::UsageUnknown));
}

/// Unused identities the operator marked long ago lose their mark to
/// cilium-agent: the mark-strip loop. Before the strips there is none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_strip_loop_is_seen_in_managed_fields() {
    let w = World::start(small()).await;
    let before = diagnose_world(&w, &[]).await;
    assert_eq!(before.integrity.strip_loop, 0, "the seed has no strips");
    assert!(!codes(&before).contains(&FindingCode::MarkStripLoop));

    let used = w.sim.referenced_ids();
    let now = w.sim.now();
    let stale_marked: Vec<String> = w
        .sim
        .identity_names()
        .into_iter()
        .filter(|n| {
            n.parse::<u64>()
                .is_ok_and(|id| id < 65_536 && !used.contains(&id))
        })
        .filter(|n| {
            w.sim
                .identity(n)
                .and_then(|o| mark_of(&o))
                .is_some_and(|m| now.duration_since(m).as_secs() > 2 * 3600)
        })
        .take(6)
        .collect();
    assert_eq!(stale_marked.len(), 6, "the seed has stale identities");
    for name in &stale_marked {
        // The agent removes the operator's mark (an Update by cilium-agent).
        w.sim.set_heartbeat(name, None).unwrap();
    }
    let d = diagnose_world(&w, &[]).await;
    let i = &d.integrity;
    assert_eq!(i.strip_loop, 6);
    let named: BTreeSet<&str> = i
        .strip_loop_examples
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    let want: BTreeSet<&str> = stale_marked.iter().map(String::as_str).collect();
    assert_eq!(named, want);
    for e in &i.strip_loop_examples {
        assert_eq!(e.manager, "cilium-agent");
        let obj = w.sim.identity(&e.name).unwrap();
        assert_eq!(
            e.namespace.as_deref(),
            obj["security-labels"][format!("k8s:{NAMESPACE_LABEL}")].as_str()
        );
    }
    // They moved from stale to unused-and-unmarked.
    let (b, a) = (&before.identity_space.states, &d.identity_space.states);
    assert_eq!(a.stale_candidates, b.stale_candidates - 6);
    assert_eq!(
        a.unused_unmarked + a.too_young,
        b.unused_unmarked + b.too_young + 6
    );
    // The agent is the newest writer of exactly those six.
    let agent = d
        .modifiers
        .managers
        .iter()
        .find(|m| m.manager == "cilium-agent")
        .expect("cilium-agent listed");
    assert_eq!(agent.identities, 6);
    let f = finding(&d, FindingCode::MarkStripLoop);
    assert_eq!(f.severity, Severity::Warning, "five or more");
    assert!(
        f.message.starts_with("6 unused identities"),
        "{}",
        f.message
    );
    assert_eq!(f.evidence.last().unwrap(), "managers: cilium-agent");
}

/// `identity-gc-interval: 0s` turns the operator's GC off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_disabled_is_reported_from_cilium_config() {
    let s = Scenario {
        cilium_config: config(&[("identity-gc-interval", "0s")]),
        ..small()
    };
    let w = World::start(s).await;
    let d = diagnose_world(&w, &[]).await;
    assert_eq!(d.configuration.gc_interval_seconds, Some(0.0));
    let gc = d
        .configuration
        .values
        .iter()
        .find(|v| v.key == "identity-gc-interval")
        .unwrap();
    assert_eq!(
        (gc.value.as_str(), gc.source),
        ("0s", ConfigSource::CiliumConfig)
    );
    let f = finding(&d, FindingCode::GcDisabled);
    assert_eq!(f.severity, Severity::Warning, "the space is not full");
    assert_eq!(
        f.evidence,
        vec!["300 of 65,280 local ids allocated (0.5%), 64,980 free (range 256-65535)"]
    );
    assert_eq!(d.identity_space.level, Level::Ok);
}

/// Every namespace name and label value the scenario has, for leak checks.
/// `default` (cluster and service-account values) is left out: the document
/// uses the word itself (`"source": "default"`); where it could leak as a
/// label value the structural check in the test covers it.
fn scenario_secrets(w: &World) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    for o in identity_objects(w) {
        for m in [&o["security-labels"], &o["metadata"]["labels"]] {
            for v in m.as_object().into_iter().flatten().map(|(_, v)| v) {
                s.insert(v.as_str().unwrap_or_default().to_owned());
            }
        }
    }
    for key in w.sim.endpoint_keys() {
        s.insert(key.split('/').next().unwrap().to_owned());
    }
    s.remove("default");
    s.remove("");
    s
}

/// `--redact` through the binary: none of the scenario's namespaces, label
/// values, nor the server URL appear in the JSON or the text; the plain run
/// shows them (so the check means something) and its JSON validates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redact_leaves_no_namespace_label_value_or_server() {
    let w = World::start(small()).await;
    // Exercise every place a name can appear: strip-loop examples carry a
    // namespace, duplicate groups carry label values.
    let used = w.sim.referenced_ids();
    for name in w
        .sim
        .identity_names()
        .into_iter()
        .filter(|n| {
            n.parse::<u64>()
                .is_ok_and(|id| id < 65_536 && !used.contains(&id))
        })
        .filter(|n| w.sim.identity(n).and_then(|o| mark_of(&o)).is_some())
        .take(3)
    {
        w.sim.set_heartbeat(&name, None).unwrap();
    }
    let secrets = scenario_secrets(&w);
    assert!(secrets.iter().any(|s| s.starts_with("team-")));
    let server = w.sim.url();
    let host = w.sim.addr().to_string();

    let plain = w.bin(&["diagnose", "-o", "json"]).await;
    assert_eq!(
        plain.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let plain_json: Value = serde_json::from_slice(&plain.stdout).expect("stdout is JSON");
    assert_conforms(&plain_json);
    let plain_text = String::from_utf8(plain.stdout).unwrap();
    assert!(plain_text.contains("team-00") && plain_text.contains(&server));
    assert_eq!(plain_json["redacted"], false);

    let red = w.bin(&["diagnose", "--redact", "-o", "json"]).await;
    assert_eq!(
        red.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&red.stderr)
    );
    let doc: Value = serde_json::from_slice(&red.stdout).expect("stdout is JSON");
    assert_conforms(&doc);
    assert_eq!(doc["redacted"], true);
    assert!(doc["cluster"]["server"]
        .as_str()
        .unwrap()
        .starts_with("server-"));
    assert!(doc["cluster"]["context"]
        .as_str()
        .unwrap()
        .starts_with("context-"));
    assert!(doc["integrity"]["stripLoopExamples"][0]["namespace"]
        .as_str()
        .unwrap()
        .starts_with("ns-"));
    for ns in doc["churn"]["namespacesByIdentities"].as_array().unwrap() {
        assert!(ns["namespace"].as_str().unwrap().starts_with("ns-"), "{ns}");
    }
    let groups = doc["churn"]["duplicates"]["examples"].as_array().unwrap();
    assert!(!groups.is_empty(), "the seed has duplicate label sets");
    for g in groups {
        for (k, v) in g["labels"].as_object().unwrap() {
            let v = v.as_str().unwrap();
            assert!(v.starts_with("v-") || v.starts_with("ns-"), "{k}={v}");
        }
    }
    let text_red = w.bin(&["diagnose", "--redact"]).await;
    assert_eq!(text_red.status.code(), Some(0));
    for (what, out) in [("json", &red.stdout), ("text", &text_red.stdout)] {
        let out = String::from_utf8_lossy(out);
        for s in secrets.iter().chain([&server, &host]) {
            assert!(!out.contains(s.as_str()), "--redact {what} leaks {s:?}");
        }
        assert!(!out.contains("127.0.0.1"), "--redact {what} leaks the host");
    }
}

/// The hidden `--demo-scenario` runs the real path against a simulator it
/// starts itself; an unknown name is a flag error listing the choices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_scenario_diagnoses_a_simulated_cluster() {
    let run = |args: &'static [&'static str]| async move {
        let mut cmd = binary();
        cmd.args(args);
        tokio::time::timeout(TEST_TIMEOUT, cmd.output())
            .await
            .expect("binary finished in time")
            .expect("binary runs")
    };
    let out = run(&["diagnose", "--demo-scenario", "small", "-o", "json"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_conforms(&doc);
    assert_eq!(doc["identitySpace"]["total"], 301);
    assert!(doc["cluster"]["server"]
        .as_str()
        .unwrap()
        .starts_with("https://127.0.0.1:"));
    let codes: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"stale-backlog"), "{codes:?}");

    let text = run(&["diagnose", "--demo-scenario", "small"]).await;
    assert_eq!(text.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&text.stdout).starts_with("Cilium identity diagnosis"));

    let bad = run(&["diagnose", "--demo-scenario", "nope"]).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(bad.stdout.is_empty());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("unknown scenario \"nope\"") && err.contains("small"),
        "{err}"
    );
}

/// Every table in `md`: (header, its rows). Fails when a table's separator
/// row is missing or a row's column count differs from its header's.
pub fn markdown_tables(md: &str) -> Vec<(Vec<String>, usize)> {
    let columns = |row: &str| -> Vec<String> {
        let mut cells = vec![String::new()];
        let mut prev = ' ';
        for c in row.trim().chars() {
            if c == '|' && prev != '\\' {
                cells.push(String::new());
            } else {
                cells.last_mut().unwrap().push(c);
            }
            prev = c;
        }
        // Leading and trailing pipes leave empty ends.
        assert!(
            cells.len() >= 3 && cells[0].is_empty() && cells.last().unwrap().is_empty(),
            "{row}"
        );
        cells[1..cells.len() - 1]
            .iter()
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut tables = Vec::new();
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with('|') {
            i += 1;
            continue;
        }
        assert!(
            i == 0 || lines[i - 1].trim().is_empty(),
            "a table needs a blank line before it: {}",
            lines[i]
        );
        let header = columns(lines[i]);
        let sep = columns(lines.get(i + 1).expect("separator row"));
        assert!(
            sep.iter().all(|c| c == "---"),
            "bad separator under {header:?}"
        );
        assert_eq!(sep.len(), header.len(), "separator of {header:?}");
        let mut rows = 0;
        i += 2;
        while i < lines.len() && lines[i].starts_with('|') {
            assert_eq!(
                columns(lines[i]).len(),
                header.len(),
                "row {:?} under {header:?}",
                lines[i]
            );
            rows += 1;
            i += 1;
        }
        tables.push((header, rows));
    }
    tables
}

/// `diagnose -o markdown` of the seed scenario (issue 15): the verdict, the
/// headings, tables with the right column counts, `<details>` balanced, the
/// Kubernetes version; under `--redact` no namespace, label value or server
/// of the cluster appears, while the plain rendering shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_of_the_seed_diagnosis_is_a_well_formed_ticket_and_redacts() {
    let w = World::start(calm("seed")).await;
    let run = |args: &'static [&'static str]| {
        let w = &w;
        async move {
            let out = w.bin(args).await;
            assert_ok(&out);
            String::from_utf8(out.stdout).unwrap()
        }
    };
    let plain = run(&["diagnose", "-o", "markdown"]).await;
    let red = run(&["diagnose", "-o", "markdown", "--redact"]).await;
    let json: Value = serde_json::from_str(&run(&["diagnose", "-o", "json"]).await).unwrap();
    for md in [&plain, &red] {
        assert!(
            md.starts_with("# Cilium identity diagnosis\n\n**Verdict: "),
            "{md}"
        );
        let headings: Vec<&str> = md.lines().filter(|l| l.starts_with("## ")).collect();
        for h in [
            "## Findings",
            "## Identity space",
            "## Age and rate",
            "## Churn",
            "## Configuration",
        ] {
            assert!(headings.contains(&h), "{h} missing from {headings:?}");
        }
        assert_eq!(
            md.matches("<details>").count(),
            md.matches("</details>").count()
        );
        let tables = markdown_tables(md);
        let header = |first: &str| {
            tables
                .iter()
                .find(|(h, _)| h[0] == first)
                .unwrap_or_else(|| panic!("no table headed {first}: {tables:?}"))
        };
        let findings = header("Severity");
        assert_eq!(
            findings.0,
            ["Severity", "Code", "Finding", "Evidence", "Next step"]
        );
        assert_eq!(findings.1, json["findings"].as_array().unwrap().len());
        assert_eq!(header("State").0.len(), 2);
        assert_eq!(header("State").1, 8, "seven states and the total");
        assert_eq!(header("Label key").0.len(), 5);
        assert_eq!(header("Namespace").0.len(), 4);
        assert_eq!(header("Key").0.len(), 3);
        let k8s = json["cluster"]["kubernetesVersion"]
            .as_str()
            .expect("the sim serves /version");
        assert!(md.contains(&format!("| Kubernetes | {k8s} |")), "{md}");
        assert!(md.contains(&json["tool"]["version"].as_str().unwrap().to_string()));
        let generated = md
            .lines()
            .find_map(|l| l.strip_prefix("| Generated at | "))
            .expect("the time is shown");
        generated
            .trim_end_matches(" |")
            .parse::<jiff::Timestamp>()
            .expect("an RFC 3339 time");
    }
    // The seed is critical: the verdict says so.
    assert!(red.contains("**Verdict: 🔴 critical"), "{}", &red[..300]);

    let namespaces: Vec<String> = json["churn"]["namespacesByIdentities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespace"].as_str().unwrap().to_string())
        .collect();
    assert!(!namespaces.is_empty());
    for ns in &namespaces {
        assert!(
            plain.contains(&format!("| {ns} |")),
            "plain rendering shows {ns}"
        );
    }
    for s in scenario_secrets(&w)
        .iter()
        .chain(namespaces.iter())
        .chain([&w.sim.url()])
    {
        assert!(!red.contains(s.as_str()), "--redact markdown leaks {s:?}");
    }
    assert!(!red.contains("127.0.0.1"));
    assert!(red.contains("| Redacted | yes"));
    assert!(red.contains("| ns-"), "namespaces appear as tokens");
}

// ---- Why cilium-operator's GC is not keeping up (issue 15) ----

/// Unused local identities on the server with their objects.
fn unused_identities(w: &World) -> Vec<(String, Value)> {
    let used = w.sim.referenced_ids();
    w.sim
        .identity_names()
        .into_iter()
        .filter(|n| {
            n.parse::<u64>()
                .is_ok_and(|id| (256..65_536).contains(&id) && !used.contains(&id))
        })
        .filter_map(|n| w.sim.identity(&n).map(|o| (n, o)))
        .collect()
}

/// The seed's stale marks are days old with a 30m timeout and a 15m
/// interval: GC is not completing passes. The finding names the oldest mark
/// and its identity (read back from the server), says since when, and
/// counts the overdue marks; with every mark fresh it is silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_not_completing_names_the_oldest_mark_and_since_when() {
    let w = World::start(small()).await;
    let now = w.sim.now();
    let expected = Duration::from_secs(45 * 60);
    let marks: Vec<(String, jiff::Timestamp)> = unused_identities(&w)
        .into_iter()
        .filter_map(|(n, o)| mark_of(&o).map(|m| (n, m)))
        .filter(|(_, m)| now.duration_since(*m).as_secs_f64() > 1800.0)
        .collect();
    let (oldest_name, oldest) = marks.iter().min_by_key(|(_, m)| *m).cloned().unwrap();
    let overdue = marks
        .iter()
        .filter(|(_, m)| now.duration_since(*m).as_secs_f64() > 3.0 * expected.as_secs_f64())
        .count() as u64;
    assert!(overdue > 0, "the seed has old marks");

    let d = diagnose_world(&w, &[]).await;
    let h = d.gc_health.as_ref().expect("gc health");
    assert_eq!(h.expected_collection_seconds, expected.as_secs_f64());
    assert_eq!(h.oldest_mark, Some(oldest));
    assert_eq!(
        h.oldest_mark_identity.as_deref(),
        Some(oldest_name.as_str())
    );
    assert_eq!(h.overdue_marks, overdue);
    let total: u64 = h.overdue_distribution.iter().map(|b| b.count).sum();
    assert_eq!(total as usize, marks.len());
    let since = oldest + jiff::SignedDuration::from_mins(30);
    assert_eq!(h.not_completed_since, Some(since));
    let f = finding(&d, FindingCode::GcNotCompleting);
    assert!(f.message.contains(&since.to_string()), "{}", f.message);
    assert!(f.evidence[0].contains(&oldest_name), "{:?}", f.evidence);
    assert!(f.suggestion.is_some());
    assert_sorted(&d);

    // Every stale mark made 40 minutes old: a working operator's view.
    let fresh = (now - jiff::SignedDuration::from_mins(40)).to_string();
    for (name, _) in &marks {
        w.sim.set_heartbeat(name, Some(&fresh)).unwrap();
    }
    let d = diagnose_world(&w, &[]).await;
    assert!(
        !codes(&d).contains(&FindingCode::GcNotCompleting),
        "{:#?}",
        d.findings
    );
    assert_eq!(d.gc_health.unwrap().overdue_marks, 0);
}

/// The operator and agent images map to known defects with their upstream
/// issue: 1.15 to #33142 (fix #33143, backport unconfirmed) and #47571, a
/// 1.16 agent to #35946. Without permission to read the workloads the
/// diagnosis says so and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_defects_follow_the_images_and_a_missing_permission_is_said() {
    use cilium_gc_sim::{CiliumInstall, Denial};
    let w = World::start(small()).await;
    let d = diagnose_world(&w, &[]).await;
    let c = d
        .gc_health
        .as_ref()
        .unwrap()
        .cilium
        .as_ref()
        .expect("workloads read");
    assert_eq!(c.operator_version.as_deref(), Some("1.15.6"));
    assert_eq!(
        c.operator_images,
        ["quay.io/cilium/operator-generic:v1.15.6"]
    );
    assert_eq!(c.operator_pods.len(), 2);
    let f = finding(&d, FindingCode::KnownGcDefect);
    assert_eq!(f.severity, Severity::Warning);
    let evidence = f.evidence.join("\n");
    assert!(
        evidence.contains("https://github.com/cilium/cilium/issues/33142"),
        "{evidence}"
    );
    assert!(evidence.contains("#33143"), "{evidence}");
    assert!(
        evidence.contains("https://github.com/cilium/cilium/pull/47571"),
        "{evidence}"
    );
    assert!(!evidence.contains("35946"), "{evidence}");

    let mut s = small();
    s.cilium_install = Some(CiliumInstall::version("v1.16.3"));
    let w = World::start(s).await;
    let d = diagnose_world(&w, &[]).await;
    let evidence = finding(&d, FindingCode::KnownGcDefect).evidence.join("\n");
    assert!(
        evidence.contains("issues/35946") && !evidence.contains("33142"),
        "{evidence}"
    );

    let mut s = small();
    s.rbac_denials = vec![
        Denial::new("get", "deployments"),
        Denial::new("get", "daemonsets"),
        Denial::new("list", "pods"),
    ];
    let w = World::start(s).await;
    let d = diagnose_world(&w, &[]).await;
    let h = d.gc_health.as_ref().unwrap();
    assert!(h.cilium.is_none());
    let problem = h.workloads_problem.as_deref().expect("the problem is said");
    assert!(
        problem.contains("no permission to read deployment kube-system/cilium-operator (optional)"),
        "{problem}"
    );
    assert!(d.warnings.iter().any(|w| w == problem));
    assert!(!codes(&d).contains(&FindingCode::KnownGcDefect));
    assert!(
        codes(&d).contains(&FindingCode::GcNotCompleting),
        "the rest goes on"
    );
}

/// An operator pod that restarted 4 times, last 5 minutes ago: the finding
/// gives the pod, its restarts and times, and cites #28339.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_restarts_are_reported_with_counts_and_times() {
    use cilium_gc_sim::CiliumInstall;
    let mut s = small();
    let mut install = CiliumInstall::default();
    install.operator_pods[0].restarts = 4;
    install.operator_pods[0].running_for = Duration::from_secs(300);
    let pod = install.operator_pods[0].name.clone();
    s.cilium_install = Some(install);
    let w = World::start(s).await;
    let d = diagnose_world(&w, &[]).await;
    let f = finding(&d, FindingCode::OperatorRestarts);
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.message.contains("restarted 4 times") && f.message.contains("28339"),
        "{}",
        f.message
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.starts_with(&format!("pod {pod}: 4 restarts"))),
        "{:?}",
        f.evidence
    );
    let p = &d
        .gc_health
        .as_ref()
        .unwrap()
        .cilium
        .as_ref()
        .unwrap()
        .operator_pods;
    let restarted = p.iter().find(|p| p.name == pod).unwrap();
    assert_eq!(restarted.restarts, 4);
    let since = restarted.running_since.unwrap();
    let now = w.sim.now();
    assert!(
        now.duration_since(since).as_secs() >= 300 && now.duration_since(since).as_secs() < 3600
    );

    // The default install never restarted: no finding.
    let d = diagnose_world(&World::start(small()).await, &[]).await;
    assert!(!codes(&d).contains(&FindingCode::OperatorRestarts));
}

/// The #35946 pattern: unused identities whose mark an agent just removed,
/// created long before: counted with their namespaces, and the finding
/// states the uncertainty of one snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_held_by_an_agent_but_unused_are_counted_by_namespace() {
    let w = World::start(small()).await;
    let before = diagnose_world(&w, &[]).await;
    assert_eq!(before.gc_health.as_ref().unwrap().agent_held_unused, 0);
    assert!(!codes(&before).contains(&FindingCode::AgentHeldUnused));
    let now = w.sim.now();
    let mut namespaces: BTreeMap<String, u64> = BTreeMap::new();
    let held: Vec<String> = unused_identities(&w)
        .into_iter()
        .filter(|(_, o)| mark_of(o).is_some())
        .filter(|(_, o)| {
            o["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .is_some_and(|c| now.duration_since(c).as_secs() > 3600)
        })
        .take(6)
        .map(|(n, o)| {
            let ns = o["metadata"]["labels"]["io.kubernetes.pod.namespace"]
                .as_str()
                .unwrap()
                .to_string();
            *namespaces.entry(ns).or_default() += 1;
            n
        })
        .collect();
    assert_eq!(held.len(), 6);
    for name in &held {
        w.sim.set_heartbeat(name, None).unwrap(); // written by cilium-agent, now
    }
    let d = diagnose_world(&w, &[]).await;
    let h = d.gc_health.as_ref().unwrap();
    assert_eq!(h.agent_held_unused, 6);
    let got: BTreeMap<String, u64> = h
        .agent_held_namespaces
        .iter()
        .map(|n| (n.namespace.clone(), n.identities))
        .collect();
    assert_eq!(got, namespaces);
    let f = finding(&d, FindingCode::AgentHeldUnused);
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("35946"), "{}", f.message);
    assert!(
        f.evidence.iter().any(|e| e.contains("one snapshot")),
        "{:?}",
        f.evidence
    );
}
