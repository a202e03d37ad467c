//! kubectl's connection flags, parsed by us (kubectl passes none of its own
//! flags to plugins) and checked the way kubectl checks them, before any
//! network call.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use cilium_gc::ConnectSettings;

use cilium_gc::parse_duration;
use cilium_gc_fleet::ContextFilter;

/// Parse a `--context-regex`.
pub fn parse_regex(s: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(s).map_err(|e| match e {
        // The regex crate's syntax error spans three lines; keep its reason.
        regex::Error::Syntax(text) => {
            let reason = text
                .lines()
                .rev()
                .find_map(|l| l.trim().strip_prefix("error: "));
            format!("not a regular expression: {}", reason.unwrap_or(&text))
        }
        other => format!("not a regular expression: {other}"),
    })
}

/// kubectl's connection flags.
#[derive(Debug, Clone, Default, Args)]
pub struct KubeArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use. Repeat it, or give a glob ('prod-*'),
    /// to run on several clusters in one run (a fleet report).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Vec<String>,
    /// Run on every context of the kubeconfig (a fleet report; see --parallel).
    #[arg(long, global = true)]
    pub all_contexts: bool,
    /// Run on every context whose name matches this regular expression (a fleet report).
    #[arg(long, global = true, value_name = "REGEX", value_parser = parse_regex)]
    pub context_regex: Option<regex::Regex>,
    /// The kubeconfig cluster to use.
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// The kubeconfig user to use.
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// The address and port of the Kubernetes API server.
    #[arg(short = 's', long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token for authentication to the API server.
    #[arg(long, global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// Path to a cert file for the certificate authority.
    #[arg(long, global = true, value_name = "PATH")]
    pub certificate_authority: Option<PathBuf>,
    /// Do not verify the server's certificate (insecure).
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Server name to use for server certificate validation.
    #[arg(long, global = true)]
    pub tls_server_name: Option<String>,
    /// Username to impersonate for the operation.
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate (repeatable).
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub as_group: Vec<String>,
    /// Time to wait for a single request, never for a watch (e.g. 30s, 1m; 0 = no limit) [default: 30s].
    #[arg(long, global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub request_timeout: Option<Duration>,
}

impl KubeArgs {
    /// Which contexts the flags select (see [`ContextFilter::is_fleet`]).
    pub fn context_filter(&self) -> ContextFilter {
        ContextFilter {
            contexts: self.context.clone(),
            all: self.all_contexts,
            regex: self.context_regex.clone(),
        }
    }

    /// The engine's connection settings.
    pub fn settings(&self) -> ConnectSettings {
        ConnectSettings {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.first().cloned(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
            server: self.server.clone(),
            token: self.token.clone(),
            certificate_authority: self.certificate_authority.clone(),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
            tls_server_name: self.tls_server_name.clone(),
            as_user: self.as_user.clone(),
            as_group: self.as_group.clone(),
            request_timeout: self.request_timeout,
        }
    }
}

/// Whether `s` is a Kubernetes namespace name (an RFC 1123 label).
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A connection flag whose value cannot go into an HTTP header or a URL.
#[derive(Debug, thiserror::Error)]
pub enum KubeArgsError {
    /// `--token` is empty or not printable ASCII.
    #[error("--token: must be non-empty printable ASCII without spaces or newlines (is it the whole file, with its trailing newline?)")]
    Token,
    /// A `--context` is empty or has control characters.
    #[error("--context: must be non-empty, without control characters")]
    Context,
    /// `flag`'s value has control characters.
    #[error("{flag}: must not contain control characters")]
    ControlCharacters {
        /// The flag, e.g. `--as`.
        flag: &'static str,
    },
    /// `--server` is not a URL.
    #[error("--server: {0:?} is not a URL")]
    Server(String),
}

/// Check the connection flags before anything is built from them: a
/// value that cannot go into an HTTP header or a URL is a usage error
/// (exit 2), never a panic deep in the client.
pub fn validate_kube_args(k: &KubeArgs) -> Result<(), KubeArgsError> {
    if let Some(t) = &k.token {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(KubeArgsError::Token);
        }
    }
    for c in &k.context {
        if c.is_empty() || c.chars().any(char::is_control) {
            return Err(KubeArgsError::Context);
        }
    }
    for (flag, v) in [
        ("--as", &k.as_user),
        ("--cluster", &k.cluster),
        ("--user", &k.user),
        ("--tls-server-name", &k.tls_server_name),
    ] {
        if let Some(v) = v {
            if v.chars().any(char::is_control) {
                return Err(KubeArgsError::ControlCharacters { flag });
            }
        }
    }
    for g in &k.as_group {
        if g.chars().any(char::is_control) {
            return Err(KubeArgsError::ControlCharacters { flag: "--as-group" });
        }
    }
    if let Some(s) = &k.server {
        if s.trim().is_empty() || s.chars().any(|c| c.is_control() || c == ' ') {
            return Err(KubeArgsError::Server(s.clone()));
        }
    }
    Ok(())
}
