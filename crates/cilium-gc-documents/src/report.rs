//! The report: the one document every `scan`, `delete` and `demo` run ends
//! with, on success, failure, abort or Ctrl-C.
//!
//! These types *are* the contract: `schema/report-v1.json` is generated from
//! them (see [`schema`]) and a test fails when the committed file drifts.
//! Rules: v1 only ever gains optional fields; a breaking change is v2.
//! Field names are camelCase like Kubernetes, times RFC 3339 UTC, durations
//! seconds as numbers, reasons and outcomes lower-kebab enums.

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::header::{Document, Header, Span, Timed};
// Every document's, declared with the header; named here as they always were.
pub use crate::header::{Tool, API_VERSION};

/// `kind` of the GC report.
pub const KIND: &str = "CiliumIdentityGCReport";
/// `$id` of the published schema, also written as `$schema` in every report.
pub const SCHEMA_ID: &str =
    "https://raw.githubusercontent.com/kubectl-cilium-gc/kubectl-cilium-gc/main/schema/report-v1.json";

/// The result of one `kubectl cilium-gc` scan or delete run.
///
/// Changes within v1 (additive only): `summary.validated` (with
/// `--dry-run=server` the validated deletes are counted there and
/// `summary.deleted` stays 0; before, `deleted` counted them); an item whose
/// writes all ended in 429, 409, 403 or a refused connection when the run
/// stopped is `not-attempted` with its `lastError` (before, `failed`);
/// `nextSteps`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "CiliumIdentityGCReport")]
pub struct Report {
    /// `$schema`, `apiVersion`, `kind`, `tool` (see [`Header`]).
    #[serde(flatten)]
    pub header: Header<Report>,
    /// The cluster the run talked to.
    pub cluster: ClusterInfo,
    /// `startedAt`, `finishedAt`, `durationSeconds` (see [`Span`]).
    #[serde(flatten)]
    pub span: Span<Report>,
    /// What the run was allowed to do.
    pub mode: Mode,
    /// Every effective setting that shaped the run.
    pub options: Options,
    /// The process exit status this run ended with.
    pub exit_code: u8,
    /// True when SIGINT or SIGTERM stopped the run early.
    pub interrupted: bool,
    /// Set when the run stopped before finishing its work, with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<Abort>,
    /// Checks made before any write.
    pub preflight: Preflight,
    /// Counts over the whole run.
    pub summary: Summary,
    /// One entry per identity that was not in use (see `options.items`).
    pub items: Vec<Item>,
    /// Run-level errors and warnings (per-item errors are on the items).
    pub errors: Vec<RunError>,
    /// What a human should do next, one sentence each, most urgent first:
    /// the same steps the text and Markdown reports end with. Each failed
    /// preflight check names its remedy; no step suggests a command the
    /// same checks would refuse. Empty when there is nothing to do. Added
    /// in v1 after its first release: absent in older reports.
    #[serde(default)]
    pub next_steps: Vec<String>,
    /// Where the local range is heading at the recent creation pace, from the identities this run listed (see the diagnosis' `forecast`). Absent when the run listed nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<crate::forecast::Forecast>,
}

impl Document for Report {
    const KIND: &'static str = KIND;
    const SCHEMA_ID: &'static str = SCHEMA_ID;
    const KIND_DOC: &'static str = "Always `CiliumIdentityGCReport`.";
    const TOOL_DOC: &'static str = "The program that wrote the report.";
}

impl Timed for Report {
    const STARTED_DOC: &'static str = "When the run started (RFC 3339, UTC).";
    const FINISHED_DOC: &'static str = "When the report was written (RFC 3339, UTC).";
    const DURATION_DOC: &'static str = "Wall time of the run, in seconds.";
}

/// The cluster the run talked to. Never carries a credential.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// API server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// kubeconfig context used, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Kubernetes `gitVersion` reported by `/version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The Cilium settings the run used, and where each came from.
    pub cilium_config: Vec<ConfigValue>,
}

