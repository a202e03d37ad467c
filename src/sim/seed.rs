//! Realistic objects from a [`Scenario`]: numeric identity names, `k8s:`
//! security labels, namespace labels, high-cardinality job labels on a share
//! of them, heartbeat marks of various ages, endpoints referencing the
//! identities in use. Deterministic for a given seed.

use jiff::{SignedDuration, Timestamp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};

use super::object::{rfc3339_secs, set_rv, uuid, Clock};
use super::scenario::Scenario;
use super::store::Store;
use crate::model::{Kind, HEARTBEAT_ANNOTATION, NAMESPACE_LABEL};

/// Identity labels of one workload.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Pod namespace.
    pub namespace: String,
    /// `app` label value.
    pub app: String,
    /// For jobs: (job name, controller uid).
    pub job: Option<(String, String)>,
}

impl Workload {
    /// A random workload in one of `namespaces` namespaces.
    pub fn random(rng: &mut impl Rng, namespaces: usize, job_ratio: f64) -> Self {
        let ns = rng.random_range(0..namespaces.max(1));
        let namespace = format!("team-{ns:03}");
        let app = format!("svc-{}", rng.random_range(0..400u32));
        let job = rng.random_bool(job_ratio.clamp(0.0, 1.0)).then(|| {
            let name = format!("{app}-job-{}", rng.random_range(0..100_000_000u32));
            (name, uuid(rng))
        });
        Workload {
            namespace,
            app,
            job,
        }
    }

    /// `security-labels` (all `k8s:`-prefixed).
    pub fn security_labels(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |k: &str, v: &str| {
            m.insert(format!("k8s:{k}"), Value::String(v.to_owned()));
        };
        put("app", &self.app);
        if let Some((job, uid)) = &self.job {
            put("batch.kubernetes.io/controller-uid", uid);
            put("batch.kubernetes.io/job-name", job);
            put("controller-uid", uid);
            put("job-name", job);
        }
        put(
            "io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name",
            &self.namespace,
        );
        put("io.cilium.k8s.policy.cluster", "default");
        put("io.cilium.k8s.policy.serviceaccount", "default");
        put(NAMESPACE_LABEL, &self.namespace);
        m
    }

    /// Labels in the `k8s:key=value` list form endpoints carry.
    pub fn label_list(&self) -> Vec<Value> {
        self.security_labels()
            .iter()
            .map(|(k, v)| Value::String(format!("{k}={}", v.as_str().unwrap_or_default())))
            .collect()
    }
}

/// A CiliumIdentity object (no resourceVersion yet).
pub fn identity(
    name: &str,
    w: &Workload,
    created: Timestamp,
    uid: String,
    mark: Option<String>,
    manager_time: Timestamp,
) -> Value {
    let sec = w.security_labels();
    let mut labels = Map::new();
    for (k, v) in &sec {
        let k = k.trim_start_matches("k8s:");
        if !k.starts_with("io.cilium.k8s.namespace.labels") {
            labels.insert(k.to_owned(), v.clone());
        }
    }
    let mut meta = json!({
        "name": name,
        "uid": uid,
        "generation": 1,
        "creationTimestamp": rfc3339_secs(created),
        "labels": labels,
        "managedFields": [{
            "manager": "cilium-agent", "operation": "Update", "apiVersion": "cilium.io/v2",
            "time": rfc3339_secs(created), "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:security-labels": {}}
        }]
    });
    if let Some(mark) = mark {
        meta["annotations"] = json!({ HEARTBEAT_ANNOTATION: mark });
        meta["managedFields"].as_array_mut().expect("array").push(json!({
            "manager": "cilium-operator-generic", "operation": "Update", "apiVersion": "cilium.io/v2",
            "time": rfc3339_secs(manager_time), "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, format!("f:{HEARTBEAT_ANNOTATION}"): {}}}}
        }));
    }
    json!({"apiVersion": "cilium.io/v2", "kind": "CiliumIdentity", "metadata": meta, "security-labels": sec})
}

