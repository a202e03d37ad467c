//! The safety ledger: what the client did, for tests to judge. Every
//! successful real delete of an identity is recorded with whether it was
//! unsafe at that instant (referenced, or changed by an actor since the
//! client last read it); every client request is logged with its outcome.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use jiff::Timestamp;

/// One successful, non-dry-run delete of a CiliumIdentity.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityDelete {
    /// Identity name.
    pub name: String,
    /// Server clock at the delete.
    pub time: Timestamp,
    /// Whether a CiliumEndpoint or CiliumEndpointSlice referenced its id then.
    pub referenced: bool,
    /// Whether an actor changed it after the client last saw it (GET or LIST).
    pub actor_changed_since_read: bool,
    /// Whether the request carried preconditions (uid or resourceVersion).
    pub preconditions: bool,
    /// The request's User-Agent.
    pub user_agent: String,
}

/// One client request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// Server clock when it arrived.
    pub time: Timestamp,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Kubernetes verb (`list`, `watch`, `get`, `delete`, ...).
    pub verb: String,
    /// HTTP status answered.
    pub status: u16,
    /// `Retry-After` seconds, when given.
    pub retry_after: Option<u64>,
}

/// A snapshot of the ledger.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    /// Identity deletes, in order.
    pub deletes: Vec<IdentityDelete>,
    /// Client requests, in order.
    pub requests: Vec<RequestRecord>,
    /// Requests per (verb, status).
    pub counts: BTreeMap<(String, u16), u64>,
    /// Identity names actors modified, reused, created or deleted.
    pub actor_touched: BTreeSet<String>,
}

impl Ledger {
    /// Deletes of identities that were in use at that instant.
    pub fn unsafe_deletes(&self) -> impl Iterator<Item = &IdentityDelete> {
        self.deletes.iter().filter(|d| d.referenced)
    }

    /// How many requests of `verb` got `status`.
    pub fn count(&self, verb: &str, status: u16) -> u64 {
        self.counts
            .get(&(verb.to_owned(), status))
            .copied()
            .unwrap_or(0)
    }
}

/// The live ledger (actor touches live in the store and are merged into
/// snapshots).
#[derive(Default)]
pub(crate) struct LedgerBook {
    inner: Mutex<Ledger>,
}

impl LedgerBook {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record a delete.
    pub(crate) fn delete(&self, d: IdentityDelete) {
        self.lock().deletes.push(d);
    }

    /// Record a request.
    pub(crate) fn request(&self, r: RequestRecord) {
        let mut g = self.lock();
        *g.counts.entry((r.verb.clone(), r.status)).or_default() += 1;
        g.requests.push(r);
    }

    /// A snapshot with `actor_touched` filled in.
    pub(crate) fn snapshot(&self, actor_touched: BTreeSet<String>) -> Ledger {
        let mut l = self.lock().clone();
        l.actor_touched = actor_touched;
        l
    }

    /// Forget everything recorded so far (for tests with phases).
    pub(crate) fn clear(&self) {
        *self.lock() = Ledger::default();
    }
}
