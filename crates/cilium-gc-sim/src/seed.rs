//! Realistic objects from a [`Scenario`]: numeric identity names, `k8s:`
//! security labels, namespace labels, high-cardinality job labels on a share
//! of them, heartbeat marks of various ages, endpoints referencing the
//! identities in use. Deterministic for a given seed.

use jiff::{SignedDuration, Timestamp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

use serde_json::{json, Value};

use super::object::{rfc3339_secs, set_rv, uuid, Clock, Obj};
use super::scenario::Scenario;
use super::store::Store;
use crate::kinds::{Kind, HEARTBEAT_ANNOTATION, NAMESPACE_LABEL};

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

    /// `security-labels` (all `k8s:`-prefixed), sorted by key as Go
    /// encodes maps.
    pub fn security_labels(&self) -> Vec<(String, &str)> {
        let mut m: Vec<(String, &str)> = vec![
            ("k8s:app".into(), self.app.as_str()),
            (
                "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name".into(),
                self.namespace.as_str(),
            ),
            ("k8s:io.cilium.k8s.policy.cluster".into(), "default"),
            ("k8s:io.cilium.k8s.policy.serviceaccount".into(), "default"),
            (format!("k8s:{NAMESPACE_LABEL}"), self.namespace.as_str()),
        ];
        if let Some((job, uid)) = &self.job {
            m.push((
                "k8s:batch.kubernetes.io/controller-uid".into(),
                uid.as_str(),
            ));
            m.push(("k8s:batch.kubernetes.io/job-name".into(), job.as_str()));
            m.push(("k8s:controller-uid".into(), uid.as_str()));
            m.push(("k8s:job-name".into(), job.as_str()));
        }
        m.sort();
        m
    }
}

/// A JSON string literal.
fn q(s: &str) -> String {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        format!("\"{s}\"")
    } else {
        Value::String(s.to_owned()).to_string()
    }
}

/// `{"k":"v",...}` from pairs.
fn str_map<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let body: Vec<String> = pairs.map(|(k, v)| format!("{}:{}", q(k), q(v))).collect();
    format!("{{{}}}", body.join(","))
}

