//! `diagnose` (issue 5): the diagnosis contract (`schema/diagnosis-v1.json`
//! is what `cilium_gc_documents::diagnosis::schema()` generates, is valid draft 2020-12, documents
//! every field, and accepts real diagnoses), and the command through the
//! binary: its views, `--redact`, the operator's metrics. One scenario per
//! finding, from the engine, is `crates/cilium-gc/tests/it/diagnose/`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cilium_gc_cluster::model::{Change, Identity};
use cilium_gc_diagnose::Crds;
use cilium_gc_diagnose::{self as diagnose, analyze, IdentityRecord, Input};
use cilium_gc_sim::Scenario;
use serde_json::{json, Value};

use crate::support::calm;
use crate::support::schema;
use crate::support::world::{assert_ok, binary, Binary, World, TEST_TIMEOUT};

mod contract;
mod labels_filter;
mod operator_metrics;
mod refusals;
mod saved;
mod sysdump_real;
mod views;

pub(crate) use views::markdown_tables;

/// The small preset, calm: actors and faults off.
fn small() -> Scenario {
    Scenario::preset("small").expect("preset").calm()
}

fn assert_conforms(d: &Value) {
    let errors = schema::errors(&schema::committed_diagnosis(), d);
    assert!(
        errors.is_empty(),
        "diagnosis does not validate:\n{}",
        errors.join("\n")
    );
}