/// A CiliumEndpoint of pod `name` using identity `id`.
pub fn endpoint(
    name: &str,
    w: &Workload,
    id: u64,
    created: Timestamp,
    uid: String,
    ip: u32,
) -> Value {
    let ipv4 = format!(
        "10.{}.{}.{}",
        (ip >> 16) & 0xff,
        (ip >> 8) & 0xff,
        ip & 0xff
    );
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
        "metadata": {
            "name": name, "namespace": w.namespace, "uid": uid, "generation": 1,
            "creationTimestamp": rfc3339_secs(created),
            "labels": {"app": w.app},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "cilium-agent", "operation": "Update", "apiVersion": "cilium.io/v2",
                "time": rfc3339_secs(created), "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {}, "f:ownerReferences": {}}, "f:status": {}}}]
        },
        "status": {
            "id": ip & 0xfff,
            "identity": {"id": id, "labels": w.label_list()},
            "networking": {"addressing": [{"ipv4": ipv4}], "node": format!("192.168.0.{}", ip % 50 + 1)},
            "state": "ready",
            "encryption": {},
            "external-identifiers": {"container-id": format!("{:016x}", ip as u64 * 2654435761), "k8s-namespace": w.namespace, "k8s-pod-name": name, "pod-name": format!("{}/{}", w.namespace, name)}
        }
    })
}

/// A CiliumEndpointSlice with `(pod name, identity id)` entries.
pub fn slice(
    name: &str,
    namespace: &str,
    entries: &[(String, u64)],
    created: Timestamp,
    uid: String,
) -> Value {
    let eps: Vec<Value> = entries
        .iter()
        .enumerate()
        .map(|(i, (pod, id))| json!({"id": id, "name": pod, "networking": {"addressing": [{"ipv4": format!("10.1.{}.{}", i / 250, i % 250 + 1)}], "node": "192.168.0.1"}}))
        .collect();
    json!({
        "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumEndpointSlice",
        "metadata": {"name": name, "uid": uid, "generation": 1, "creationTimestamp": rfc3339_secs(created),
            "managedFields": [{"manager": "cilium-operator-generic", "operation": "Update", "apiVersion": "cilium.io/v2alpha1",
                "time": rfc3339_secs(created), "fieldsType": "FieldsV1", "fieldsV1": {"f:endpoints": {}, "f:namespace": {}}}]},
        "endpoints": eps,
        "namespace": namespace
    })
}

/// How an unreferenced identity is marked.
fn pick_mark(rng: &mut ChaCha8Rng, s: &Scenario, now: Timestamp) -> (Option<String>, Timestamp) {
    let m = s.unused_mix;
    let total = (m.unmarked + m.recent_mark + m.old_mark + m.malformed_mark).max(f64::MIN_POSITIVE);
    let x = rng.random::<f64>() * total;
    let ago = |secs: i64| {
        now.checked_sub(SignedDuration::from_secs(secs))
            .unwrap_or(now)
    };
    if x < m.unmarked {
        (None, now)
    } else if x < m.unmarked + m.recent_mark {
        let t = ago(rng.random_range(5..600));
        (Some(t.to_string()), t)
    } else if x < m.unmarked + m.recent_mark + m.old_mark {
        let t = ago(rng.random_range(3_600..30 * 86_400));
        let t = t
            .checked_add(SignedDuration::from_nanos(
                rng.random_range(1..1_000_000_000),
            ))
            .unwrap_or(t);
        (Some(t.to_string()), t)
    } else {
        let junk = ["yesterday", "2024-13-45T99:00:00Z", "", "1712345678"];
        (
            Some(junk[rng.random_range(0..junk.len())].to_owned()),
            ago(3_600),
        )
    }
}

