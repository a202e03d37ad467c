//! `?labelSelector=` and `?fieldSelector=` of a list, parsed and
//! validated as the API server does (400 with its message), then matched
//! against stored objects. Only `metadata.name` (and `metadata.namespace`
//! for endpoints) are field labels the Cilium CRDs support.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::keys::{split_key, Refusal};
use crate::kinds::Kind;
use crate::labels::Selector;
use crate::object::StoredObject;
use crate::state::ClientRequest;
use crate::status;

/// A list's selectors.
pub(crate) struct Filter {
    labels: Option<Selector>,
    fields: Vec<(String, bool, String)>,
}

#[derive(Deserialize)]
struct LabelsOnly {
    metadata: LabelsMeta,
}
#[derive(Deserialize)]
struct LabelsMeta {
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

impl Filter {
    /// The selectors of `r`, or the 400 answer refusing them.
    pub(crate) fn parse(kind: Kind, r: &ClientRequest) -> Result<Filter, Refusal> {
        let labels =
            match r
                .query
                .get("labelSelector")
                .filter(|s| !s.trim().is_empty())
            {
                None => None,
                Some(s) => Some(Selector::parse(s).map_err(|e| {
                    status::bad_request(&format!("unable to parse requirement: {e}"))
                })?),
            };
        let mut fields = Vec::new();
        for term in r
            .query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or("")
            .split(',')
        {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (k, eq, v) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(Box::new(status::bad_request(&format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ))));
            };
            let ok = k == "metadata.name" || (k == "metadata.namespace" && kind == Kind::Endpoint);
            if !ok {
                return Err(Box::new(status::bad_request(&format!(
                    "field label not supported: {k}"
                ))));
            }
            fields.push((k.to_owned(), eq, v.to_owned()));
        }
        Ok(Filter { labels, fields })
    }

    /// Whether nothing is selected on (then a list reports
    /// `remainingItemCount`).
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_empty()
    }

    /// Whether the object under `key` passes every selector.
    pub(crate) fn matches(&self, key: &str, obj: &StoredObject) -> bool {
        let (ns, name) = split_key(key);
        let fields_ok = self.fields.iter().all(|(k, eq, v)| {
            let actual = if k == "metadata.name" {
                name
            } else {
                ns.unwrap_or("")
            };
            (actual == v) == *eq
        });
        fields_ok
            && self.labels.as_ref().is_none_or(|sel| {
                serde_json::from_slice::<LabelsOnly>(&obj.bytes)
                    .is_ok_and(|l| sel.matches(&l.metadata.labels))
            })
    }
}
