//! Listing every CiliumIdentity, page by page, without losing or repeating one.
//!
//! An explicit continue-token loop (kube's `pod_paged` example) with a named
//! page size. When a continue token expires (410 Expired, after etcd
//! compaction), we continue with the token the server offers for an
//! inconsistent continuation, or restart the list when it offers none; a set
//! of names already seen keeps any identity from being processed twice.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::cluster::{ApiClient, ServerError};
use crate::model::{decode_identity_with, Identity, Kind, Malformed};
use crate::retry::Class;
use crate::stats::Stats;
use crate::stop::Stop;

/// How many 410s in a row (with no page read between them) a list
/// tolerates, and how many restarts from the first page in all. Continuing
/// with the server's token always makes progress, so 410s separated by
/// pages read are not counted against each other.
pub(crate) const MAX_LIST_RESTARTS: u32 = 5;

/// Why the identity list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// 401/403 on list.
    #[error("listing ciliumidentities: permission denied: {0}")]
    Denied(ServerError),
    /// The CRD is not installed (404 on the collection).
    #[error("listing ciliumidentities: the CiliumIdentity CRD is not installed ({0})")]
    NotInstalled(ServerError),
    /// Retries ran out, or the server answered something unusable.
    #[error("listing ciliumidentities: {0}")]
    Failed(ServerError),
    /// Pages kept arriving garbled (truncated, not JSON) after every retry.
    #[error("listing ciliumidentities: undecodable list page: {0}")]
    Undecodable(serde_json::Error),
    /// The server handed out a continue token twice: it would page forever.
    #[error("listing ciliumidentities: the server returned a continue token it had already returned ({0} pages into the list): it would page forever; stopping")]
    RepeatedContinue(usize),
    /// Too many 410s in a row, or too many restarts from the first page.
    #[error("listing ciliumidentities: the list expired {0} times (the API server compacts faster than we can page); try a larger --page-size")]
    TooManyRestarts(u32),
    /// A signal arrived.
    #[error("listing ciliumidentities: interrupted")]
    Interrupted,
}

/// A list page; items stay as slices of the body until decoded.
#[derive(Deserialize)]
struct Page<'a> {
    #[serde(default)]
    metadata: PageMeta,
    #[serde(default, borrow)]
    items: Vec<&'a RawValue>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PageMeta {
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

fn page_path(path_base: &str, page_size: u32, token: Option<&str>) -> String {
    let mut p = format!("{path_base}?limit={page_size}");
    if let Some(t) = token {
        p.push_str("&continue=");
        p.push_str(&urlencode(t));
    }
    p
}

/// Percent-encode a continue token for the query string: everything but
/// RFC 3986's unreserved characters.
fn urlencode(s: &str) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    const QUERY: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    utf8_percent_encode(s, QUERY).to_string()
}

/// List every identity, calling `on_item` once per identity (or malformed
/// object), in list order. Retries each page up to `max_retries` times.
/// Labels are decoded only when `keep_labels` (a selector needs them).
pub async fn scan_identities(
    api: &ApiClient,
    page_size: u32,
    max_retries: u32,
    keep_labels: bool,
    stop: &Stop,
    mut on_item: impl FnMut(Result<Identity, Malformed>),
) -> Result<(), ScanError> {
    // After a 410 the list may start over: names already seen are skipped.
    let mut seen: HashSet<Box<str>> = HashSet::new();
    list_raw(
        api,
        &Kind::Identity.collection_path(),
        page_size,
        max_retries,
        stop,
        |raw| match decode_identity_with(raw, keep_labels) {
            Ok(identity) => {
                if seen.insert(identity.name.as_str().into()) {
                    on_item(Ok(identity));
                }
            }
            Err(bad) => {
                let first = bad.name.as_deref().is_none_or(|n| seen.insert(n.into()));
                if first {
                    on_item(Err(bad));
                }
            }
        },
    )
    .await
}

