//! Which identities are in use, kept live for the whole run.
//!
//! kube-runtime watchers over CiliumEndpoints (and CiliumEndpointSlices when
//! that CRD exists) feed an index of id → reference count. Nothing is decided
//! before the first full list of every source ([`UsageHandle::wait_ready`]),
//! and deletes pause while a source re-lists or just failed, because then the
//! index may miss an endpoint created meanwhile.
//!
//! *Memory:* only counts are held: per endpoint a 128-bit hash of its key and
//! its ids, per id a counter; never the objects. Decoding reads only
//! `metadata.{name,namespace,resourceVersion}`, `status.identity.id` and
//! `endpoints[].id`, and is lenient: a wrong type yields "no id", never an
//! error that would stall the watcher.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api as KubeApi, ApiResource};
use kube::core::DynamicResourceScope;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Resource;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::model::{Kind, CILIUM_GROUP};
use crate::stats::Stats;

/// Endpoints per page of the watchers' initial list. Independent of the
/// identity `--page-size`: a watcher restarts its whole list on any error, so
/// few, large pages make it sync sooner on a struggling API server.
pub const PAGE_SIZE: u32 = 500;

/// How long deletes pause after a watcher error: the watcher re-watches
/// within its backoff (under a second at first); events missed meanwhile
/// arrive then, or a re-list starts.
pub const DEGRADED_PAUSE: Duration = Duration::from_secs(5);

/// How long deletes wait for endpoint usage to be readable again (a watcher
/// re-listing or just failed) before the run stops writing: past this, the
/// watchers are not coming back soon (list forbidden, server gone), and
/// waiting longer would only hang the run.
pub const USAGE_STALL_LIMIT: Duration = Duration::from_secs(60);

/// One endpoint object as the watcher decodes it: its key and the identity
/// ids it references.
#[derive(Debug, Clone)]
pub struct UsageObject {
    meta: ObjectMeta,
    ids: Vec<u64>,
    problem: Option<&'static str>,
}

impl UsageObject {
    /// The identity ids this endpoint object references.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }
    /// What was unreadable on the path to its ids, if anything (reported as
    /// a malformed object; the unreadable part references nothing).
    pub fn problem(&self) -> Option<&'static str> {
        self.problem
    }
}

impl Resource for UsageObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

// Lenient decoding: every wrapper below yields "nothing" for JSON of the
// wrong shape (draining it), so one odd field never fails a whole list page;
// it remembers that the shape was wrong, so the object can be reported.

/// A lenient wrapper: `Default` is "absent" (or null), `wrong` is "present
/// but of the wrong shape".
trait Lenient: Default {
    fn wrong() -> Self;
}

/// Visitor methods that answer "nothing" ([`Lenient::wrong`]) for the
/// listed JSON shapes, and "absent" for null.
macro_rules! nothing_for {
    (map) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Lenient::wrong())
        }
    };
    (seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Lenient::wrong())
        }
    };
    (str) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
    };
    (int) => {
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
    };
    (scalars) => {
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
    };
}

/// A JSON object decoded as `T` (whose fields must be lenient too); the
/// flag says it was present but not an object.
struct Obj<T>(Option<T>, bool);
impl<T> Default for Obj<T> {
    fn default() -> Self {
        Obj(None, false)
    }
}
impl<T> Lenient for Obj<T> {
    fn wrong() -> Self {
        Obj(None, true)
    }
}
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|t| Obj(Some(t), false))
            }
            nothing_for!(seq);
            nothing_for!(str);
            nothing_for!(int);
            nothing_for!(scalars);
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A JSON array of lenient elements; the flag says it was present but not
/// an array.
struct List<T>(Vec<T>, bool);
impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new(), false)
    }
}
impl<T> Lenient for List<T> {
    fn wrong() -> Self {
        List(Vec::new(), true)
    }
}
impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(t) = seq.next_element::<T>()? {
                    v.push(t);
                }
                Ok(List(v, false))
            }
            nothing_for!(map);
            nothing_for!(str);
            nothing_for!(int);
            nothing_for!(scalars);
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A JSON string; anything else is `None` (a missing or unreadable name
/// is caught by its `None`).
#[derive(Default)]
struct Str(Option<String>);
impl Lenient for Str {
    fn wrong() -> Self {
        Str(None)
    }
}
impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str;
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Str, E> {
                Ok(Str(Some(v.to_owned())))
            }
            nothing_for!(map);
            nothing_for!(seq);
            nothing_for!(int);
            nothing_for!(scalars);
        }
        d.deserialize_any(V)
    }
}

