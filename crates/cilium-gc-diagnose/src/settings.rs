//! What a diagnosis is asked for, as plain values.

/// What `diagnose` was asked for.
#[derive(Debug, Clone)]
pub struct DiagnoseSettings {
    /// Namespace of the cilium-config ConfigMap.
    pub cilium_namespace: String,
    /// Identities per list request.
    pub page_size: u32,
    /// Replace namespaces, label values and the server URL with hashes.
    pub redact: bool,
    /// Read cilium-operator's metrics a second time this long after the
    /// first (zero: read once, judge against its uptime).
    pub operator_metrics_wait: std::time::Duration,
    /// Watch the identities this long first and count the names that
    /// appear and disappear (zero: no sample).
    pub sample: std::time::Duration,
    /// `--labels`: a proposed Cilium `labels` filter to judge (reads the
    /// network policies, an optional permission).
    pub labels: Option<String>,
}

/// Retries per request for the few reads a diagnosis makes.
pub(crate) const MAX_RETRIES: u32 = 5;
