//! Chaos hooks for tests: objects a real API server would never hold, and
//! list answers spoiled in ways the random [`Faults`](crate::faults::Faults)
//! do not aim at one request.
//!
//! * `Simulator::inject_raw` stores any JSON under a key, bypassing the
//!   bookkeeping writes get (no uid, resourceVersion or managedFields are
//!   added), so lists and watches serve it byte for byte.
//! * `Simulator::spoil_lists` makes the next `n` list answers of a kind
//!   arrive as a `200` whose JSON is cut in half ([`PageFault::Truncate`]),
//!   or whose connection drops half-way through the body
//!   ([`PageFault::DropMidBody`]). Watches and other verbs are untouched.
//!
//! Kept apart from the rest of the simulator so its core stays a faithful
//! API server; `routes` calls [`Chaos::tamper`] on list answers only, and
//! `Simulator`'s chaos methods only hand their arguments to [`Chaos`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use axum::body::{to_bytes, Body};
use axum::http::{header, HeaderValue, Response};

use crate::body::{cut, MAX_BODY};
use crate::faults::ResetMode;
use crate::kinds::Kind;

/// How a list answer is spoiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageFault {
    /// `200 OK` with the first half of the JSON and a matching
    /// `Content-Length`: the transfer is clean, the document is not.
    Truncate,
    /// The connection is cut after half of the body.
    DropMidBody,
}

/// Pending list spoilers, per kind.
#[derive(Default)]
pub(crate) struct Chaos {
    pending: Mutex<Vec<(Kind, PageFault, u32)>>,
    applied: AtomicU64,
}

impl Chaos {
    /// Spoil the next `n` list answers (any page) for `kind` with `fault`.
    pub(crate) fn spoil(&self, kind: Kind, fault: PageFault, n: u32) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((kind, fault, n));
    }

    /// How many list answers were spoiled so far.
    pub(crate) fn spoiled(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }

    /// Spoil `resp`, a list answer for `kind`, if a spoiler is pending.
    pub(crate) async fn tamper(&self, kind: Kind, resp: Response<Body>) -> Response<Body> {
        let fault = {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let hit = p.iter_mut().find(|(k, _, n)| *k == kind && *n > 0);
            hit.map(|(_, f, n)| {
                *n -= 1;
                *f
            })
        };
        let Some(fault) = fault.filter(|_| resp.status().is_success()) else {
            return resp;
        };
        self.applied.fetch_add(1, Ordering::Relaxed);
        match fault {
            PageFault::DropMidBody => cut(resp, ResetMode::MidBody).await,
            PageFault::Truncate => {
                let (mut parts, body) = resp.into_parts();
                let bytes = to_bytes(body, MAX_BODY).await.unwrap_or_default();
                let half = bytes.slice(..bytes.len() / 2);
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(half.len()));
                Response::from_parts(parts, Body::from(half))
            }
        }
    }
}
