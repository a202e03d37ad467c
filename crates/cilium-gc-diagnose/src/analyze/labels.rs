//! Cilium's label filter (`--labels`): its patterns, which keys it lets
//! through, and the exclusion that would close a leaky one.

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
    #[error("{pattern:?}: not a regular expression: {}", cilium_gc_cluster::humanize::regex_error(.cause))]
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
        // As Cilium's parseLabelPrefix: emptiness is judged before the `!`
        // is taken off, so `k8s:!` is an exclusion that matches every key
        // with length 0 (and so excludes nothing).
        if prefix.is_empty() {
            return Err(PatternError::Empty(s.to_owned()));
        }
        let ignore = prefix.starts_with('!');
        if ignore {
            prefix = &prefix[1..];
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

/// Which release's built-in patterns to start from: Cilium's defaults
/// changed between 1.15 and today (`defaultLabelPrefixCfg` in
/// `pkg/labelsfilter/filter.go` of each release).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterDefaults {
    /// v1.15.6's 18 patterns: the releases before 1.16.
    Cilium115,
    /// v1.19.3's 21 patterns (adds `io.cilium.k8s.policy.cluster`,
    /// `io.cilium.k8s.policy.serviceaccount` and `!topology.kubernetes.io`):
    /// 1.16 and later, and an unknown version. 1.16 to 1.18 were not
    /// checked against their own code.
    #[default]
    Cilium119,
}

impl FilterDefaults {
    /// The defaults of an agent of version `(major, minor, patch)`.
    pub fn for_version(v: Option<(u64, u64, u64)>) -> FilterDefaults {
        match v {
            Some(v) if v < (1, 16, 0) => FilterDefaults::Cilium115,
            _ => FilterDefaults::Cilium119,
        }
    }

    /// The release whose code the patterns were copied from.
    pub fn release(self) -> &'static str {
        match self {
            FilterDefaults::Cilium115 => "v1.15.6",
            FilterDefaults::Cilium119 => "v1.19.3",
        }
    }

    fn patterns(self) -> &'static [&'static str] {
        match self {
            FilterDefaults::Cilium115 => &DEFAULTS_1_15,
            FilterDefaults::Cilium119 => &DEFAULTS_1_19,
        }
    }
}

/// v1.15.6's built-in patterns, in its order.
const DEFAULTS_1_15: [&str; 18] = [
    "reserved:.*",
    r"io\.kubernetes\.pod\.namespace",
    r"io\.cilium\.k8s\.namespace\.labels",
    r"app\.kubernetes\.io",
    r"!io\.kubernetes",
    r"!kubernetes\.io",
    r"!statefulset\.kubernetes\.io/pod-name",
    r"!apps\.kubernetes\.io/pod-index",
    r"!batch\.kubernetes\.io/job-completion-index",
    r"!batch\.kubernetes\.io/controller-uid",
    r"!.*beta\.kubernetes\.io",
    r"!k8s\.io",
    "!pod-template-generation",
    "!pod-template-hash",
    "!controller-revision-hash",
    "!controller-uid",
    "!annotation.*",
    "!etcd_node",
];

/// v1.19.3's built-in patterns, in its order.
const DEFAULTS_1_19: [&str; 21] = [
    "reserved:.*",
    r"io\.kubernetes\.pod\.namespace",
    r"io\.cilium\.k8s\.namespace\.labels",
    r"app\.kubernetes\.io",
    r"io\.cilium\.k8s\.policy\.cluster",
    r"io\.cilium\.k8s\.policy\.serviceaccount",
    r"!io\.kubernetes",
    r"!kubernetes\.io",
    r"!statefulset\.kubernetes\.io/pod-name",
    r"!apps\.kubernetes\.io/pod-index",
    r"!batch\.kubernetes\.io/job-completion-index",
    r"!batch\.kubernetes\.io/controller-uid",
    r"!.*beta\.kubernetes\.io",
    r"!k8s\.io",
    "!pod-template-generation",
    "!pod-template-hash",
    "!controller-revision-hash",
    "!controller-uid",
    "!annotation.*",
    "!etcd_node",
    r"!topology\.kubernetes\.io",
];

/// Cilium's identity label filter: the built-in patterns plus the `labels`
/// setting (space-separated), evaluated as `filterLabels` does.
#[derive(Debug, Clone)]
pub struct LabelFilter {
    patterns: Vec<LabelPattern>,
    /// An inclusive user pattern exists: only included labels count.
    whitelist: bool,
}

/// A `labels` value parsed: the filter, and the patterns that did not
/// compile (the agent would refuse to start on them).
#[derive(Debug, Clone)]
pub struct ParsedFilter {
    /// The filter, without the patterns that did not compile.
    pub filter: LabelFilter,
    /// One line per pattern that did not compile.
    pub problems: Vec<String>,
}

impl LabelFilter {
    /// [`LabelFilter::with_defaults`] from today's defaults.
    pub fn parse(labels: &str) -> ParsedFilter {
        LabelFilter::with_defaults(labels, FilterDefaults::default())
    }

    /// Parse the `labels` value on top of `defaults`; patterns that do not
    /// compile are skipped and returned as problems (the agent would refuse
    /// to start on them).
    pub fn with_defaults(labels: &str, defaults: FilterDefaults) -> ParsedFilter {
        let mut problems = Vec::new();
        let mut patterns: Vec<LabelPattern> = defaults
            .patterns()
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
                Err(e) => problems.push(format!("labels: {e}")),
            }
        }
        ParsedFilter {
            filter: LabelFilter {
                patterns,
                whitelist,
            },
            problems,
        }
    }

    /// Whether a security label `source:key` would be identity-relevant:
    /// accepted when nothing excludes it and no inclusive user pattern is
    /// set, or when the longest inclusive match beats the shortest exclusion.
    pub fn accepts(&self, label: &str) -> bool {
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
pub(super) fn exclusion(label: &str) -> String {
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
