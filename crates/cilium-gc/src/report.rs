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
    Abort, AbortReason, Check, CheckName, ClusterInfo, ConfigSource, ConfigValue, Conflict,
    ErrorKind, IdRange, Item, ItemsMode, Mode, Options, Outcome, Pacing, Preflight, Reason,
    ReasonCounts, RunError, Summary, Tool,
};

/// The engine's own ways of counting into [`ReasonCounts`].
pub(crate) trait CountReasons {
    /// Count one identity.
    fn add(&mut self, r: Reason);
    /// Add `other`'s counts to these (a fleet's totals).
    fn merge(&mut self, other: &ReasonCounts);
}

impl CountReasons for ReasonCounts {
    fn add(&mut self, r: Reason) {
        *match r {
            Reason::InUse => &mut self.in_use,
            Reason::NotLocal => &mut self.not_local,
            Reason::Filtered => &mut self.filtered,
            Reason::Unmarked => &mut self.unmarked,
            Reason::MarkTooRecent => &mut self.mark_too_recent,
            Reason::MalformedMark => &mut self.malformed_mark,
            Reason::Stale => &mut self.stale,
        } += 1;
    }

    fn merge(&mut self, other: &ReasonCounts) {
        self.in_use += other.in_use;
        self.not_local += other.not_local;
        self.filtered += other.filtered;
        self.unmarked += other.unmarked;
        self.mark_too_recent += other.mark_too_recent;
        self.malformed_mark += other.malformed_mark;
        self.stale += other.stale;
    }
}
