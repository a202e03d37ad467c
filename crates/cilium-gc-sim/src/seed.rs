//! Realistic objects from a [`Scenario`]: numeric identity names, `k8s:`
//! security labels, namespace labels, high-cardinality job labels on a share
//! of them, heartbeat marks of various ages, endpoints referencing the
//! identities in use. Deterministic for a given seed.

use jiff::{SignedDuration, Timestamp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

use super::cilium_objects::{endpoint_text, identity_text, slice, Workload};
use super::object::{set_rv, uuid, Clock, StoredObject};
use super::scenario::Scenario;
use super::store::Store;
use crate::kinds::Kind;

/// A sealed seed object with known references (no re-parsing).
fn seeded(text: String, rv: u64, uid: String, ids: Vec<u64>) -> Arc<StoredObject> {
    Arc::new(StoredObject {
        bytes: bytes::Bytes::from(text),
        rv,
        uid: uid.into(),
        ids: ids.into(),
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
pub(crate) fn populate(store: &Store, s: &Scenario, clock: &Clock) -> ChaCha8Rng {
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
    }
    if s.crds.endpoints && (!s.slices || s.ceps_with_slices) {
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
            let v: serde_json::Value = serde_json::from_slice(&ep.bytes).unwrap();
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
