//! The report: the one document every `scan`, `delete` and `demo` run ends
//! with, on success, failure, abort or Ctrl-C.
//!
//! Its types live in the `cilium-gc-documents` crate (pure data, the
//! contract of `schema/report-v1.json`, whose `report::schema` writes the
//! published JSON Schema); the engine re-exports the [`Report`] itself.

pub use cilium_gc_documents::report::Report;
// The report's parts, for the engine's own code; callers name them from
// `cilium_gc_documents::report` (the engine's API stays the engine's).
pub(crate) use cilium_gc_documents::report::{
    Abort, AbortReason, Check, CheckName, ClusterInfo, Conflict, ErrorKind, IdRange, Item,
    ItemsMode, Mode, Options, Outcome, Pacing, Preflight, RunError, Summary, Tool,
};