/// An identity id: a non-negative number or a numeric string; anything else
/// (and 0, "no identity yet") is `None`.
#[derive(Default)]
struct Id(Option<u64>, bool);
impl Lenient for Id {
    fn wrong() -> Self {
        Id(None, true)
    }
}
impl Id {
    /// 0 is "no identity yet"; anything else unparseable is wrong.
    fn of(v: Option<u64>) -> Id {
        match v {
            Some(0) => Id(None, false),
            Some(v) => Id(Some(v), false),
            None => Id::wrong(),
        }
    }
}
impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Id;
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                Ok(Id::of(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id::of(u64::try_from(v).ok()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id::of(crate::model::parse_id(v)))
            }
            // `60021.0` names identity 60021 as clearly as `60021` does;
            // reading it as "no id" would let that identity be deleted.
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Id, E> {
                Ok(Id::of(crate::model::integral_id(v)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Id, E> {
                Ok(Id::wrong())
            }
            fn visit_unit<E>(self) -> Result<Id, E> {
                Ok(Id::default())
            }
            fn visit_none<E>(self) -> Result<Id, E> {
                Ok(Id::default())
            }
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an identity id")
            }
            nothing_for!(map);
            nothing_for!(seq);
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    name: Str,
    #[serde(default)]
    namespace: Str,
    #[serde(default)]
    resource_version: Str,
    #[serde(default)]
    uid: Str,
}

#[derive(Deserialize, Default)]
struct WireStatus {
    #[serde(default)]
    identity: Obj<WireIdentity>,
}

#[derive(Deserialize, Default)]
struct WireIdentity {
    #[serde(default)]
    id: Id,
}

#[derive(Deserialize, Default)]
struct WireObject {
    #[serde(default)]
    metadata: Obj<WireMeta>,
    #[serde(default)]
    status: Obj<WireStatus>,
    #[serde(default)]
    endpoints: List<Obj<WireIdentity>>,
}

impl<'de> Deserialize<'de> for UsageObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Not even an object: it references nothing. An error here would
        // fail the whole list page, and the watcher would re-list forever.
        let Some(w) = Obj::<WireObject>::deserialize(d)?.0 else {
            return Ok(UsageObject {
                meta: ObjectMeta::default(),
                ids: Vec::new(),
                problem: Some("not a JSON object"),
            });
        };
        let m = w.metadata.0.unwrap_or_default();
        let status = w.status.0;
        let identity = status.as_ref().map(|s| &s.identity);
        // The name comes last: an unreadable identity reference matters more
        // (it blocks deletes, see [`UsageHandle::unreadable`]).
        let problem = if w.status.1 {
            Some("status is not an object")
        } else if identity.is_some_and(|i| i.1) {
            Some("status.identity is not an object")
        } else if identity.and_then(|i| i.0.as_ref()).is_some_and(|i| i.id.1) {
            Some("status.identity.id is not an identity id")
        } else if w.endpoints.1 {
            Some("endpoints is not a list")
        } else if w
            .endpoints
            .0
            .iter()
            .any(|e| e.1 || e.0.as_ref().is_some_and(|i| i.id.1))
        {
            Some("an endpoints[].id is not an identity id")
        } else if m.name.0.is_none() {
            Some(NO_NAME)
        } else {
            None
        };
        let from_status = status.and_then(|s| s.identity.0).and_then(|i| i.id.0);
        let from_slice = w
            .endpoints
            .0
            .into_iter()
            .filter_map(|e| e.0.and_then(|i| i.id.0));
        let mut ids: Vec<u64> = from_status.into_iter().chain(from_slice).collect();
        ids.shrink_to_fit();
        Ok(UsageObject {
            meta: ObjectMeta {
                name: m.name.0,
                namespace: m.namespace.0,
                resource_version: m.resource_version.0,
                uid: m.uid.0,
                ..ObjectMeta::default()
            },
            ids,
            problem,
        })
    }
}

/// A 128-bit hash of an endpoint's `namespace/name`, as two words: 8-byte
/// aligned, so an entry keyed by it with one id packs into 24 bytes (a
/// `u128` key would pad the same entry to 32).
type Key = [u64; 2];