/// The page loop under `scan_identities`: list the collection at
/// `path_base`, page by page, and hand every item to `on_raw` undecoded.
///
/// Handles 410 Expired as the module doc says (continue with the server's
/// token, else restart), so after a restart `on_raw` may see an item again:
/// callers that must not double count keep their own set of names. Errs on
/// 401/403, 404 (CRD not installed), retries exhausted, too many 410s, or a
/// stop; none of these is worth retrying at once.
pub async fn list_raw(
    api: &ApiClient,
    path_base: &str,
    page_size: u32,
    max_retries: u32,
    stop: &Stop,
    mut on_raw: impl FnMut(&RawValue),
) -> Result<(), ScanError> {
    let mut token: Option<String> = None;
    let mut restarts = Restarts::default();
    let mut undecodable = 0;
    // Continue tokens handed out since the list last (re)started: a server
    // that hands one out twice would page forever.
    let mut tokens: HashSet<String> = HashSet::new();
    loop {
        if stop.is_stopped() {
            return Err(ScanError::Interrupted);
        }
        let answer = api
            .get(
                &page_path(path_base, page_size, token.as_deref()),
                max_retries,
            )
            .await;
        match answer.class {
            Class::Success => {}
            Class::Expired { continue_token } => {
                Stats::bump(&api.stats.list_restarts);
                restarts.expired(continue_token.is_some())?;
                token = continue_token;
                tokens.clear();
                continue;
            }
            Class::Unauthorized | Class::Forbidden => {
                return Err(ScanError::Denied(answer.into_error()))
            }
            Class::NotFound => return Err(ScanError::NotInstalled(answer.into_error())),
            _ => return Err(ScanError::Failed(answer.into_error())),
        }
        let page: Page = match serde_json::from_slice(&answer.body) {
            Ok(p) => p,
            Err(e) => {
                // A truncated or garbled body: the page is fetched again.
                Stats::bump(&api.stats.server_errors);
                undecodable += 1;
                if undecodable > max_retries {
                    return Err(ScanError::Undecodable(e));
                }
                Stats::bump(&api.stats.retries);
                continue;
            }
        };
        undecodable = 0;
        restarts.since_page = 0;
        Stats::bump(&api.stats.list_pages);
        for raw in &page.items {
            on_raw(raw);
        }
        match page.metadata.continue_token.filter(|t| !t.is_empty()) {
            Some(t) if !tokens.insert(t.clone()) => {
                return Err(ScanError::RepeatedContinue(tokens.len()))
            }
            Some(t) => token = Some(t),
            None => return Ok(()),
        }
    }
}

/// How often the list expired (410): in a row since the last page read,
/// and restarts from the first page in all. Either beyond
/// [`MAX_LIST_RESTARTS`] ends the list.
#[derive(Default)]
struct Restarts {
    since_page: u32,
    from_scratch: u32,
}

impl Restarts {
    /// One more 410; `continued` when the server offered a token to go on.
    fn expired(&mut self, continued: bool) -> Result<(), ScanError> {
        self.since_page += 1;
        if !continued {
            self.from_scratch += 1;
        }
        if self.since_page.max(self.from_scratch) > MAX_LIST_RESTARTS {
            return Err(ScanError::TooManyRestarts(MAX_LIST_RESTARTS));
        }
        tracing::warn!(
            "identity list expired (410); {}",
            if continued {
                "continuing with the server's token"
            } else {
                "restarting the list"
            }
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_carry_limit_and_escaped_token() {
        assert_eq!(
            page_path(&Kind::Identity.collection_path(), 500, None),
            "/apis/cilium.io/v2/ciliumidentities?limit=500"
        );
        assert_eq!(
            page_path(&Kind::Identity.collection_path(), 10, Some("eyJ2Ijo+/=")),
            "/apis/cilium.io/v2/ciliumidentities?limit=10&continue=eyJ2Ijo%2B%2F%3D"
        );
    }
}
