//! Why a store operation failed, in the API server's terms: the HTTP layer
//! turns each variant into its `Status` (404, 409, 422, 410), and the
//! cilium-operator pass reads them as the real operator reads its client's
//! errors.

/// Why a store operation failed; the HTTP layer turns these into `Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// No object with that key.
    #[error("not found")]
    NotFound,
    /// Create of a key that exists.
    #[error("already exists")]
    AlreadyExists,
    /// An optimistic-concurrency or precondition failure; the message is the
    /// full `Status.message`.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A delete precondition (uid or resourceVersion) did not hold; the
    /// message is the full `Status.message`.
    #[error("precondition failed: {0}")]
    Precondition(String),
    /// The request itself was invalid (422); full message.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The revision asked for has been compacted away.
    #[error("revision {0} compacted")]
    Expired(u64),
}