/// One Cilium setting the run depended on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigValue {
    /// Key, as in the `cilium-config` ConfigMap (e.g. `identity-allocation-mode`).
    pub key: String,
    /// Effective value.
    pub value: String,
    /// Where the value came from.
    pub source: ConfigSource,
}

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigSource {
    /// The `cilium-config` ConfigMap.
    CiliumConfig,
    /// A command-line flag.
    Flag,
    /// Cilium's default, because the ConfigMap did not set it or could not be read.
    Default,
    /// Derived from the cluster (e.g. which CRDs exist).
    Discovered,
}

/// What the run was allowed to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Read only: decide, never write.
    Scan,
    /// Delete stale identities (and mark with `--mark`).
    Delete,
    /// Send the same deletes with `dryRun: [All]`: the server validates, nothing is deleted.
    DryRunServer,
}

/// Which identities get an entry in `items`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ItemsMode {
    /// Every identity, in-use ones included.
    All,
    /// Every identity that was not in use (the default).
    #[default]
    Unused,
    /// Only identities something was done to or tried on (candidates, marked).
    Actionable,
    /// None: counts only.
    None,
}

/// Every effective setting that shaped the run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Options {
    /// Namespace of the `cilium-config` ConfigMap.
    pub cilium_namespace: String,
    /// `-l`: label selector on identity labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// `-n`: pod namespaces whose identities are considered (empty: all).
    pub namespaces: Vec<String>,
    /// `--min-age` in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_age_seconds: Option<f64>,
    /// Heartbeat timeout a mark must exceed, in seconds.
    pub heartbeat_timeout_seconds: f64,
    /// Local identity range (inclusive) considered.
    pub local_range: IdRange,
    /// Identities per list page.
    pub page_size: u32,
    /// How the run paced its writes: `concurrency`, `qps`, `burst`,
    /// `maxConflictRetries` and `maxRetries`, inline in this object.
    #[serde(flatten)]
    pub pacing: Pacing,
    /// Most deletions allowed before the run refuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deletions: Option<u64>,
    /// Most deletions allowed, as a percent of scanned identities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_percent: Option<f64>,
    /// `--mark`: annotate unmarked unused identities.
    pub mark: bool,
    /// `--force`: delete even with zero endpoints in the cluster.
    pub force: bool,
    /// Which identities get an item.
    pub items: ItemsMode,
    /// Per-request timeout in seconds, when set (0: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout_seconds: Option<f64>,
    /// `--identity-allocation-mode`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_allocation_mode: Option<String>,
    /// `--allow-short-heartbeat-timeout` was given.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_short_heartbeat_timeout: bool,
    /// `--allow-unreadable-endpoints` was given.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_unreadable_endpoints: bool,
}

/// How a run paces its writes and how much retrying it tolerates: the one
/// write-settings value, embedded wherever the run's settings travel (the
/// engine's write and run settings, its sweep, and this report's
/// [`Options`], where its fields sit inline).
///
/// `Burst` is the burst's type, the one field whose value depends on the
/// stage. As typed (the engine's `WriteSettings`) it is `Option<u32>`,
/// unset meaning one per `qps`; once the engine has validated and resolved
/// it, it is `u32` (the default parameter): what a run uses and what
/// [`Options`] reports. One struct with the burst as a parameter, rather
/// than an input twin, so the other four fields are declared once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pacing<Burst = u32> {
    /// Delete workers.
    pub concurrency: u32,
    /// Client-side delete rate limit, per second (0: unlimited).
    pub qps: f64,
    /// Burst of the rate limiter.
    pub burst: Burst,
    /// Retries after a 409 Conflict, per identity.
    pub max_conflict_retries: u32,
    /// Retries after 5xx, timeouts and resets, per request.
    pub max_retries: u32,
}

impl<Burst> Pacing<Burst> {
    /// The same pacing with the burst given: how the engine resolves the
    /// burst as typed into the one a run uses.
    pub fn with_burst<B>(self, burst: B) -> Pacing<B> {
        Pacing {
            concurrency: self.concurrency,
            qps: self.qps,
            burst,
            max_conflict_retries: self.max_conflict_retries,
            max_retries: self.max_retries,
        }
    }
}

/// An inclusive range of identity ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdRange {
    /// Smallest id.
    pub min: u64,
    /// Largest id.
    pub max: u64,
}

/// Why a run stopped before finishing.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Abort {
    /// The category.
    pub reason: AbortReason,
    /// A one-line explanation for humans.
    pub message: String,
}