/// Counts for one source (CEPs or CESs).
///
/// Per endpoint we keep its key and ids, so that an update moving it to
/// another identity, or its deletion, takes the old reference away. An
/// endpoint with at most one id (every CEP) is stored inline in `single`
/// (0 meaning none: id 0 is never an identity); only slices with several
/// ids get a boxed slice in `multi`.
#[derive(Debug, Default)]
struct Index {
    single: HashMap<Key, u64>,
    multi: HashMap<Key, Box<[u64]>>,
    refs: HashMap<u64, u32>,
    /// Keys handed to endpoints that have neither a readable name nor a uid.
    anonymous: u64,
}

impl Index {
    /// The key of an endpoint: namespace and name, else its uid. Endpoints
    /// with an unreadable name must not share a key, or one's update would
    /// release the other's references. `None` when there is neither.
    fn key(obj: &UsageObject) -> Option<Key> {
        let m = &obj.meta;
        let id = match (&m.name, &m.uid) {
            (Some(name), _) => (0u8, name),
            (None, Some(uid)) => (1u8, uid),
            (None, None) => return None,
        };
        let mut lo = DefaultHasher::new();
        let mut hi = DefaultHasher::new();
        (0u8, &m.namespace, id).hash(&mut lo);
        (1u8, &m.namespace, id).hash(&mut hi);
        Some([hi.finish(), lo.finish()])
    }
    fn apply(&mut self, obj: &UsageObject) {
        // An endpoint we cannot key keeps its references until the next
        // full re-list: never released early, so never unsafe.
        let key = Self::key(obj).unwrap_or_else(|| {
            self.anonymous += 1;
            [u64::MAX, self.anonymous]
        });
        self.remove(&key);
        match obj.ids.as_slice() {
            [] => {
                self.single.insert(key, 0);
            }
            [id] => {
                self.single.insert(key, *id);
            }
            ids => {
                self.multi.insert(key, ids.into());
            }
        }
        for id in obj.ids.iter() {
            *self.refs.entry(*id).or_insert(0) += 1;
        }
    }
    fn delete(&mut self, obj: &UsageObject) {
        if let Some(k) = Self::key(obj) {
            self.remove(&k);
        }
    }
    fn len(&self) -> usize {
        self.single.len() + self.multi.len()
    }
    /// Forget an endpoint and release its references.
    fn remove(&mut self, key: &Key) {
        if let Some(id) = self.single.remove(key) {
            self.release(&[id]);
        }
        if let Some(ids) = self.multi.remove(key) {
            self.release(&ids);
        }
    }
    fn release(&mut self, ids: &[u64]) {
        for id in ids.iter().filter(|id| **id != 0) {
            if let Some(c) = self.refs.get_mut(id) {
                *c -= 1;
                if *c == 0 {
                    self.refs.remove(id);
                }
            }
        }
    }
}

#[derive(Debug, Default)]
struct Source {
    live: Index,
    /// Filled between `Init` and `InitDone`.
    relisting: Option<Index>,
    synced_once: bool,
    degraded_until: Option<Instant>,
}

impl Source {
    fn ready(&self, now: Instant) -> bool {
        self.synced_once && self.relisting.is_none() && self.degraded_until.is_none_or(|t| t <= now)
    }
}

#[derive(Debug, Default)]
struct Shared {
    sources: Mutex<HashMap<Kind, Source>>,
    changed: Notify,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// When a waiter first saw usage not ready; cleared once seen ready.
    unready_since: Mutex<Option<Instant>>,
    /// Malformed endpoints seen, as (what, uid, problem), at most
    /// [`MAX_MALFORMED`].
    malformed: Mutex<BTreeMap<(String, String, &'static str), ()>>,
}

/// The one malformed-endpoint problem that leaves its identity reference
/// readable, so does not block deletes.
pub const NO_NAME: &str = "no readable metadata.name";

/// Malformed endpoint objects remembered for the report.
pub const MAX_MALFORMED: usize = 1000;

/// A live view of identity usage. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct UsageHandle {
    shared: Arc<Shared>,
}

/// Stops the watchers when dropped; see [`UsageHandle::stop_on_drop`].
pub struct WatchersGuard<'a>(&'a UsageHandle);

impl Drop for WatchersGuard<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// What to watch.
#[derive(Debug, Clone, Copy)]
pub struct Sources {
    /// Watch CiliumEndpoints.
    pub endpoints: bool,
    /// Watch CiliumEndpointSlices.
    pub slices: bool,
    /// The version CiliumEndpointSlices are read at (`v2` where served,
    /// else `v2alpha1`).
    pub slices_version: &'static str,
}

