//! `diagnose` from its crate: against the simulator, one scenario per
//! finding, and why cilium-operator's GC is not keeping up. Each diagnosis
//! is checked against the committed schema. (The schema contract and the
//! command's views are the plugin's tests, `tests/it/diagnose/`.)

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use cilium_gc_cluster::model::NAMESPACE_LABEL;
use cilium_gc_cluster::{ConnectSettings, Stop};
use cilium_gc_diagnose::{DiagnoseSettings, Diagnosis};
use cilium_gc_documents::diagnosis::{Finding, FindingCode, Level, Severity};
use cilium_gc_documents::report::{ConfigSource, IdRange};
use cilium_gc_sim::Kind;
use cilium_gc_sim::{default_cilium_config, Scenario};
use cilium_gc_testkit::schema;
use serde_json::Value;

use cilium_gc_testkit::{mark_of, World, TEST_TIMEOUT};

/// How these tests reach a simulated cluster.
trait Kube {
    /// Connection settings with only `--kubeconfig` pointing at it.
    fn kube(&self) -> ConnectSettings;
}

impl Kube for World {
    fn kube(&self) -> ConnectSettings {
        ConnectSettings {
            kubeconfig: Some(self.kubeconfig.clone()),
            ..ConnectSettings::default()
        }
    }
}

/// Where the diagnosis schema lives, relative to the repository.
const DIAGNOSIS_SCHEMA_FILE: &str = "schema/diagnosis-v1.json";

mod findings;
mod forecast;
mod gc_health;

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

/// `diagnose` with every flag at its default.
fn defaults() -> DiagnoseSettings {
    DiagnoseSettings {
        cilium_namespace: "kube-system".into(),
        page_size: 500,
        redact: false,
        operator_metrics_wait: Duration::ZERO,
        sample: Duration::ZERO,
        labels: None,
    }
}

/// `diagnose --page-size <n>`.
fn pages_of(page_size: u32) -> DiagnoseSettings {
    DiagnoseSettings {
        page_size,
        ..defaults()
    }
}

/// Diagnose the world through the engine (real client over HTTPS) with
/// every flag at its default, and check the document against the committed
/// schema on the way.
async fn diagnose_world(w: &World) -> Diagnosis {
    diagnose_world_with(w, defaults()).await
}

/// [`diagnose_world`] with `settings`.
async fn diagnose_world_with(w: &World, settings: DiagnoseSettings) -> Diagnosis {
    let d = tokio::time::timeout(
        TEST_TIMEOUT,
        cilium_gc_diagnose::diagnose(&w.kube(), &settings, &Stop::default()),
    )
    .await
    .expect("diagnosis finished in time")
    .expect("diagnosis succeeds");
    assert_conforms(&serde_json::to_value(&d).unwrap());
    d
}

fn assert_conforms(d: &Value) {
    let errors = schema::errors(&schema::committed(DIAGNOSIS_SCHEMA_FILE), d);
    assert!(
        errors.is_empty(),
        "diagnosis does not validate:\n{}",
        errors.join("\n")
    );
}

fn codes(d: &Diagnosis) -> Vec<FindingCode> {
    d.findings.iter().map(|f| f.code).collect()
}

fn finding(d: &Diagnosis, code: FindingCode) -> &Finding {
    d.findings
        .iter()
        .find(|f| f.code == code)
        .unwrap_or_else(|| panic!("no {code:?} in {:#?}", d.findings))
}

/// Findings must come most severe first.
fn assert_sorted(d: &Diagnosis) {
    let sev: Vec<Severity> = d.findings.iter().map(|f| f.severity).collect();
    let mut sorted = sev.clone();
    sorted.sort();
    assert_eq!(sev, sorted, "findings not most severe first");
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