/// Categories of early stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AbortReason {
    /// A preflight check refused the run before any write.
    PreflightRefused,
    /// Permission was lost during the run (401/403).
    PermissionLost,
    /// Candidates exceeded `--max-deletions` or `--max-percent`.
    BlastRadius,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// Confirmation was declined or not possible.
    NotConfirmed,
    /// The identity list or usage could not be read.
    ReadFailed,
    /// Endpoint usage stayed unknown (no source known complete as of a few
    /// seconds ago) for the stall limit: writing stopped, the remaining
    /// items are `not-attempted`.
    UsageLost,
    /// An unexpected error.
    Unexpected,
    /// A bug in this tool (a panic): the report holds what was known when
    /// it happened. Run again with `RUST_BACKTRACE=1` to see where.
    InternalError,
}

/// Checks made before any write.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Preflight {
    /// Each check and its result.
    pub checks: Vec<Check>,
    /// True when `--force` overrode the zero-endpoints check.
    pub forced: bool,
}

/// One preflight check.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// Which check.
    pub name: CheckName,
    /// Whether it passed.
    pub passed: bool,
    /// What was found.
    pub message: String,
}

/// The preflight checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CheckName {
    /// The CiliumIdentity CRD is installed.
    IdentityCrd,
    /// The CiliumEndpoint / CiliumEndpointSlice CRDs (usage sources) are installed.
    UsageCrds,
    /// `cilium-config` says identities are CRD-allocated, not kvstore or operator-managed.
    AllocationMode,
    /// SelfSubjectAccessReview for every verb the run needs.
    Permissions,
    /// The cluster has endpoints, so "unused" means something.
    EndpointsPresent,
    /// `cluster-id` and `max-connected-clusters` are values Cilium accepts.
    ClusterId,
    /// `--heartbeat-timeout` is not shorter than cilium-config's.
    HeartbeatTimeout,
    /// Every endpoint's identity reference could be read.
    EndpointsReadable,
}

/// Counts over the whole run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Identities listed.
    pub scanned: u64,
    /// Identities per decision reason.
    pub reasons: ReasonCounts,
    /// Identities that were deletion candidates at scan time.
    pub candidates: u64,
    /// Identities deleted. Always 0 with `--dry-run=server`, which applies
    /// nothing: see `validated`.
    pub deleted: u64,
    /// With `--dry-run=server`: deletes the server validated (preconditions
    /// included) and did not apply. 0 otherwise. Added in v1 after its first
    /// release (before it, `deleted` counted these): absent in older reports.
    #[serde(default)]
    pub validated: u64,
    /// Candidates that were already gone (404).
    pub already_gone: u64,
    /// Candidates an agent reclaimed or an endpoint reused during the run: left alone.
    pub reclaimed: u64,
    /// Candidates that could not be deleted; see their items.
    pub failed: u64,
    /// Candidates the run stopped before any write of theirs could take
    /// effect (never sent, or answered only with 429, 409, 403 or a refused
    /// connection; `lastError` keeps the last answer).
    pub not_attempted: u64,
    /// Unmarked identities annotated with `--mark`.
    pub marked: u64,
    /// 409 Conflict answers received.
    pub conflicts: u64,
    /// Requests sent again after a retryable failure.
    pub retries: u64,
    /// 429 Too Many Requests answers received.
    pub throttled: u64,
    /// 5xx answers, timeouts and connection errors.
    pub server_errors: u64,
    /// Identity list pages fetched.
    pub list_pages: u64,
    /// Identity list restarts after 410 Expired.
    pub list_restarts: u64,
    /// Endpoint watcher restarts after the initial sync.
    pub watcher_restarts: u64,
    /// Objects that could not be decoded (reported in `errors`, skipped).
    pub malformed: u64,
    /// CiliumEndpoints seen at sync.
    pub endpoints: u64,
    /// CiliumEndpointSlices seen at sync.
    pub endpoint_slices: u64,
    /// Deletions per second achieved during the delete phase.
    pub delete_rate_per_second: f64,
    /// Wall time, in seconds, the shared write limiter ran below `--qps`
    /// because the server throttled a large share of recent writes. Absent
    /// when no write was rate limited (`--qps 0`, or a scan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_seconds: Option<f64>,
    /// The lowest rate, in writes per second, the limiter adapted down to
    /// (`--qps` when throttling was never sustained). Absent as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowest_rate_per_second: Option<f64>,
    /// The fewest writes the sweep allowed in flight, cut from
    /// `--concurrency` while the server refused a large share of recent
    /// writes (a server that limits concurrency, such as an API Priority
    /// and Fairness level with `Reject`); `--concurrency` when never cut.
    /// Absent for a scan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowest_in_flight: Option<u64>,
    /// Seconds writes spent waiting out their own 429 `Retry-After` (or
    /// backoff), summed over writes. Absent when no write was throttled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_wait_seconds: Option<f64>,
}

