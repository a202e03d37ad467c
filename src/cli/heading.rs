//! Help headings, in the order `--help` shows them: what to consider, how
//! fast, how safe, what to print, and how to reach the cluster last (kubectl
//! keeps its own connection flags in `kubectl options`).

/// `-l`, `-n`, `--min-age`.
pub const SELECTION: &str = "Selection (which identities to consider)";
/// Rate and concurrency.
pub const RATE: &str = "Rate";
/// Limits, confirmation, dry run.
pub const SAFETY: &str = "Safety";
/// The report.
pub const OUTPUT: &str = "Output";
/// kubectl's connection flags and where Cilium's config lives.
pub const CONNECTION: &str = "Connection";
/// Several clusters in one run.
pub const FLEET: &str = "Fleet (several contexts in one run)";
