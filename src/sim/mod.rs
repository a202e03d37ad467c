//! A simulated Kubernetes API server (placeholder; see issue 2).