/// Why an identity was or was not chosen. Exactly one per identity.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// Referenced by a CiliumEndpoint or CiliumEndpointSlice.
    InUse,
    /// Non-numeric name, or outside this cluster's local identity range.
    NotLocal,
    /// Excluded by `--selector`, `--namespace` or `--min-age`.
    Filtered,
    /// Unused but without a heartbeat mark: left for the operator (or marked with `--mark`).
    Unmarked,
    /// Unused and marked, but the mark is younger than the heartbeat timeout.
    MarkTooRecent,
    /// The heartbeat mark is not an RFC 3339 time: never deleted.
    MalformedMark,
    /// Unused, marked, mark older than the heartbeat timeout: a deletion candidate.
    Stale,
}

impl Reason {
    /// Every reason, in report order.
    pub const ALL: [Reason; 7] = [
        Reason::InUse,
        Reason::NotLocal,
        Reason::Filtered,
        Reason::Unmarked,
        Reason::MarkTooRecent,
        Reason::MalformedMark,
        Reason::Stale,
    ];

    /// The kebab-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InUse => "in-use",
            Reason::NotLocal => "not-local",
            Reason::Filtered => "filtered",
            Reason::Unmarked => "unmarked",
            Reason::MarkTooRecent => "mark-too-recent",
            Reason::MalformedMark => "malformed-mark",
            Reason::Stale => "stale",
        }
    }
}

/// Identities per decision reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasonCounts {
    /// Referenced by an endpoint.
    pub in_use: u64,
    /// Not in the local id range, or non-numeric.
    pub not_local: u64,
    /// Excluded by selector, namespace or minimum age.
    pub filtered: u64,
    /// Unused, no heartbeat mark.
    pub unmarked: u64,
    /// Unused, mark younger than the timeout.
    pub mark_too_recent: u64,
    /// Unused, unparseable mark.
    pub malformed_mark: u64,
    /// Unused, mark older than the timeout.
    pub stale: u64,
}

impl ReasonCounts {
    /// The count for one reason.
    pub fn get(&self, r: Reason) -> u64 {
        match r {
            Reason::InUse => self.in_use,
            Reason::NotLocal => self.not_local,
            Reason::Filtered => self.filtered,
            Reason::Unmarked => self.unmarked,
            Reason::MarkTooRecent => self.mark_too_recent,
            Reason::MalformedMark => self.malformed_mark,
            Reason::Stale => self.stale,
        }
    }

    /// Count one identity.
    pub fn add(&mut self, r: Reason) {
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

    /// Add `other`'s counts to these (a fleet's totals).
    pub fn merge(&mut self, other: &ReasonCounts) {
        self.in_use += other.in_use;
        self.not_local += other.not_local;
        self.filtered += other.filtered;
        self.unmarked += other.unmarked;
        self.mark_too_recent += other.mark_too_recent;
        self.malformed_mark += other.malformed_mark;
        self.stale += other.stale;
    }
}

/// What happened to one identity.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    /// `metadata.name`.
    pub name: String,
    /// Numeric identity, when the name is a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Pod namespace the identity was allocated for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.creationTimestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    /// Time of the `io.cilium.heartbeat` mark, when valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marked_at: Option<Timestamp>,
    /// The decision, as last made (after a conflict, on the fresh object).
    pub reason: Reason,
    /// What was done.
    pub outcome: Outcome,
    /// DELETE (or PATCH for marking) requests sent for this identity.
    pub attempts: u32,
    /// Each 409 Conflict met, with who had changed the object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<Conflict>,
    /// The last error met, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// What was done to one identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Not a candidate: left alone (the reason says why).
    Skipped,
    /// Scan only: would be deleted by `delete`.
    WouldDelete,
    /// Deleted (or validated by the server, with `--dry-run=server`).
    Deleted,
    /// Gone before our delete (404): someone else collected it.
    AlreadyGone,
    /// Changed during the run (mark removed or an endpoint now uses it): left alone.
    Reclaimed,
    /// Could not be deleted or marked; see `lastError`.
    Failed,
    /// Annotated with a heartbeat mark (`--mark`).
    Marked,
    /// The run stopped before any write of it could take effect.
    NotAttempted,
}

