//! What every document opens with, declared once: the [`Header`]
//! (`$schema`, `apiVersion`, `kind`, `tool`) and, for the three documents
//! that cover a run, its [`Span`] (`startedAt`, `finishedAt`,
//! `durationSeconds`). Each document flattens them into its own fields
//! (`#[serde(flatten)]`), so the JSON and the published schemas read as if
//! each document declared them itself.
//!
//! The schemas describe these fields in each document's own words (the
//! report's `tool` is "the program that wrote the report", the fleet
//! diagnosis' "…the document"), and v1's schemas must not change. So the
//! two types are generic over the document they open, and take those words
//! from its [`Document`] (and [`Timed`]) implementation: `Header<Report>`
//! is a report's header, described as the report always described it.
//!
//! The diagnosis has no span: it is judged at one cluster time,
//! `generatedAt`, which stays its own field.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `apiVersion` of our documents: our own group, not `cilium.io`.
pub const API_VERSION: &str = "cilium-gc.kubectl.io/v1";

/// The program that wrote the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Always `kubectl-cilium-gc`.
    pub name: String,
    /// Semantic version of the tool.
    pub version: String,
    /// Git commit the tool was built from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Tool {
    /// This build: its name, version and commit (`kubectl cilium-gc
    /// version`, and the `tool` of every document it writes).
    pub fn current() -> Tool {
        Tool {
            name: "kubectl-cilium-gc".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            commit: option_env!("KUBECTL_CILIUM_GC_COMMIT")
                .map(str::to_owned)
                .filter(|c| !c.is_empty()),
        }
    }
}

/// One of the published documents: what its shared fields hold and how its
/// schema describes them.
pub trait Document {
    /// Its `kind`.
    const KIND: &'static str;
    /// Its schema's `$id`, also written as `$schema` in every document.
    const SCHEMA_ID: &'static str;
    /// How its schema describes `kind`.
    const KIND_DOC: &'static str;
    /// How its schema describes `tool`.
    const TOOL_DOC: &'static str;
}

/// A document that covers a run, from its start to when it was written:
/// how its schema describes the [`Span`]'s fields.
pub trait Timed: Document {
    /// How its schema describes `startedAt`.
    const STARTED_DOC: &'static str;
    /// How its schema describes `finishedAt`.
    const FINISHED_DOC: &'static str;
    /// How its schema describes `durationSeconds`.
    const DURATION_DOC: &'static str;
}

// No doc comment reaches the schema: a flattened type's description would be
// merged into the document's (schemars fills keys the document lacks).
/// The fields every document opens with, in this order.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(bound = "D: Document", rename = "Header", description = "")]
pub struct Header<D> {
    /// The JSON Schema this document conforms to.
    #[serde(rename = "$schema")]
    pub schema: String,
    /// Document version: `cilium-gc.kubectl.io/v1`.
    pub api_version: String,
    /// The document's kind (`D::KIND` in what we write).
    #[schemars(description = D::KIND_DOC)]
    pub kind: String,
    /// The program that wrote the document.
    #[schemars(description = D::TOOL_DOC)]
    pub tool: Tool,
    #[serde(skip)]
    document: PhantomData<fn() -> D>,
}

impl<D: Document> Header<D> {
    /// The header of a `D` written now by `tool`: its schema, this
    /// [`API_VERSION`] and its kind.
    pub fn new(tool: Tool) -> Self {
        Header {
            schema: D::SCHEMA_ID.into(),
            api_version: API_VERSION.into(),
            kind: D::KIND.into(),
            tool,
            document: PhantomData,
        }
    }
}

/// When a run ran: the three time fields of the report, the fleet report
/// and the fleet diagnosis.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(bound = "D: Timed", rename = "Span", description = "")]
pub struct Span<D> {
    /// When the run started (RFC 3339, UTC).
    #[schemars(description = D::STARTED_DOC)]
    pub started_at: Timestamp,
    /// When the document was written (RFC 3339, UTC).
    #[schemars(description = D::FINISHED_DOC)]
    pub finished_at: Timestamp,
    /// Wall time of the run, in seconds (to the millisecond).
    #[schemars(description = D::DURATION_DOC)]
    pub duration_seconds: f64,
    #[serde(skip)]
    document: PhantomData<fn() -> D>,
}

impl<D> Span<D> {
    /// A run that started at `started_at`, was written at `finished_at`
    /// and took `elapsed` by the monotonic clock (rounded to the
    /// millisecond: the wall clock may step, the duration may not).
    pub fn new(started_at: Timestamp, finished_at: Timestamp, elapsed: Duration) -> Self {
        Span {
            started_at,
            finished_at,
            duration_seconds: (elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
            document: PhantomData,
        }
    }
}

// By hand rather than derived: a derive would ask the same of `D`, and the
// report itself is neither `PartialEq` nor needs to be for its header to be.
impl<D> Clone for Header<D> {
    fn clone(&self) -> Self {
        Header {
            schema: self.schema.clone(),
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            tool: self.tool.clone(),
            document: PhantomData,
        }
    }
}

impl<D> PartialEq for Header<D> {
    fn eq(&self, other: &Self) -> bool {
        self.schema == other.schema
            && self.api_version == other.api_version
            && self.kind == other.kind
            && self.tool == other.tool
    }
}

impl<D> fmt::Debug for Header<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Header")
            .field("schema", &self.schema)
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("tool", &self.tool)
            .finish()
    }
}

impl<D> Clone for Span<D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D> Copy for Span<D> {}

impl<D> PartialEq for Span<D> {
    fn eq(&self, other: &Self) -> bool {
        self.started_at == other.started_at
            && self.finished_at == other.finished_at
            && self.duration_seconds == other.duration_seconds
    }
}

impl<D> fmt::Debug for Span<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Span")
            .field("started_at", &self.started_at)
            .field("finished_at", &self.finished_at)
            .field("duration_seconds", &self.duration_seconds)
            .finish()
    }
}