/// `"resourceVersion":"N",` or nothing.
fn rv_field(rv: Option<u64>) -> String {
    rv.map(|rv| format!(r#""resourceVersion":"{rv}","#))
        .unwrap_or_default()
}

/// A CiliumIdentity as JSON text, written directly (seeding 65k of them
/// through `serde_json::Value` is too slow in debug builds).
pub fn identity_text(
    name: &str,
    w: &Workload,
    created: Timestamp,
    uid: &str,
    mark: Option<&str>,
    mark_time: Timestamp,
    rv: Option<u64>,
) -> String {
    let sec = w.security_labels();
    let sec_json = str_map(sec.iter().map(|(k, v)| (k.as_str(), *v)));
    let labels = str_map(
        sec.iter()
            .map(|(k, v)| (k.trim_start_matches("k8s:"), *v))
            .filter(|(k, _)| !k.starts_with("io.cilium.k8s.namespace.labels")),
    );
    let created = rfc3339_secs(created);
    let (annotations, operator_entry) = match mark {
        Some(m) => (
            format!(r#","annotations":{{"{HEARTBEAT_ANNOTATION}":{}}}"#, q(m)),
            format!(
                r#",{{"manager":"cilium-operator-generic","operation":"Update","apiVersion":"cilium.io/v2","time":"{}","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:annotations":{{".":{{}},"f:{HEARTBEAT_ANNOTATION}":{{}}}}}}}}}}"#,
                rfc3339_secs(mark_time)
            ),
        ),
        None => (String::new(), String::new()),
    };
    format!(
        concat!(
            r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumIdentity","metadata":{{"name":{name},"uid":"{uid}",{rv}"generation":1,"creationTimestamp":"{created}","labels":{labels}{annotations},"#,
            r#""managedFields":[{{"manager":"cilium-agent","operation":"Update","apiVersion":"cilium.io/v2","time":"{created}","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{}}}},"f:security-labels":{{}}}}}}{op}]}},"#,
            r#""security-labels":{sec}}}"#
        ),
        name = q(name),
        uid = uid,
        rv = rv_field(rv),
        created = created,
        labels = labels,
        annotations = annotations,
        op = operator_entry,
        sec = sec_json
    )
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
    serde_json::from_str(&identity_text(
        name,
        w,
        created,
        &uid,
        mark.as_deref(),
        manager_time,
        None,
    ))
    .unwrap_or(Value::Null)
}

/// A CiliumEndpoint of pod `name` using identity `id`, as JSON text.
pub fn endpoint_text(
    name: &str,
    w: &Workload,
    id: u64,
    created: Timestamp,
    uid: &str,
    ip: u32,
    rv: Option<u64>,
) -> String {
    let ipv4 = format!(
        "10.{}.{}.{}",
        (ip >> 16) & 0xff,
        (ip >> 8) & 0xff,
        ip & 0xff
    );
    let labels: Vec<String> = w
        .security_labels()
        .iter()
        .map(|(k, v)| q(&format!("{k}={v}")))
        .collect();
    let created = rfc3339_secs(created);
    let (ns, app, name) = (q(&w.namespace), q(&w.app), q(name));
    format!(
        concat!(
            r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumEndpoint","metadata":{{"name":{name},"namespace":{ns},"uid":"{uid}",{rv}"generation":1,"creationTimestamp":"{created}","#,
            r#""labels":{{"app":{app}}},"ownerReferences":[{{"apiVersion":"v1","kind":"Pod","name":{name},"uid":"{uid}","blockOwnerDeletion":true}}],"#,
            r#""managedFields":[{{"manager":"cilium-agent","operation":"Update","apiVersion":"cilium.io/v2","time":"{created}","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{}},"f:ownerReferences":{{}}}},"f:status":{{}}}}}}]}},"#,
            r#""status":{{"id":{epid},"identity":{{"id":{id},"labels":[{labels}]}},"networking":{{"addressing":[{{"ipv4":"{ipv4}"}}],"node":"192.168.0.{node}"}},"state":"ready","encryption":{{}},"#,
            r#""external-identifiers":{{"container-id":"{cid:016x}","k8s-namespace":{ns},"k8s-pod-name":{name},"pod-name":{podname}}}}}}}"#
        ),
        name = name,
        ns = ns,
        uid = uid,
        rv = rv_field(rv),
        created = created,
        app = app,
        epid = ip & 0xfff,
        id = id,
        labels = labels.join(","),
        ipv4 = ipv4,
        node = ip % 50 + 1,
        cid = ip as u64 * 2654435761,
        podname = q(&format!("{}/{}", w.namespace, name.trim_matches('"')))
    )
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
    serde_json::from_str(&endpoint_text(name, w, id, created, &uid, ip, None))
        .unwrap_or(Value::Null)
}

/// A sealed seed object with known references (no re-parsing).
fn seeded(text: String, rv: u64, uid: String, ids: Vec<u64>) -> Arc<Obj> {
    Arc::new(Obj {
        bytes: bytes::Bytes::from(text),
        rv,
        uid: uid.into(),
        ids: ids.into(),
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
        idents.push((id, w.clone(), c, uid, mark, mt));
        if referenced {
            used.push((id, w));
        }
    }
    if s.not_local_identity {
        let w = Workload::random(&mut rng, s.namespaces, 0.0);
        let id = (1u64 << 16) + 4242;
        let c = created(&mut rng);
        let uid = uuid(&mut rng);
        idents.push((id, w, c, uid, None, c));
    }
    if s.crds.identities {
        store.seed_with(Kind::Identity, idents, |(id, w, c, uid, mark, mt), rv| {
            let name = id.to_string();
            let text = identity_text(&name, &w, c, &uid, mark.as_deref(), mt, Some(rv));
            (name, seeded(text, rv, uid, Vec::new()))
        });
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
        let objs: Vec<_> = eps
            .iter()
            .enumerate()
            .map(|(i, (id, w, pod))| (i, *id, w, pod, created(&mut rng), uuid(&mut rng)))
            .collect();
        store.seed_with(Kind::Endpoint, objs, |(i, id, w, pod, c, uid), rv| {
            let text = endpoint_text(pod, w, id, c, &uid, i as u32 + 1, Some(rv));
            (
                format!("{}/{}", w.namespace, pod),
                seeded(text, rv, uid, vec![id]),
            )
        });
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
    store.seed(Kind::EndpointSlice, objs, set_rv);
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
        assert_eq!(one["metadata"]["resourceVersion"], "2");
        for key in a.keys(Kind::Endpoint).iter().take(20) {
            let ep = a.get(Kind::Endpoint, key).unwrap();
            let v: Value = serde_json::from_slice(&ep.bytes).unwrap();
            assert_eq!(
                crate::kinds::referenced_ids(Kind::Endpoint, &v),
                ep.ids.to_vec(),
                "seeded ids are what the object says"
            );
            let m = &v["metadata"];
            let name = format!(
                "{}/{}",
                m["namespace"].as_str().unwrap(),
                m["name"].as_str().unwrap()
            );
            assert_eq!(&name, key);
        }
    }
}