/// One 409 Conflict met while deleting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// The resourceVersion our precondition carried.
    pub expected_resource_version: String,
    /// The resourceVersion found when re-reading the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_resource_version: Option<String>,
    /// Field manager of the newest managedFields entry: who changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
    /// `Update` or `Apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// When that manager changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Timestamp>,
}

/// A run-level error or warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunError {
    /// The category.
    pub kind: ErrorKind,
    /// One line for humans.
    pub message: String,
}

/// Categories of run-level errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// A listed or watched object could not be decoded; it was skipped.
    MalformedObject,
    /// `cilium-config` could not be read; defaults were assumed.
    ConfigUnavailable,
    /// A preflight check failed.
    Preflight,
    /// Permission denied.
    Forbidden,
    /// The API server could not be reached or kept failing.
    Connection,
    /// A list continue token expired (410).
    ListExpired,
    /// A connection setting that weakens security (TLS verification off,
    /// a bearer token over plain http).
    Insecure,
    /// A safety-relevant fact could not be established (e.g. the server
    /// sent no `Date`, so mark ages were judged by the local clock).
    Warning,
    /// An endpoint watcher failed and was restarted.
    Watcher,
    /// Anything else.
    Other,
}

/// The JSON Schema of [`Report`], draft 2020-12, with our `$id`.
///
/// This is what `schema/report-v1.json` holds; `tests/it/report.rs` fails when
/// the two differ. Besides schemars' output it lists every enum's values in
/// `enum` (next to the per-value descriptions in `oneOf`), so tools that only
/// read `enum` (editors, code generators) still see the lower-kebab names.
/// No object sets `additionalProperties: false`: v1 gains optional fields,
/// and a v1 consumer must accept a newer v1 report.
pub fn schema() -> serde_json::Value {
    publishable_schema(schemars::schema_for!(Report), SCHEMA_ID)
}

/// Turns a schemars schema into the published form every document of ours
/// uses: `$schema` then `$id` first, and every unit enum's values listed in
/// `enum` (see [`schema`] for why). Shared by the report and the diagnosis.
pub fn publishable_schema(schema: schemars::Schema, id: &str) -> serde_json::Value {
    let generated = serde_json::to_value(schema).expect("schema serializes");
    let serde_json::Value::Object(generated) = generated else {
        unreachable!("a struct's schema is an object")
    };
    // `$schema` and `$id` first, for people reading the file.
    let mut root = serde_json::Map::new();
    if let Some(draft) = generated.get("$schema") {
        root.insert("$schema".into(), draft.clone());
    }
    root.insert("$id".into(), id.into());
    for (k, v) in generated {
        if k != "$schema" {
            root.insert(k, v);
        }
    }
    if let Some(serde_json::Value::Object(defs)) = root.get_mut("$defs") {
        for def in defs.values_mut() {
            list_enum_values(def);
        }
    }
    serde_json::Value::Object(root)
}

/// Adds `"type": "string", "enum": [..]` to a unit-variant enum's schema,
/// which schemars writes as `oneOf` of documented `const`s.
fn list_enum_values(def: &mut serde_json::Value) {
    let Some(obj) = def.as_object_mut() else {
        return;
    };
    let Some(serde_json::Value::Array(variants)) = obj.get("oneOf") else {
        return;
    };
    let values: Option<Vec<serde_json::Value>> = variants
        .iter()
        .map(|v| v.get("const").filter(|c| c.is_string()).cloned())
        .collect();
    if let Some(values) = values {
        obj.insert("type".into(), "string".into());
        obj.insert("enum".into(), values.into());
    }
}