fn api_resource(kind: Kind, version: &str) -> ApiResource {
    ApiResource {
        group: CILIUM_GROUP.into(),
        version: version.into(),
        api_version: format!("{CILIUM_GROUP}/{version}"),
        kind: kind.kind().into(),
        plural: kind.plural().into(),
    }
}

impl UsageHandle {
    /// Start the watchers. Returns at once; call [`UsageHandle::wait_ready`].
    pub fn start(client: kube::Client, sources: Sources, stats: Arc<Stats>) -> Self {
        let handle = UsageHandle::default();
        let kinds = [
            (Kind::Endpoint, sources.endpoints),
            (Kind::EndpointSlice, sources.slices),
        ];
        for (kind, on) in kinds {
            if !on {
                continue;
            }
            handle
                .shared
                .sources
                .lock()
                .unwrap()
                .insert(kind, Source::default());
            let h = handle.clone();
            let client = client.clone();
            let stats = stats.clone();
            let version = match kind {
                Kind::EndpointSlice => sources.slices_version,
                _ => kind.version(),
            };
            let task = tokio::spawn(async move { h.run(kind, version, client, stats).await });
            handle.shared.tasks.lock().unwrap().push(task);
        }
        handle
    }

    /// A guard that stops the watchers when the caller's scope ends, however
    /// it ends (early return, error, signal).
    pub fn stop_on_drop(&self) -> WatchersGuard<'_> {
        WatchersGuard(self)
    }

    /// Stop the watchers (the run is over). Counts stay readable.
    pub fn stop(&self) {
        for t in self.shared.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    async fn run(self, kind: Kind, version: &'static str, client: kube::Client, stats: Arc<Stats>) {
        let api: KubeApi<UsageObject> = KubeApi::all_with(client, &api_resource(kind, version));
        let config = watcher::Config::default().page_size(PAGE_SIZE);
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => self.on_event(kind, ev, &stats),
                Err(e) => {
                    tracing::warn!(kind = kind.plural(), "watcher error, restarting: {e}");
                    Stats::bump(&stats.watcher_restarts);
                    self.with(kind, |s| {
                        s.degraded_until = Some(Instant::now() + DEGRADED_PAUSE)
                    });
                }
            }
        }
    }

    fn with(&self, kind: Kind, f: impl FnOnce(&mut Source)) {
        self.update(kind, f);
        self.shared.changed.notify_waiters();
    }

    fn update(&self, kind: Kind, f: impl FnOnce(&mut Source)) {
        if let Some(s) = self.shared.sources.lock().unwrap().get_mut(&kind) {
            f(s);
        }
    }

    fn on_event(&self, kind: Kind, ev: Event<UsageObject>, stats: &Stats) {
        if let Event::InitApply(o) | Event::Apply(o) = &ev {
            self.note_malformed(kind, o);
        }
        // Only Init and InitDone change readiness; waking `wait_ready` for
        // each of 150k listed objects cost a cross-thread wake-up apiece.
        let wake = matches!(ev, Event::Init | Event::InitDone);
        let apply = |s: &mut Source| match ev {
            Event::Init => {
                if s.synced_once {
                    Stats::bump(&stats.watcher_restarts);
                }
                s.relisting = Some(Index::default());
            }
            Event::InitApply(o) => s.relisting.get_or_insert_with(Index::default).apply(&o),
            Event::InitDone => {
                if let Some(fresh) = s.relisting.take() {
                    s.live = fresh;
                }
                s.synced_once = true;
            }
            Event::Apply(o) => s.live.apply(&o),
            Event::Delete(o) => s.live.delete(&o),
        };
        if wake {
            self.with(kind, apply);
        } else {
            self.update(kind, apply);
        }
    }

    fn note_malformed(&self, kind: Kind, o: &UsageObject) {
        let Some(problem) = o.problem else { return };
        let m = &o.meta;
        let name = match (&m.namespace, &m.name) {
            (Some(ns), Some(n)) => format!("{ns}/{n}"),
            (None, Some(n)) => n.clone(),
            (_, None) => "<no name>".into(),
        };
        let what = format!("{} {name}", kind.kind().to_lowercase());
        let key = (what, m.uid.clone().unwrap_or_default(), problem);
        let mut g = self.shared.malformed.lock().unwrap();
        if g.len() < MAX_MALFORMED {
            g.insert(key, ());
        }
    }

    /// Malformed endpoint objects seen so far, as (what, problem), e.g.
    /// ("ciliumendpoint ns/name", "status.identity.id is not an identity id").
    pub fn malformed(&self) -> Vec<(String, &'static str)> {
        let g = self.shared.malformed.lock().unwrap();
        g.keys().map(|(what, _, p)| (what.clone(), *p)).collect()
    }

    /// Endpoints whose identity reference cannot be read (a malformed
    /// `status.identity.id`, slice entry, ...), as (what, problem). We cannot
    /// know which identity such an endpoint protects, so its presence blocks
    /// deletes unless overridden. An endpoint with no identity yet is normal
    /// and not listed.
    pub fn unreadable(&self) -> Vec<(String, &'static str)> {
        self.malformed()
            .into_iter()
            .filter(|(_, p)| *p != NO_NAME)
            .collect()
    }

    /// How many endpoints [`UsageHandle::unreadable`] would list.
    pub fn unreadable_count(&self) -> usize {
        let g = self.shared.malformed.lock().unwrap();
        g.keys().filter(|(_, _, p)| *p != NO_NAME).count()
    }

    /// Wait until every source has listed fully, is not re-listing, and has
    /// not just failed. Deletes call this right before deciding.
    pub async fn wait_ready(&self) {
        loop {
            let notified = self.shared.changed.notified();
            let wake = {
                let now = Instant::now();
                let sources = self.shared.sources.lock().unwrap();
                if sources.values().all(|s| s.ready(now)) {
                    return;
                }
                sources
                    .values()
                    .filter_map(|s| s.degraded_until)
                    .filter(|t| *t > now)
                    .min()
            };
            match wake {
                Some(t) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(t) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// As [`Self::wait_ready`], but gives up (`false`) once usage has been
    /// unready for `limit`, counted from when a waiter first saw it unready:
    /// every waiter shares that deadline, so a run gives up once, not once
    /// per identity.
    pub async fn wait_ready_within(&self, limit: Duration) -> bool {
        loop {
            let notified = self.shared.changed.notified();
            let wake = {
                let now = Instant::now();
                let sources = self.shared.sources.lock().unwrap();
                let mut since = self.shared.unready_since.lock().unwrap();
                if sources.values().all(|s| s.ready(now)) {
                    *since = None;
                    return true;
                }
                let deadline = *since.get_or_insert(now) + limit;
                if now >= deadline {
                    return false;
                }
                sources
                    .values()
                    .filter_map(|s| s.degraded_until)
                    .filter(|t| *t > now)
                    .fold(deadline, Instant::min)
            };
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Endpoints referencing `id` right now (over all sources).
    pub fn refs(&self, id: u64) -> u32 {
        let sources = self.shared.sources.lock().unwrap();
        sources
            .values()
            .map(|s| s.live.refs.get(&id).copied().unwrap_or(0))
            .sum()
    }

    /// Number of objects per source right now.
    pub fn object_count(&self, kind: Kind) -> u64 {
        let sources = self.shared.sources.lock().unwrap();
        sources.get(&kind).map_or(0, |s| s.live.len() as u64)
    }

    /// Distinct identity ids referenced right now.
    pub fn referenced_ids(&self) -> Vec<u64> {
        let sources = self.shared.sources.lock().unwrap();
        let mut ids: Vec<u64> = sources
            .values()
            .flat_map(|s| s.live.refs.keys().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(json: &str) -> UsageObject {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn decodes_endpoints_and_slices_leniently() {
        let cep = obj(
            r#"{"metadata":{"name":"p","namespace":"n","resourceVersion":"5"},"status":{"identity":{"id":4242,"labels":["k8s:a=b"]},"networking":{"addressing":[]}}}"#,
        );
        assert_eq!(cep.ids, vec![4242]);
        assert_eq!(cep.meta.resource_version.as_deref(), Some("5"));
        let ces = obj(
            r#"{"metadata":{"name":"ces"},"namespace":"n","endpoints":[{"id":1},{"id":"2"},{"id":0},{"name":"x"},{"id":true},"junk"]}"#,
        );
        assert_eq!(ces.ids, vec![1, 2]);
        for junk in [
            r#"{"metadata":{"name":"p"},"status":"weird"}"#,
            r#"{"metadata":{"name":"p"},"status":{"identity":[1,2]}}"#,
            r#"{"metadata":{"name":7}}"#,
            r#"{"metadata":{"name":"p"},"status":{"identity":{"id":-5}}}"#,
            r#"{"metadata":{"name":"p"},"status":{"identity":{"id":1.5}}}"#,
            r#"{"metadata":{"name":"p"},"status":null}"#,
        ] {
            assert!(obj(junk).ids.is_empty(), "{junk}");
        }
        for not_an_object in ["[1]", "\"junk\"", "7", "null"] {
            assert!(obj(not_an_object).ids.is_empty(), "{not_an_object}");
        }
        // ...so a list page holding one still decodes.
        let page: Vec<UsageObject> = serde_json::from_str(
            r#"["junk",{"metadata":{"name":"p"},"status":{"identity":{"id":9}}}]"#,
        )
        .unwrap();
        assert_eq!(page[1].ids, vec![9]);
    }

    #[test]
    fn unreadable_parts_are_named_and_reference_nothing() {
        let id = "status.identity.id is not an identity id";
        let cases = [
            (r#""junk""#, Some("not a JSON object")),
            (
                r#"{"metadata":{"name":7}}"#,
                Some("no readable metadata.name"),
            ),
            (
                r#"{"status":{"identity":{"id":5}}}"#,
                Some("no readable metadata.name"),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":"x"}"#,
                Some("status is not an object"),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":[1]}}"#,
                Some("status.identity is not an object"),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":true}}}"#,
                Some(id),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":-1}}}"#,
                Some(id),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":"x"}}}"#,
                Some(id),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":1.5}}}"#,
                Some(id),
            ),
            (
                r#"{"metadata":{"name":"c"},"endpoints":{}}"#,
                Some("endpoints is not a list"),
            ),
            (
                r#"{"metadata":{"name":"c"},"endpoints":[{"id":"x"}]}"#,
                Some("an endpoints[].id is not an identity id"),
            ),
            (
                r#"{"metadata":{"name":"c"},"endpoints":[7]}"#,
                Some("an endpoints[].id is not an identity id"),
            ),
            // An endpoint without an identity yet is not malformed.
            (r#"{"metadata":{"name":"p"}}"#, None),
            (r#"{"metadata":{"name":"p"},"status":null}"#, None),
            (r#"{"metadata":{"name":"p"},"status":{}}"#, None),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":0}}}"#,
                None,
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":null}}}"#,
                None,
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":"5"}}}"#,
                None,
            ),
            (
                r#"{"metadata":{"name":"c"},"endpoints":[{"id":5},{"name":"x"}]}"#,
                None,
            ),
        ];
        for (json, want) in cases {
            assert_eq!(obj(json).problem(), want, "{json}");
            if want.is_some() && !json.contains(r#""id":5"#) {
                assert!(obj(json).ids.is_empty(), "{json}");
            }
        }
    }

    #[test]
    fn integral_float_ids_count_as_references() {
        let cep = obj(r#"{"metadata":{"name":"p"},"status":{"identity":{"id":60021.0}}}"#);
        assert_eq!(cep.ids, vec![60021]);
        let ces =
            obj(r#"{"metadata":{"name":"c"},"endpoints":[{"id":7.0},{"id":7.5},{"id":-8.0}]}"#);
        assert_eq!(ces.ids, vec![7]);
    }

    #[test]
    fn endpoints_with_unreadable_names_do_not_share_a_key() {
        let mut ix = Index::default();
        let a = obj(
            r#"{"metadata":{"name":1,"namespace":"n","uid":"a"},"status":{"identity":{"id":10}}}"#,
        );
        let b = obj(
            r#"{"metadata":{"name":2,"namespace":"n","uid":"b"},"status":{"identity":{"id":11}}}"#,
        );
        ix.apply(&a);
        ix.apply(&b);
        assert_eq!((ix.refs.get(&10), ix.refs.get(&11)), (Some(&1), Some(&1)));
        ix.delete(&b);
        assert_eq!((ix.refs.get(&10), ix.refs.get(&11)), (Some(&1), None));
        // Neither name nor uid: the references stay until the next re-list.
        let c = obj(r#"{"metadata":"x","status":{"identity":{"id":12}}}"#);
        let d = obj(r#"{"metadata":"y","status":{"identity":{"id":13}}}"#);
        ix.apply(&c);
        ix.apply(&d);
        ix.delete(&c);
        assert_eq!((ix.refs.get(&12), ix.refs.get(&13)), (Some(&1), Some(&1)));
    }

    #[test]
    fn index_counts_references_through_changes() {
        let mut ix = Index::default();
        let a = obj(r#"{"metadata":{"name":"a","namespace":"n"},"status":{"identity":{"id":10}}}"#);
        let b = obj(r#"{"metadata":{"name":"b","namespace":"n"},"status":{"identity":{"id":10}}}"#);
        let a2 =
            obj(r#"{"metadata":{"name":"a","namespace":"n"},"status":{"identity":{"id":11}}}"#);
        ix.apply(&a);
        ix.apply(&b);
        assert_eq!(ix.refs.get(&10), Some(&2));
        ix.apply(&a2); // a moved to identity 11
        assert_eq!(ix.refs.get(&10), Some(&1));
        assert_eq!(ix.refs.get(&11), Some(&1));
        ix.delete(&b);
        assert_eq!(ix.refs.get(&10), None);
        ix.delete(&b); // a repeated delete is harmless
        assert_eq!(ix.refs.get(&11), Some(&1));
        // same name in another namespace is another endpoint
        let other =
            obj(r#"{"metadata":{"name":"a","namespace":"m"},"status":{"identity":{"id":11}}}"#);
        ix.apply(&other);
        assert_eq!(ix.refs.get(&11), Some(&2));
        // A slice going from several ids to one and to none.
        let ces = |ids: &str| {
            obj(&format!(
                r#"{{"metadata":{{"name":"ces"}},"endpoints":[{ids}]}}"#
            ))
        };
        ix.apply(&ces(r#"{"id":20},{"id":21}"#));
        assert_eq!((ix.refs.get(&20), ix.refs.get(&21)), (Some(&1), Some(&1)));
        ix.apply(&ces(r#"{"id":21}"#));
        assert_eq!((ix.refs.get(&20), ix.refs.get(&21)), (None, Some(&1)));
        ix.apply(&ces(""));
        assert_eq!(ix.refs.get(&21), None);
        assert_eq!(ix.len(), 3, "a in n, a in m, ces (b is gone)");
        ix.delete(&ces(""));
        assert_eq!(ix.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_give_up_together_when_usage_stays_unready() {
        let h = UsageHandle::default();
        h.shared
            .sources
            .lock()
            .unwrap()
            .insert(Kind::Endpoint, Source::default());
        let stats = Stats::default();
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        let limit = Duration::from_secs(60);
        assert!(h.wait_ready_within(limit).await);
        h.on_event(Kind::Endpoint, Event::Init, &stats); // a re-list that never ends
        let t0 = Instant::now();
        let first = tokio::spawn({
            let h = h.clone();
            async move { h.wait_ready_within(limit).await }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!h.wait_ready_within(limit).await, "gives up");
        assert_eq!(Instant::now() - t0, limit, "at the first waiter's deadline");
        assert!(!first.await.unwrap());
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert!(
            h.wait_ready_within(limit).await,
            "ready again, a fresh start"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn not_ready_until_synced_and_while_relisting() {
        let h = UsageHandle::default();
        h.shared
            .sources
            .lock()
            .unwrap()
            .insert(Kind::Endpoint, Source::default());
        let stats = Stats::default();
        let ready = |h: &UsageHandle| {
            let h = h.clone();
            async move {
                tokio::time::timeout(Duration::from_millis(10), h.wait_ready())
                    .await
                    .is_ok()
            }
        };
        assert!(!ready(&h).await);
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(
            Kind::Endpoint,
            Event::InitApply(obj(
                r#"{"metadata":{"name":"a","namespace":"n"},"status":{"identity":{"id":10}}}"#,
            )),
            &stats,
        );
        assert!(!ready(&h).await);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert!(ready(&h).await);
        assert_eq!(h.refs(10), 1);
        // A re-list keeps the old counts live but blocks deletes until done.
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        assert!(!ready(&h).await);
        assert_eq!(h.refs(10), 1);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert_eq!(h.refs(10), 0, "the re-list did not contain it");
        assert_eq!(Stats::get(&stats.watcher_restarts), 1);
        // After an error, deletes wait out the pause.
        h.with(Kind::Endpoint, |s| {
            s.degraded_until = Some(Instant::now() + DEGRADED_PAUSE)
        });
        assert!(!ready(&h).await);
        tokio::time::sleep(DEGRADED_PAUSE).await;
        assert!(ready(&h).await);
    }
}
