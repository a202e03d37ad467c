//! The diagnosis contract: the committed schema, its validity, the full example, and the `schema` subcommand.

use super::*;

const TIME_FIELDS: [&str; 6] = [
    "generatedAt",
    "exhaustedAt",
    "time",
    "latest",
    "firstAt",
    "lastAt",
];

#[test]
fn schema_is_valid_draft_2020_12() {
    let s = schema::committed_diagnosis();
    let errors = schema::meta_errors(&s);
    assert!(
        errors.is_empty(),
        "not a valid draft 2020-12 schema:\n{errors:#?}"
    );
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["$id"], cilium_gc_documents::diagnosis::SCHEMA_ID);
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
        workloads: Some(diagnose::Workloads {
            operator_images: vec!["quay.io/cilium/operator-generic:v1.15.6".into()],
            agent_images: vec!["quay.io/cilium/cilium:v1.15.6".into()],
            operator_pods: vec![cilium_gc_documents::diagnosis::OperatorPodStatus {
                name: "cilium-operator-1".into(),
                restarts: 2,
                started_at: Some(ts("2026-05-01T00:00:00Z")),
                running_since: Some(ts("2026-06-01T11:50:00Z")),
            }],
            problem: Some("cilium-operator pods in kube-system not found".into()),
            metrics: vec![cilium_gc_documents::diagnosis::OperatorMetricsRead {
                pod: "cilium-operator-1".into(),
                port: 9963,
                first: Some(cilium_gc_documents::diagnosis::GcCounters {
                    read_at: ts("2026-06-01T12:00:00Z"),
                    process_started_at: Some(ts("2026-06-01T11:50:00Z")),
                    runs_success: Some(1),
                    runs_fail: Some(0),
                    entries_alive: Some(10),
                    entries_deleted: Some(0),
                    gc_errors: Some(3),
                    last_pass_seconds: Some(0.25),
                }),
                second: None,
                expected_passes: None,
                completed_passes: None,
                verdict: cilium_gc_documents::diagnosis::PassVerdict::Unknown,
                evidence: vec![],
                problem: None,
            }],
            gc_interval_arg: Some(Duration::from_secs(60)),
        }),
        // Identity 2000 marked at 00:00, then written by a label sync.
        writes: BTreeMap::from([(
            "2000".to_string(),
            vec![
                diagnose::Write {
                    manager: "cilium-operator-generic".into(),
                    operation: "Update".into(),
                    time: Some(ts("2026-06-01T00:00:00Z")),
                    owns_mark: true,
                },
                diagnose::Write {
                    manager: "label-sync".into(),
                    operation: "Update".into(),
                    time: Some(ts("2026-06-01T11:59:00Z")),
                    owns_mark: false,
                },
            ],
        )]),
        // --labels: job-name dropped, which a policy selects on.
        proposed_labels: Some("k8s:!job-name".into()),
        policies: Some(diagnose::Policies {
            items: vec![diagnose::PolicySelectors {
                kind: cilium_gc_documents::diagnosis::PolicyKind::CiliumNetworkPolicy,
                namespace: Some("jobs".into()),
                name: "allow-jobs".into(),
                keys: vec!["k8s:job-name".into()],
            }],
            problems: vec!["no permission to list networkpolicies (optional)".into()],
        }),
        allocation_refusals: Some(cilium_gc_documents::diagnosis::AllocationRefusals {
            logs_read: 2,
            total: 16,
            by_pod: vec![cilium_gc_documents::diagnosis::PodRefusals {
                pod: "cilium-a1b2c".into(),
                refusals: 16,
                first_at: Some(ts("2026-06-01T11:58:00Z")),
                last_at: Some(ts("2026-06-01T11:59:00Z")),
                example: r#"level=warning msg="Key allocation attempt failed" error="no more available IDs in configured space""#.into(),
            }],
        }),
        sample: None,
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
        (
            "writers.managers[0].latest",
            &d["writers"]["managers"][0]["latest"],
        ),
        (
            "labelsWhatIf.policies[0].namespace",
            &d["labelsWhatIf"]["policies"][0]["namespace"],
        ),
        (
            "labelsWhatIf.policiesProblem",
            &d["labelsWhatIf"]["policiesProblem"],
        ),
        (
            "identitySpace.localRangeFrom",
            &d["identitySpace"]["localRangeFrom"],
        ),
        (
            "allocationRefusals.byPod[0].firstAt",
            &d["allocationRefusals"]["byPod"][0]["firstAt"],
        ),
        (
            "allocationRefusals.byPod[0].lastAt",
            &d["allocationRefusals"]["byPod"][0]["lastAt"],
        ),
    ] {
        assert!(!v.is_null(), "example misses {path}");
    }
    assert_eq!(d["kind"], "CiliumIdentityDiagnosis");
    assert_eq!(d["apiVersion"], cilium_gc_documents::report::API_VERSION);
    assert_eq!(d["$schema"], cilium_gc_documents::diagnosis::SCHEMA_ID);
    let errors = schema::errors(&schema::committed_diagnosis(), &d);
    assert!(
        errors.is_empty(),
        "example diagnosis rejected:\n{errors:#?}"
    );
    // YAML carries the same document.
    let mut yaml = Vec::new();
    kubectl_cilium_gc::views::diagnosis::render(
        &full_example(),
        kubectl_cilium_gc::views::format::OutputFormat::Yaml,
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