/// Fill `store` from `s`. Returns the RNG state for actors to continue with.
pub fn populate(store: &Store, s: &Scenario, clock: &Clock) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(s.seed);
    let now = clock.now();
    let spread = s.age_spread.as_secs().max(1) as i64;
    let mut created = |rng: &mut ChaCha8Rng| {
        now.checked_sub(SignedDuration::from_secs(rng.random_range(60..spread + 60)))
            .unwrap_or(now)
    };

    let in_use = ((s.identities as f64) * (1.0 - s.stale_ratio.clamp(0.0, 1.0))).round() as usize;
    let in_use = in_use.min(s.endpoints);
    let mut idents = Vec::with_capacity(s.identities + 1);
    let mut used: Vec<(u64, Workload)> = Vec::with_capacity(in_use);
    for i in 0..s.identities {
        let id = s.first_id + i as u64;
        let w = Workload::random(&mut rng, s.namespaces, s.job_ratio);
        let c = created(&mut rng);
        let referenced = pick_used(i, s.identities, in_use);
        let (mark, mt) = if referenced {
            (None, c)
        } else {
            pick_mark(&mut rng, s, now)
        };
        let uid = uuid(&mut rng);
        idents.push((
            id.to_string(),
            identity(&id.to_string(), &w, c, uid, mark, mt),
        ));
        if referenced {
            used.push((id, w));
        }
    }
    if s.not_local_identity {
        let w = Workload::random(&mut rng, s.namespaces, 0.0);
        let id = (1u64 << 16) + 4242;
        let c = created(&mut rng);
        let uid = uuid(&mut rng);
        idents.push((
            id.to_string(),
            identity(&id.to_string(), &w, c, uid, None, c),
        ));
    }
    let rv_stamp = |v: &mut Value, rv: u64| set_rv(v, rv);
    if s.crds.identities {
        store.seed(Kind::Identity, idents, rv_stamp);
    }
    let mut eps = Vec::with_capacity(s.endpoints);
    for i in 0..s.endpoints {
        let (id, w) = if used.is_empty() {
            break;
        } else if i < used.len() {
            &used[i]
        } else {
            &used[rng.random_range(0..used.len())]
        };
        eps.push((
            *id,
            w.clone(),
            format!("{}-{:08x}-{:05x}", w.app, rng.random::<u32>(), i),
        ));
    }
    if s.slices {
        seed_slices(store, s, &mut rng, &eps, &mut created);
    } else if s.crds.endpoints {
        let objs: Vec<(String, Value)> = eps
            .iter()
            .enumerate()
            .map(|(i, (id, w, pod))| {
                let c = created(&mut rng);
                let uid = uuid(&mut rng);
                (
                    format!("{}/{}", w.namespace, pod),
                    endpoint(pod, w, *id, c, uid, i as u32 + 1),
                )
            })
            .collect();
        store.seed(Kind::Endpoint, objs, rv_stamp);
    }
    rng
}

/// Spread "referenced" evenly over the id range rather than taking the
/// lowest ids, so stale and live identities interleave like in a real cluster.
fn pick_used(i: usize, total: usize, in_use: usize) -> bool {
    if in_use == 0 || total == 0 {
        return false;
    }
    // i is referenced when the scaled index crosses an integer boundary.
    (i * in_use) / total != ((i + 1) * in_use) / total
}

fn seed_slices(
    store: &Store,
    s: &Scenario,
    rng: &mut ChaCha8Rng,
    eps: &[(u64, Workload, String)],
    created: &mut impl FnMut(&mut ChaCha8Rng) -> Timestamp,
) {
    if !s.crds.slices {
        return;
    }
    let mut by_ns: std::collections::BTreeMap<&str, Vec<(String, u64)>> = Default::default();
    for (id, w, pod) in eps {
        by_ns
            .entry(&w.namespace)
            .or_default()
            .push((pod.clone(), *id));
    }
    let mut objs = Vec::new();
    for (ns, entries) in by_ns {
        for chunk in entries.chunks(s.endpoints_per_slice.max(1)) {
            let name = format!(
                "ces-{:09x}-{:05x}",
                rng.random::<u32>() & 0xfffffff,
                objs.len()
            );
            let c = created(rng);
            let uid = uuid(rng);
            objs.push((name.clone(), slice(&name, ns, chunk, c, uid)));
        }
    }
    store.seed(Kind::EndpointSlice, objs, |v, rv| set_rv(v, rv));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_used_takes_the_requested_share() {
        let n = (0..1000).filter(|i| pick_used(*i, 1000, 400)).count();
        assert_eq!(n, 400);
    }

    #[test]
    fn seeding_is_deterministic_and_references_match() {
        let s = Scenario::preset("small").unwrap();
        let clock = Clock::new(0);
        let (a, b) = (Store::new(), Store::new());
        populate(&a, &s, &clock);
        populate(&b, &s, &clock);
        assert_eq!(a.keys(Kind::Identity), b.keys(Kind::Identity));
        assert_eq!(a.count(Kind::Identity), s.identities + 1);
        assert_eq!(a.count(Kind::Endpoint), s.endpoints);
        let refs = a.referenced_ids();
        assert_eq!(refs.len(), 150);
        let one = a.get(Kind::Identity, "256").unwrap().value();
        assert!(one["security-labels"]["k8s:io.kubernetes.pod.namespace"].is_string());
    }
}
