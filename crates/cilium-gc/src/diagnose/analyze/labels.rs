//! Cilium's label filter (`--labels`): its patterns, which keys it lets
//! through, and the exclusion that would close a leaky one.

use super::*;

/// One pattern of Cilium's label filter (`pkg/labelsfilter`): an optional
/// `source:`, then `!` to exclude, then a regex matched at the start of the
/// label key.
#[derive(Debug, Clone)]
pub(super) struct LabelPattern {
    source: String,
    ignore: bool,
    expr: regex::Regex,
}

/// A `labels` pattern Cilium would not accept either; the diagnosis warns
/// and goes on without it.
#[derive(Debug, thiserror::Error)]
pub(super) enum PatternError {
    /// Nothing after the source and the `!`.
    #[error("{0:?}: empty pattern")]
    Empty(String),
    /// The prefix is not a regular expression.
    #[error("{pattern:?}: {cause}")]
    Regex {
        /// The pattern as written.
        pattern: String,
        /// Why it does not compile.
        cause: regex::Error,
    },
}

impl LabelPattern {
    fn parse(s: &str) -> Result<LabelPattern, PatternError> {
        let (source, mut prefix) = match s.split_once(':') {
            Some((src, p)) => (src.to_owned(), p),
            None => (String::new(), s),
        };
        let ignore = prefix.starts_with('!');
        if ignore {
            prefix = &prefix[1..];
        }
        if prefix.is_empty() {
            return Err(PatternError::Empty(s.to_owned()));
        }
        let expr =
            regex::Regex::new(&format!("^(?:{prefix})")).map_err(|cause| PatternError::Regex {
                pattern: s.to_owned(),
                cause,
            })?;
        Ok(LabelPattern {
            source,
            ignore,
            expr,
        })
    }

    /// Length of the match at the start of the key, if any.
    fn matches(&self, source: &str, key: &str) -> Option<usize> {
        if !self.source.is_empty() && self.source != source {
            return None;
        }
        self.expr.find(key).map(|m| m.end())
    }
}

/// Cilium's built-in patterns (used when no label-prefix-file is set).
pub(super) const DEFAULT_PATTERNS: [&str; 17] = [
    "reserved:.*",
    r"io\.kubernetes\.pod\.namespace",
    r"io\.cilium\.k8s\.namespace\.labels",
    r"app\.kubernetes\.io",
    r"io\.cilium\.k8s\.policy\.cluster",
    r"!io\.kubernetes",
    r"!kubernetes\.io",
    r"!statefulset\.kubernetes\.io/pod-name",
    r"!apps\.kubernetes\.io/pod-index",
    r"!batch\.kubernetes\.io/job-completion-index",
    r"!.*beta\.kubernetes\.io",
    r"!k8s\.io",
    "!pod-template-generation",
    "!pod-template-hash",
    "!controller-revision-hash",
    "!annotation.*",
    "!etcd_node",
];

/// Cilium's identity label filter: the built-in patterns plus the `labels`
/// setting (space-separated), evaluated as `filterLabels` does.
#[derive(Debug, Clone)]
pub(crate) struct LabelFilter {
    patterns: Vec<LabelPattern>,
    /// An inclusive user pattern exists: only included labels count.
    whitelist: bool,
}

impl LabelFilter {
    /// Parse the `labels` value; patterns that do not compile are skipped
    /// and returned as problems (the agent would refuse to start on them).
    pub(crate) fn new(labels: &str) -> (LabelFilter, Vec<String>) {
        let mut problems = Vec::new();
        let mut patterns: Vec<LabelPattern> = DEFAULT_PATTERNS
            .iter()
            .map(|p| LabelPattern::parse(p).expect("built-in patterns compile"))
            .collect();
        let mut whitelist = false;
        for p in labels.split_whitespace() {
            match LabelPattern::parse(p) {
                Ok(p) => {
                    whitelist |= !p.ignore;
                    patterns.push(p);
                }
                Err(e) => problems.push(format!("cilium-config labels: {e}")),
            }
        }
        (
            LabelFilter {
                patterns,
                whitelist,
            },
            problems,
        )
    }

    /// Whether a security label `source:key` would be identity-relevant:
    /// accepted when nothing excludes it and no inclusive user pattern is
    /// set, or when the longest inclusive match beats the shortest exclusion.
    pub(crate) fn accepts(&self, label: &str) -> bool {
        let (source, key) = label.split_once(':').unwrap_or(("", label));
        let (mut included, mut ignored) = (0, 0);
        for p in &self.patterns {
            if let Some(len) = p.matches(source, key) {
                if p.ignore {
                    if ignored == 0 || len < ignored {
                        ignored = len;
                    }
                } else if len > included {
                    included = len;
                }
            }
        }
        (!self.whitelist && ignored == 0) || included > ignored
    }
}

/// The exclusion pattern for one `source:key`, in Cilium's syntax.
pub(crate) fn exclusion(label: &str) -> String {
    match label.split_once(':') {
        Some((source, key)) => format!("{source}:!{}", quote_meta(key)),
        None => format!("!{}", quote_meta(label)),
    }
}

/// Go's `regexp.QuoteMeta`, as Cilium's own defaults are written: only
/// regex metacharacters are escaped (`-` and `/` stay readable).
pub(super) fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

pub(super) fn configuration(
    input: &Input,
    churn: &Churn,
    heartbeat_timeout: Duration,
    gc_interval: Option<Duration>,
) -> Configuration {
    let values = CONFIG_KEYS
        .iter()
        .map(|(key, default)| match config_value(input, key) {
            Some(v) => ConfigValue {
                key: (*key).into(),
                value: v.into(),
                source: ConfigSource::CiliumConfig,
            },
            None => ConfigValue {
                key: (*key).into(),
                value: (*default).into(),
                source: ConfigSource::Default,
            },
        })
        .collect();
    let labels = config_value(input, "labels").unwrap_or("");
    let (filter, _) = LabelFilter::new(labels);
    let leaky_keys: Vec<String> = churn
        .label_keys
        .iter()
        .filter(|k| k.high_cardinality && filter.accepts(&k.key))
        .map(|k| k.key.clone())
        .collect();
    let suggested_labels = (!leaky_keys.is_empty()).then(|| {
        let mut parts: Vec<String> = labels.split_whitespace().map(str::to_owned).collect();
        parts.extend(leaky_keys.iter().map(|k| exclusion(k)));
        parts.join(" ")
    });
    Configuration {
        found: input.config.is_some(),
        values,
        gc_interval_seconds: gc_interval.map(|d| d.as_secs_f64()),
        heartbeat_timeout_seconds: heartbeat_timeout.as_secs_f64(),
        leaky_keys,
        suggested_labels,
    }
}
