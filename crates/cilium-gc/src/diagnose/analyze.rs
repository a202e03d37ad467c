//! The diagnosis itself: plain data in ([`Input`]), a [`Diagnosis`] out.
//! Pure: no I/O, no clock (`now` is passed in), no logging.
//!
//! States reuse [`policy::decide`], so "stale" here means exactly what
//! `scan` and `delete` would act on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;

use super::types::*;
use crate::model::{Change, Identity};
use crate::policy::{self, decide, Reason, Rules};
use crate::preflight::{self, Crds};
use crate::report::{ConfigSource, ConfigValue, IdRange};

/// Cilium's default `identity-gc-interval`.
pub(crate) const DEFAULT_GC_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// A heartbeat timeout under this is flagged: agents get too little time
/// to reclaim an identity before it is deleted under them.
pub(crate) const LOW_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Utilisation from which the space is a warning.
pub(crate) const WARNING_PERCENT: f64 = 80.0;
/// Utilisation from which the space is critical.
pub(crate) const CRITICAL_PERCENT: f64 = 95.0;
/// A key needs this many distinct values to be a churn driver.
pub(crate) const MIN_DISTINCT_VALUES: u64 = 10;
/// Exhaustion closer than this (at the current rate) is a finding.
pub(crate) const EXHAUSTION_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;

/// One CiliumIdentity as the diagnosis needs it: what `scan` decodes, plus
/// the full `security-labels` map (label keys and values drive churn).
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityRecord {
    /// The identity as [`crate::model::decode_identity`] reads it.
    pub identity: Identity,
    /// `security-labels`: `source:key` → value.
    pub security_labels: BTreeMap<String, String>,
}

/// Everything collected from the cluster. Built by the shell in `mod.rs`
/// (or by tests), then only read.
#[derive(Debug, Clone, Default)]
pub struct Input {
    /// Every decodable identity.
    pub identities: Vec<IdentityRecord>,
    /// Identities that could not be decoded (name and problem), already one line each.
    pub malformed: Vec<String>,
    /// Identity id → endpoint references to it, from CEPs and CESs.
    pub refs: BTreeMap<u64, u32>,
    /// CiliumEndpoints seen.
    pub endpoints: u64,
    /// CiliumEndpointSlices seen.
    pub endpoint_slices: u64,
    /// Which CRDs are served.
    pub crds: Crds,
    /// `cilium-config` data, `None` when it could not be read.
    pub config: Option<BTreeMap<String, String>>,
    /// Problems met while collecting.
    pub warnings: Vec<String>,
    /// API server URL.
    pub server: Option<String>,
    /// kubeconfig context.
    pub context: Option<String>,
    /// Whether `--redact` was applied to this input.
    pub redacted: bool,
    /// The Cilium workloads (images, operator pods); `None` when not collected.
    pub workloads: Option<super::gc_health::Workloads>,
}

/// The state of one identity, as the diagnosis counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InUse,
    Stale,
    Marked,
    Unmarked,
    TooYoung,
    NotLocal,
    MalformedMark,
}

impl State {
    fn unused(self) -> bool {
        !matches!(self, State::InUse | State::NotLocal)
    }
}

/// The config keys reported, with Cilium's defaults.
const CONFIG_KEYS: [(&str, &str); 8] = [
    ("identity-allocation-mode", "crd"),
    ("enable-cilium-endpoint-slice", "false"),
    ("disable-endpoint-crd", "false"),
    ("identity-gc-interval", "15m0s"),
    ("identity-heartbeat-timeout", "30m0s"),
    ("identity-gc-rate-limit", "2500"),
    ("identity-gc-rate-interval", "1m0s"),
    ("labels", ""),
];

/// Build the diagnosis of `input` as of `now` (the server's clock).
pub fn analyze(input: &Input, now: Timestamp) -> Diagnosis {
    let settings = preflight::settings_from_config(input.config.as_ref(), None);
    let mut warnings = input.warnings.clone();
    warnings.extend(settings.warnings.iter().cloned());
    let gc_raw = config_value(input, "identity-gc-interval").unwrap_or("15m0s");
    let gc_interval = match crate::settings::parse_duration(gc_raw) {
        Ok(d) => Some(d),
        Err(_) => {
            warnings.push(format!(
                "cilium-config identity-gc-interval={gc_raw:?} is not a duration; assuming 15m"
            ));
            Some(DEFAULT_GC_INTERVAL)
        }
    };
    let range = policy::local_range(settings.cluster_id, settings.max_connected_clusters);
    let policy = Rules {
        local_range: range.clone(),
        heartbeat_timeout: settings.heartbeat_timeout,
    };
    // An unmarked unused identity is only overdue once the operator has had
    // a GC pass since it was created.
    let young_window = match gc_interval {
        Some(d) if !d.is_zero() => d,
        _ => settings.heartbeat_timeout,
    };

    let states: Vec<State> = input
        .identities
        .iter()
        .map(|r| state_of(r, input, &policy, young_window, now))
        .collect();

    let identity_space = identity_space(input, &states, &range);
    let age = age_and_rate(input, &identity_space, settings.heartbeat_timeout, now);
    let churn = churn(input, &states);
    let integrity = integrity(input, &states, &range);
    let modifiers = modifiers(input);
    let configuration = configuration(input, &churn, settings.heartbeat_timeout, gc_interval);

    let mut d = Diagnosis {
        schema: SCHEMA_ID.into(),
        api_version: crate::report::API_VERSION.into(),
        kind: KIND.into(),
        tool: crate::gc::tool(),
        cluster: DiagnosedCluster {
            server: input.server.clone(),
            context: input.context.clone(),
            kubernetes_version: None,
            endpoint_crd: input.crds.endpoints,
            endpoint_slice_crd: input.crds.slices,
            endpoints: input.endpoints,
            endpoint_slices: input.endpoint_slices,
        },
        generated_at: now,
        redacted: input.redacted,
        findings: Vec::new(),
        identity_space,
        age,
        churn,
        integrity,
        modifiers,
        configuration,
        warnings,
        gc_health: None,
    };
    let stale_marks: Vec<(usize, Timestamp)> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == State::Stale)
        .filter_map(|(i, _)| {
            let mark = input.identities[i].identity.mark.as_deref()?;
            Some((i, policy::parse_mark(mark)?))
        })
        .collect();
    let unused_unmarked: Vec<usize> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, State::Unmarked | State::TooYoung))
        .map(|(i, _)| i)
        .collect();
    let health = super::gc_health::gc_health(
        &input.identities,
        &stale_marks,
        &unused_unmarked,
        input.workloads.as_ref(),
        settings.heartbeat_timeout,
        gc_interval.filter(|d| !d.is_zero()),
        now,
    );
    d.findings = findings(input, &d, &settings, gc_interval);
    let gc_enabled = gc_interval.is_some_and(|d| !d.is_zero());
    d.findings.extend(
        super::gc_health::findings(&health, settings.heartbeat_timeout, now)
            .into_iter()
            // GC disabled (gc-disabled says so): marks cannot be "overdue".
            .filter(|f| gc_enabled || f.code != FindingCode::GcNotCompleting),
    );
    d.findings.sort_by_key(|f| f.severity);
    if let Some(p) = &health.workloads_problem {
        d.warnings.push(p.clone());
    }
    d.gc_health = Some(health);
    d
}

fn config_value<'a>(input: &'a Input, key: &str) -> Option<&'a str> {
    input
        .config
        .as_ref()
        .and_then(|c| c.get(key))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

fn state_of(
    r: &IdentityRecord,
    input: &Input,
    policy: &Rules,
    young_window: Duration,
    now: Timestamp,
) -> State {
    let refs = r
        .identity
        .numeric_id()
        .and_then(|id| input.refs.get(&id).copied())
        .unwrap_or(0);
    match decide(&r.identity, refs, policy, now).reason {
        Reason::InUse => State::InUse,
        Reason::NotLocal => State::NotLocal,
        Reason::Stale => State::Stale,
        Reason::MarkTooRecent => State::Marked,
        Reason::MalformedMark => State::MalformedMark,
        // No filters are set, so Filtered cannot happen; count it as young.
        Reason::Filtered => State::TooYoung,
        Reason::Unmarked => {
            let young = r
                .identity
                .created_at
                .is_some_and(|c| age_seconds(now, c) < young_window.as_secs() as i64);
            if young {
                State::TooYoung
            } else {
                State::Unmarked
            }
        }
    }
}

/// Age in whole seconds; negative when `t` is in the future (clock skew).
fn age_seconds(now: Timestamp, t: Timestamp) -> i64 {
    now.as_second() - t.as_second()
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 1000.0 / whole as f64).round() / 10.0
}

fn identity_space(
    input: &Input,
    states: &[State],
    range: &std::ops::RangeInclusive<u64>,
) -> IdentitySpace {
    let mut c = StateCounts::default();
    for s in states {
        *match s {
            State::InUse => &mut c.in_use,
            State::Stale => &mut c.stale_candidates,
            State::Marked => &mut c.unused_marked,
            State::Unmarked => &mut c.unused_unmarked,
            State::TooYoung => &mut c.too_young,
            State::NotLocal => &mut c.not_local,
            State::MalformedMark => &mut c.malformed_mark,
        } += 1;
    }
    let capacity = range.end() - range.start() + 1;
    let allocated = input
        .identities
        .iter()
        .filter(|r| {
            r.identity
                .numeric_id()
                .is_some_and(|id| range.contains(&id))
        })
        .count() as u64;
    // Exact comparison, not the rounded percent: 94.96% is not critical.
    let level = if allocated as f64 >= capacity as f64 * CRITICAL_PERCENT / 100.0 {
        Level::Critical
    } else if allocated as f64 >= capacity as f64 * WARNING_PERCENT / 100.0 {
        Level::Warning
    } else {
        Level::Ok
    };
    IdentitySpace {
        total: input.identities.len() as u64,
        states: c,
        local_range: IdRange {
            min: *range.start(),
            max: *range.end(),
        },
        capacity,
        allocated,
        utilisation_percent: percent(allocated, capacity),
        headroom: capacity.saturating_sub(allocated),
        level,
    }
}

/// Disjoint buckets: `(label, from, to)` in seconds.
const CREATED_BUCKETS: [(&str, i64, Option<i64>); 4] = [
    ("< 1h", 0, Some(HOUR)),
    ("1h-24h", HOUR, Some(DAY)),
    ("1d-7d", DAY, Some(7 * DAY)),
    (">= 7d", 7 * DAY, None),
];
const MARK_BUCKETS: [(&str, i64, Option<i64>); 5] = [
    ("< 5m", 0, Some(300)),
    ("5m-30m", 300, Some(1800)),
    ("30m-1h", 1800, Some(HOUR)),
    ("1h-24h", HOUR, Some(DAY)),
    (">= 24h", DAY, None),
];

fn bucketed(spec: &[(&str, i64, Option<i64>)], ages: impl Iterator<Item = i64>) -> Vec<AgeBucket> {
    let mut counts = vec![0u64; spec.len()];
    for age in ages {
        // A time in the future (skew) counts as brand new.
        let age = age.max(0);
        if let Some(i) = spec
            .iter()
            .position(|(_, from, to)| age >= *from && to.is_none_or(|t| age < t))
        {
            counts[i] += 1;
        }
    }
    spec.iter()
        .zip(counts)
        .map(|((label, from, to), count)| AgeBucket {
            label: (*label).into(),
            from_seconds: *from as f64,
            to_seconds: to.map(|t| t as f64),
            count,
        })
        .collect()
}

fn age_and_rate(
    input: &Input,
    space: &IdentitySpace,
    heartbeat_timeout: Duration,
    now: Timestamp,
) -> AgeAndRate {
    let created_ages: Vec<i64> = input
        .identities
        .iter()
        .filter_map(|r| r.identity.created_at)
        .map(|c| age_seconds(now, c))
        .collect();
    let mark_ages: Vec<i64> = input
        .identities
        .iter()
        .filter_map(|r| r.identity.mark.as_deref().and_then(policy::parse_mark))
        .map(|m| age_seconds(now, m))
        .collect();
    // Only local ids use up the local range: another cluster's identity
    // created today says nothing about when this range runs out.
    let local = &space.local_range;
    let created_last24h = input
        .identities
        .iter()
        .filter(|r| {
            r.identity
                .numeric_id()
                .is_some_and(|id| (local.min..=local.max).contains(&id))
        })
        .filter_map(|r| r.identity.created_at)
        .filter(|c| age_seconds(now, *c) < DAY)
        .count() as u64;
    let rate = created_last24h as f64 / 24.0;
    let exhaustion_in_seconds = if space.headroom == 0 {
        Some(0.0)
    } else if created_last24h == 0 {
        None
    } else {
        Some((space.headroom as f64 / rate * 3600.0).round())
    };
    let exhausted_at = exhaustion_in_seconds.and_then(|s| {
        now.checked_add(jiff::SignedDuration::from_secs(s as i64))
            .ok()
    });
    AgeAndRate {
        created: bucketed(&CREATED_BUCKETS, created_ages.iter().copied()),
        created_unknown: (input.identities.len() - created_ages.len()) as u64,
        marks: bucketed(&MARK_BUCKETS, mark_ages.iter().copied()),
        marks_past_timeout: mark_ages
            .iter()
            .filter(|a| **a > heartbeat_timeout.as_secs() as i64)
            .count() as u64,
        created_last24h,
        creation_rate_per_hour: (rate * 100.0).round() / 100.0,
        exhaustion_in_seconds,
        exhausted_at,
    }
}

/// Keys policies depend on: never suggested for exclusion, never a churn
/// driver (their values are namespaces, service accounts, the cluster, or
/// the workload names network policies select on: excluding `app` would
/// make every policy that selects `app: x` match nothing).
pub(crate) fn protected_key(key: &str) -> bool {
    let (source, name) = key.split_once(':').unwrap_or(("", key));
    source == "reserved"
        || name == crate::model::NAMESPACE_LABEL
        || name.starts_with("io.cilium.k8s.policy.")
        || name.starts_with("io.cilium.k8s.namespace.labels.")
        || WORKLOAD_KEYS.contains(&name)
        || name.starts_with("app.kubernetes.io/")
}

/// Labels that name a workload, by convention; policies select on them.
const WORKLOAD_KEYS: &[&str] = &["app", "k8s-app", "name", "component", "tier", "role"];

fn churn(input: &Input, states: &[State]) -> Churn {
    let total = input.identities.len() as u64;
    let mut keys: HashMap<&str, (u64, HashSet<&str>)> = HashMap::new();
    for r in &input.identities {
        for (k, v) in &r.security_labels {
            let e = keys.entry(k).or_default();
            e.0 += 1;
            e.1.insert(v);
        }
    }
    let mut label_keys: Vec<LabelKeyStat> = keys
        .into_iter()
        .map(|(key, (identities, values))| {
            let distinct = values.len() as u64;
            LabelKeyStat {
                key: key.into(),
                distinct_values: distinct,
                identities,
                share_percent: percent(identities, total),
                high_cardinality: distinct >= MIN_DISTINCT_VALUES
                    && distinct * 2 >= identities
                    && !protected_key(key),
            }
        })
        .collect();
    label_keys.sort_by(|a, b| {
        b.distinct_values
            .cmp(&a.distinct_values)
            .then_with(|| a.key.cmp(&b.key))
    });
    let mut i = 0;
    label_keys.retain(|k| {
        i += 1;
        i <= 20 || k.high_cardinality
    });

    let mut ns: BTreeMap<&str, NamespaceStat> = BTreeMap::new();
    for (r, s) in input.identities.iter().zip(states) {
        let Some(name) = r.identity.namespace.as_deref() else {
            continue;
        };
        let e = ns.entry(name).or_insert_with(|| NamespaceStat {
            namespace: name.into(),
            identities: 0,
            stale: 0,
            unused: 0,
        });
        e.identities += 1;
        e.stale += u64::from(*s == State::Stale);
        e.unused += u64::from(s.unused());
    }
    let mut by_identities: Vec<NamespaceStat> = ns.values().cloned().collect();
    by_identities.sort_by_key(|n| std::cmp::Reverse(n.identities));
    by_identities.truncate(10);
    let mut by_stale: Vec<NamespaceStat> = ns.into_values().filter(|n| n.stale > 0).collect();
    by_stale.sort_by_key(|n| std::cmp::Reverse(n.stale));
    by_stale.truncate(10);

    let mut groups: HashMap<&BTreeMap<String, String>, Vec<&str>> = HashMap::new();
    for r in &input.identities {
        if !r.security_labels.is_empty() {
            groups
                .entry(&r.security_labels)
                .or_default()
                .push(&r.identity.name);
        }
    }
    let mut dup: Vec<DuplicateGroup> = groups
        .into_iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|(labels, names)| {
            let mut identities: Vec<String> = names.into_iter().map(str::to_owned).collect();
            identities.sort_by_key(|n| (n.len(), n.clone()));
            DuplicateGroup {
                identities,
                labels: labels.clone(),
            }
        })
        .collect();
    dup.sort_by(|a, b| {
        b.identities
            .len()
            .cmp(&a.identities.len())
            .then_with(|| a.identities.cmp(&b.identities))
    });
    let duplicates = Duplicates {
        groups: dup.len() as u64,
        surplus: dup.iter().map(|g| g.identities.len() as u64 - 1).sum(),
        examples: dup.into_iter().take(10).collect(),
    };
    Churn {
        label_keys,
        namespaces_by_identities: by_identities,
        namespaces_by_stale: by_stale,
        duplicates,
    }
}

/// Whether a field manager is a Cilium agent. Agents write as `cilium-agent`
/// (and forks as `*-agent`); the operator as `cilium-operator*`.
pub(crate) fn agent_like(manager: &str) -> bool {
    manager.to_ascii_lowercase().contains("agent")
}

/// The mark-strip loop: an unused identity without a heartbeat mark whose
/// newest managedFields entry is an agent's, written after the identity was
/// created.
///
/// Why this means a leak: cilium-operator marks every unused identity and
/// deletes it once the mark is older than the heartbeat timeout; an agent
/// removes the mark when it (re)uses the identity. If an agent keeps
/// removing marks of identities no endpoint references (an agent whose
/// allocator still holds a reference for an endpoint that is gone, or that
/// runs with a different view of endpoints), the mark never gets old and
/// the identity is never collected: GC never catches up. One such identity
/// is normal (an agent may just have released it again); many are the leak.
/// managedFields keep one entry per manager, and the time is the manager's
/// last write, so this sees the last strip only, not how often it happened.
fn strip_looped(r: &IdentityRecord, state: State) -> Option<&Change> {
    if !matches!(state, State::Unmarked | State::TooYoung) {
        return None;
    }
    let change = r.identity.last_change.as_ref()?;
    let (time, created) = (change.time?, r.identity.created_at?);
    (agent_like(&change.manager) && time > created).then_some(change)
}

fn integrity(input: &Input, states: &[State], range: &std::ops::RangeInclusive<u64>) -> Integrity {
    let existing: HashSet<u64> = input
        .identities
        .iter()
        .filter_map(|r| r.identity.numeric_id())
        .collect();
    // Only local ids: reserved ids (1-255: host, world, health...) never
    // have objects, and other clusters' ids live in their own API servers.
    let dangling: Vec<(u64, u32)> = input
        .refs
        .iter()
        .filter(|(id, n)| **n > 0 && range.contains(id) && !existing.contains(id))
        .map(|(id, n)| (*id, *n))
        .collect();
    let mut strips: Vec<StripExample> = input
        .identities
        .iter()
        .zip(states)
        .filter_map(|(r, s)| {
            let c = strip_looped(r, *s)?;
            Some(StripExample {
                name: r.identity.name.clone(),
                namespace: r.identity.namespace.clone(),
                manager: c.manager.clone(),
                time: c.time?,
            })
        })
        .collect();
    strips.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.name.cmp(&b.name)));
    Integrity {
        dangling_ids: dangling.len() as u64,
        dangling_references: dangling.iter().map(|(_, n)| u64::from(*n)).sum(),
        dangling_examples: dangling.iter().take(20).map(|(id, _)| *id).collect(),
        strip_loop: strips.len() as u64,
        strip_loop_examples: strips.into_iter().take(20).collect(),
    }
}

fn modifiers(input: &Input) -> Modifiers {
    let mut by: BTreeMap<&str, (u64, Timestamp)> = BTreeMap::new();
    let mut changed = 0;
    for r in &input.identities {
        let Some(c) = &r.identity.last_change else {
            continue;
        };
        let (Some(time), Some(created)) = (c.time, r.identity.created_at) else {
            continue;
        };
        if time <= created {
            continue;
        }
        changed += 1;
        let e = by.entry(&c.manager).or_insert((0, time));
        e.0 += 1;
        e.1 = e.1.max(time);
    }
    let mut managers: Vec<ManagerActivity> = by
        .into_iter()
        .map(|(m, (n, latest))| ManagerActivity {
            manager: if m.is_empty() { "<none>" } else { m }.into(),
            identities: n,
            latest,
        })
        .collect();
    managers.sort_by_key(|m| std::cmp::Reverse(m.identities));
    Modifiers {
        changed_identities: changed,
        managers,
    }
}

/// One pattern of Cilium's label filter (`pkg/labelsfilter`): an optional
/// `source:`, then `!` to exclude, then a regex matched at the start of the
/// label key.
#[derive(Debug, Clone)]
struct LabelPattern {
    source: String,
    ignore: bool,
    expr: regex::Regex,
}

impl LabelPattern {
    fn parse(s: &str) -> Result<LabelPattern, String> {
        let (source, mut prefix) = match s.split_once(':') {
            Some((src, p)) => (src.to_owned(), p),
            None => (String::new(), s),
        };
        let ignore = prefix.starts_with('!');
        if ignore {
            prefix = &prefix[1..];
        }
        if prefix.is_empty() {
            return Err(format!("{s:?}: empty pattern"));
        }
        let expr =
            regex::Regex::new(&format!("^(?:{prefix})")).map_err(|e| format!("{s:?}: {e}"))?;
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
const DEFAULT_PATTERNS: [&str; 17] = [
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
fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn configuration(
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

fn n(x: u64) -> String {
    crate::humanize::thousands(x)
}

fn dur(seconds: f64) -> String {
    crate::humanize::human_duration(seconds)
}

/// What every finding may use: the diagnosis so far and the phrases
/// several of them repeat.
struct Ctx<'a> {
    input: &'a Input,
    d: &'a Diagnosis,
    settings: &'a preflight::CiliumSettings,
    gc_interval: Option<Duration>,
    space_line: String,
    delete_hint: String,
}

/// The findings collected so far.
#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn add(
        &mut self,
        severity: Severity,
        code: FindingCode,
        message: String,
        evidence: Vec<String>,
        suggestion: Option<String>,
    ) {
        self.0.push(Finding {
            severity,
            code,
            message,
            evidence,
            suggestion,
        });
    }
}

/// Every finding, most severe first: one function per finding, in the
/// order a reader should meet them (usage first: every count leans on it).
fn findings(
    input: &Input,
    d: &Diagnosis,
    settings: &preflight::CiliumSettings,
    gc_interval: Option<Duration>,
) -> Vec<Finding> {
    let sp = &d.identity_space;
    let st = &sp.states;
    let range = format!("{}-{}", sp.local_range.min, sp.local_range.max);
    let space_line = format!(
        "{} of {} local ids allocated ({}%), {} free (range {range})",
        n(sp.allocated),
        n(sp.capacity),
        sp.utilisation_percent,
        n(sp.headroom)
    );
    let delete_hint = if st.stale_candidates > 0 {
        format!(
            "delete the {} stale candidates (`kubectl cilium-gc scan`, then `kubectl cilium-gc delete`)",
            n(st.stale_candidates)
        )
    } else {
        "find what keeps allocating (churn drivers below) and let GC catch up (`kubectl cilium-gc delete --mark`)".to_string()
    };
    let c = Ctx {
        input,
        d,
        settings,
        gc_interval,
        space_line,
        delete_hint,
    };
    let mut out = Findings::default();
    let all: [fn(&Ctx, &mut Findings); 11] = [
        usage_unknown,
        identity_space_nearly_full,
        exhaustion_soon,
        stale_backlog,
        high_cardinality_labels,
        labels_filter,
        duplicate_identities,
        dangling_references,
        strip_loop,
        settings_that_defeat_gc,
        malformed,
    ];
    for finding in all {
        finding(&c, &mut out);
    }
    let mut out = out.0;
    out.sort_by_key(|f| f.severity);
    out
}

/// Usage first: every other count leans on it: endpoints that cannot be read, or none at all.
fn usage_unknown(c: &Ctx, out: &mut Findings) {
    let Ctx {
        input, settings, d, ..
    } = c;
    let sp = &d.identity_space;
    // Usage first: every other count leans on it.
    let sources = preflight::usage_sources(input.crds, settings);
    if !(sources.endpoints || sources.slices) {
        out.add(
            Severity::Warning,
            FindingCode::UsageUnknown,
            "neither CiliumEndpoints nor CiliumEndpointSlices can be read: every identity is counted as unused".into(),
            vec![format!(
                "ciliumendpoints served: {}, disable-endpoint-crd: {}, ciliumendpointslices served: {}",
                input.crds.endpoints, settings.endpoint_crd_disabled, input.crds.slices
            )],
            Some("check the Cilium CRDs and cilium-config before acting on these numbers".into()),
        );
    } else if input.endpoints + input.endpoint_slices == 0 && sp.total > 0 {
        out.add(
            Severity::Warning,
            FindingCode::UsageUnknown,
            format!(
                "zero CiliumEndpoints and CiliumEndpointSlices while {} identities exist: \"in use\" cannot be trusted",
                n(sp.total)
            ),
            vec!["agents down, or a cluster without pods?".into()],
            Some("check that cilium-agent runs on every node before deleting anything".into()),
        );
    }
}

/// The local identity range filling up.
fn identity_space_nearly_full(c: &Ctx, out: &mut Findings) {
    let Ctx {
        space_line,
        delete_hint,
        d,
        ..
    } = c;
    let sp = &d.identity_space;
    let st = &sp.states;
    match sp.level {
        Level::Ok => {}
        level => out.add(
            if level == Level::Critical {
                Severity::Critical
            } else {
                Severity::Warning
            },
            FindingCode::IdentitySpaceNearlyFull,
            format!(
                "the local identity range is {}% full: new pods will fail to get an identity when it runs out",
                sp.utilisation_percent
            ),
            vec![
                space_line.clone(),
                format!(
                    "{} in use, {} stale candidates, {} unused and marked, {} unused and unmarked",
                    n(st.in_use),
                    n(st.stale_candidates),
                    n(st.unused_marked),
                    n(st.unused_unmarked)
                ),
            ],
            Some(delete_hint.clone()),
        ),
    }
}

/// At the last day's creation rate, when the range runs out.
fn exhaustion_soon(c: &Ctx, out: &mut Findings) {
    let Ctx { d, space_line, .. } = c;
    let sp = &d.identity_space;
    if let Some(secs) = d.age.exhaustion_in_seconds {
        if secs < EXHAUSTION_HORIZON.as_secs_f64() && sp.headroom > 0 {
            out.add(
                if secs < DAY as f64 {
                    Severity::Critical
                } else {
                    Severity::Warning
                },
                FindingCode::ExhaustionSoon,
                format!(
                    "at the last 24 hours' rate the local range is full in {} if GC stalls",
                    dur(secs)
                ),
                vec![
                    format!(
                        "{} identities created in the last 24h ({}/h)",
                        n(d.age.created_last24h),
                        d.age.creation_rate_per_hour
                    ),
                    space_line.clone(),
                ],
                Some("reduce churn (see high-cardinality labels) and keep GC running".into()),
            );
        }
    }
}

/// Stale identities GC has not removed.
fn stale_backlog(c: &Ctx, out: &mut Findings) {
    let Ctx { d, .. } = c;
    let sp = &d.identity_space;
    let st = &sp.states;
    if st.stale_candidates > 0 {
        let severe = st.stale_candidates * 20 >= sp.allocated.max(1);
        out.add(
            if severe { Severity::Warning } else { Severity::Info },
            FindingCode::StaleBacklog,
            format!(
                "{} identities are stale (unused, mark older than {}): GC has not removed them",
                n(st.stale_candidates),
                dur(d.configuration.heartbeat_timeout_seconds)
            ),
            d.churn
                .namespaces_by_stale
                .iter()
                .take(5)
                .map(|ns| format!("{}: {} stale", ns.namespace, n(ns.stale)))
                .collect(),
            Some(
                "run `kubectl cilium-gc scan`, then `kubectl cilium-gc delete`; check cilium-operator's logs for GC errors".into(),
            ),
        );
    }
}

/// Label keys with almost one value per identity.
fn high_cardinality_labels(c: &Ctx, out: &mut Findings) {
    let Ctx { d, .. } = c;
    let high: Vec<&LabelKeyStat> = d
        .churn
        .label_keys
        .iter()
        .filter(|k| k.high_cardinality)
        .collect();
    if !high.is_empty() {
        out.add(
            Severity::Warning,
            FindingCode::HighCardinalityLabels,
            format!(
                "{} security-label {} almost one value per identity: each new value makes a new identity",
                high.len(),
                if high.len() == 1 { "key has" } else { "keys have" }
            ),
            high.iter()
                .map(|k| {
                    format!(
                        "{}: {} values on {} identities ({}% of all)",
                        k.key,
                        n(k.distinct_values),
                        n(k.identities),
                        k.share_percent
                    )
                })
                .collect(),
            Some("exclude them from identities with the `labels` setting (see configuration)".into()),
        );
    }
}

/// The `labels` setting that would keep those keys out of identities.
fn labels_filter(c: &Ctx, out: &mut Findings) {
    let Ctx { input, d, .. } = c;
    let cfg = &d.configuration;
    if let Some(suggested) = &cfg.suggested_labels {
        let current = config_value(input, "labels");
        let (code, message) = match current {
            None => (
                FindingCode::LabelsFilterMissing,
                format!(
                    "no `labels` filter is set, so {} high-cardinality {} into identities",
                    cfg.leaky_keys.len(),
                    if cfg.leaky_keys.len() == 1 {
                        "key goes"
                    } else {
                        "keys go"
                    }
                ),
            ),
            Some(_) => (
                FindingCode::LabelsFilterLeaky,
                format!(
                    "the `labels` filter lets {} high-cardinality {} into identities",
                    cfg.leaky_keys.len(),
                    if cfg.leaky_keys.len() == 1 {
                        "key"
                    } else {
                        "keys"
                    }
                ),
            ),
        };
        let mut evidence: Vec<String> = vec![format!(
            "current labels: {}",
            current.map_or("(not set)".to_string(), |c| format!("{c:?}"))
        )];
        evidence.extend(cfg.leaky_keys.iter().map(|k| format!("passes: {k}")));
        let (after, _) = LabelFilter::new(suggested);
        for k in cfg.leaky_keys.iter().filter(|k| after.accepts(k)) {
            evidence.push(format!(
                "{k} would still pass: an inclusive pattern in labels matches it further than the exclusion; narrow that pattern"
            ));
        }
        out.add(
            Severity::Warning,
            code,
            message,
            evidence,
            Some(format!(
                "set `labels: {suggested:?}` in cilium-config (Helm value `labels`) and restart cilium-agent; identities are recomputed as pods restart, and the old ones become unused and are collected"
            )),
        );
    }
}

/// Label sets carried by more than one identity.
fn duplicate_identities(c: &Ctx, out: &mut Findings) {
    let Ctx { d, .. } = c;
    let dup = &d.churn.duplicates;
    if dup.groups > 0 {
        out.add(
            if dup.surplus >= 100 {
                Severity::Warning
            } else {
                Severity::Info
            },
            FindingCode::DuplicateIdentities,
            format!(
                "{} label sets are carried by more than one identity ({} surplus identities)",
                n(dup.groups),
                n(dup.surplus)
            ),
            dup.examples
                .iter()
                .take(3)
                .map(|g| format!("identities {}", g.identities.join(", ")))
                .collect(),
            Some(
                "agents allocated concurrently; the unused copies become stale and are collected"
                    .into(),
            ),
        );
    }
}

/// Endpoints referencing identities that do not exist.
fn dangling_references(c: &Ctx, out: &mut Findings) {
    let Ctx { d, .. } = c;
    let integ = &d.integrity;
    if integ.dangling_ids > 0 {
        out.add(
            Severity::Warning,
            FindingCode::DanglingReferences,
            format!(
                "{} endpoint {} at {} {} that {} not exist: policy for those endpoints is wrong on other nodes",
                n(integ.dangling_references),
                if integ.dangling_references == 1 { "reference points" } else { "references point" },
                n(integ.dangling_ids),
                if integ.dangling_ids == 1 { "identity" } else { "identities" },
                if integ.dangling_ids == 1 { "does" } else { "do" },
            ),
            vec![format!(
                "missing ids: {}",
                integ
                    .dangling_examples
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )],
            Some("something deleted identities still in use; restart the affected pods (or cilium-agent on their nodes) so they allocate again, and find who deletes (audit log)".into()),
        );
    }
}

/// Marks stripped and set again and again.
fn strip_loop(c: &Ctx, out: &mut Findings) {
    let integ = &c.d.integrity;

    if integ.strip_loop > 0 {
        let many = integ.strip_loop >= 5;
        let mut managers: Vec<&str> = integ
            .strip_loop_examples
            .iter()
            .map(|e| e.manager.as_str())
            .collect();
        managers.sort_unstable();
        managers.dedup();
        out.add(
            if many { Severity::Warning } else { Severity::Info },
            FindingCode::MarkStripLoop,
            format!(
                "{} unused identities had their heartbeat mark removed by an agent: GC cannot collect them while this repeats",
                n(integ.strip_loop)
            ),
            integ
                .strip_loop_examples
                .iter()
                .take(3)
                .map(|e| format!("{} changed by {} at {}", e.name, e.manager, e.time))
                .chain(std::iter::once(format!("managers: {}", managers.join(", "))))
                .collect(),
            Some("look for agents still holding references to gone endpoints (cilium-dbg identity list on their nodes) and restart them".into()),
        );
    }
}

/// cilium-config settings that defeat or confuse GC.
fn settings_that_defeat_gc(c: &Ctx, out: &mut Findings) {
    let Ctx {
        input,
        d,
        settings,
        gc_interval,
        space_line,
        ..
    } = c;
    let sp = &d.identity_space;
    if gc_interval.is_some_and(|d| d.is_zero()) {
        out.add(
            if sp.level == Level::Ok {
                Severity::Warning
            } else {
                Severity::Critical
            },
            FindingCode::GcDisabled,
            "identity-gc-interval is 0: cilium-operator never collects unused identities".into(),
            vec![space_line.clone()],
            Some("set identity-gc-interval (default 15m0s), or run `kubectl cilium-gc delete --mark` on a schedule".into()),
        );
    }
    if settings.heartbeat_timeout < LOW_HEARTBEAT_TIMEOUT {
        out.add(
            Severity::Warning,
            FindingCode::HeartbeatTimeoutLow,
            format!(
                "identity-heartbeat-timeout is {}: agents get little time to reclaim an identity before it is deleted",
                dur(settings.heartbeat_timeout.as_secs_f64())
            ),
            vec![format!("identity-heartbeat-timeout below {}", dur(LOW_HEARTBEAT_TIMEOUT.as_secs_f64()))],
            Some("use the default 30m0s unless there is a reason not to".into()),
        );
    }
    if settings.allocation_mode != "crd" {
        out.add(
            Severity::Warning,
            FindingCode::NotCrdMode,
            format!(
                "identity-allocation-mode is {:?}: identities live in the kvstore; these CiliumIdentity objects are leftovers or mirrors",
                settings.allocation_mode
            ),
            vec![],
            None,
        );
    }
    if input.config.is_none() {
        out.add(
            Severity::Info,
            FindingCode::ConfigUnavailable,
            "cilium-config could not be read: Cilium's defaults were assumed".into(),
            input.warnings.iter().take(3).cloned().collect(),
            Some("pass --cilium-namespace if Cilium runs elsewhere than kube-system".into()),
        );
    }
}

/// Marks and objects that cannot be read.
fn malformed(c: &Ctx, out: &mut Findings) {
    let Ctx { input, d, .. } = c;
    let sp = &d.identity_space;
    let st = &sp.states;
    if st.malformed_mark > 0 {
        out.add(
            Severity::Info,
            FindingCode::MalformedMarks,
            format!(
                "{} identities have a heartbeat mark that is not a time: GC never deletes them",
                n(st.malformed_mark)
            ),
            vec![],
            Some("remove the io.cilium.heartbeat annotation from them".into()),
        );
    }
    if !input.malformed.is_empty() {
        out.add(
            Severity::Info,
            FindingCode::MalformedObjects,
            format!(
                "{} CiliumIdentity objects could not be decoded",
                n(input.malformed.len() as u64)
            ),
            input.malformed.iter().take(5).cloned().collect(),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-06-01T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }
    /// `NOW` minus `secs`.
    fn ago(secs: i64) -> Timestamp {
        now()
            .checked_sub(jiff::SignedDuration::from_secs(secs))
            .unwrap()
    }

    /// An identity `id` in namespace `ns`, created `age` seconds ago.
    fn ident(id: u64, ns: &str, age: i64) -> IdentityRecord {
        IdentityRecord {
            identity: Identity {
                name: id.to_string(),
                uid: format!("uid-{id}"),
                resource_version: "1".into(),
                created_at: Some(ago(age)),
                labels: BTreeMap::from([(crate::model::NAMESPACE_LABEL.into(), ns.into())]),
                namespace: Some(ns.into()),
                mark: None,
                last_change: None,
            },
            security_labels: BTreeMap::from([
                (format!("k8s:{}", crate::model::NAMESPACE_LABEL), ns.into()),
                ("k8s:app".into(), format!("app-{id}")),
            ]),
        }
    }

    fn marked(mut r: IdentityRecord, mark_age: i64) -> IdentityRecord {
        r.identity.mark = Some(ago(mark_age).to_string());
        r
    }

    fn label(mut r: IdentityRecord, k: &str, v: &str) -> IdentityRecord {
        r.security_labels.insert(k.into(), v.into());
        r
    }

    fn changed(mut r: IdentityRecord, manager: &str, age: i64) -> IdentityRecord {
        r.identity.last_change = Some(Change {
            manager: manager.into(),
            operation: "Update".into(),
            time: Some(ago(age)),
        });
        r
    }

    fn input(identities: Vec<IdentityRecord>) -> Input {
        Input {
            identities,
            crds: Crds {
                identities: true,
                endpoints: true,
                slices: false,
                slices_v2: false,
            },
            endpoints: 1,
            config: Some(BTreeMap::new()),
            ..Default::default()
        }
    }

    fn cfg(i: &mut Input, k: &str, v: &str) {
        i.config
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
    }

    fn codes(d: &Diagnosis) -> Vec<FindingCode> {
        d.findings.iter().map(|f| f.code).collect()
    }

    fn finding(d: &Diagnosis, c: FindingCode) -> &Finding {
        d.findings
            .iter()
            .find(|f| f.code == c)
            .unwrap_or_else(|| panic!("no {c:?} in {:#?}", d.findings))
    }

    #[test]
    fn every_state_is_counted_once() {
        let mut i = input(vec![
            ident(1000, "a", DAY),                   // in use
            marked(ident(1001, "a", DAY), 2 * HOUR), // stale
            marked(ident(1002, "a", DAY), 60),       // marked, too recent
            ident(1003, "b", DAY),                   // unmarked
            ident(1004, "b", 60),                    // too young
            ident(70000, "b", DAY),                  // not local
            {
                let mut r = ident(1005, "b", DAY);
                r.identity.mark = Some("soon".into());
                r
            }, // malformed mark
        ]);
        i.refs.insert(1000, 2);
        let d = analyze(&i, now());
        assert_eq!(
            d.identity_space.states,
            StateCounts {
                in_use: 1,
                stale_candidates: 1,
                unused_marked: 1,
                unused_unmarked: 1,
                too_young: 1,
                not_local: 1,
                malformed_mark: 1,
            }
        );
        assert_eq!(d.identity_space.total, 7);
        assert_eq!(d.identity_space.allocated, 6);
        assert_eq!(d.identity_space.capacity, 65_280);
        assert!(codes(&d).contains(&FindingCode::MalformedMarks));
        assert!(codes(&d).contains(&FindingCode::StaleBacklog));
    }

    #[test]
    fn utilisation_levels_and_headroom() {
        // cluster-id 1 with 511 clusters: range 33024..=65535 (32,512 ids).
        let build = |count: u64| {
            let mut i = input(
                (0..count)
                    .map(|k| {
                        let mut r = ident(32768 + 256 + k, "a", 30 * DAY);
                        r.security_labels.clear();
                        r
                    })
                    .collect(),
            );
            cfg(&mut i, "cluster-id", "1");
            cfg(&mut i, "max-connected-clusters", "511");
            for k in 0..count {
                i.refs.insert(32768 + 256 + k, 1);
            }
            analyze(&i, now())
        };
        let d = build(100);
        assert_eq!(
            d.identity_space.local_range,
            IdRange {
                min: 33024,
                max: 65535
            }
        );
        assert_eq!(d.identity_space.capacity, 32_512);
        assert_eq!(d.identity_space.level, Level::Ok);
        assert!(!codes(&d).contains(&FindingCode::IdentitySpaceNearlyFull));
        let d = build(26_010); // 80.0%
        assert_eq!(d.identity_space.level, Level::Warning);
        assert_eq!(d.identity_space.utilisation_percent, 80.0);
        assert_eq!(
            finding(&d, FindingCode::IdentitySpaceNearlyFull).severity,
            Severity::Warning
        );
        let d = build(30_887); // 95.0%
        assert_eq!(d.identity_space.level, Level::Critical);
        assert_eq!(d.identity_space.headroom, 32_512 - 30_887);
        let f = finding(&d, FindingCode::IdentitySpaceNearlyFull);
        assert_eq!(f.severity, Severity::Critical);
        assert!(
            f.evidence[0].contains("30,887 of 32,512"),
            "{:?}",
            f.evidence
        );
        assert_eq!(
            d.findings[0].severity,
            Severity::Critical,
            "most severe first"
        );
    }

    #[test]
    fn the_papers_example_figure() {
        // 64,890 of 65,280 = 99.4%.
        let i = input(
            (256..256 + 64_890)
                .map(|id| {
                    let mut r = ident(id, "a", 30 * DAY);
                    r.security_labels.clear();
                    r
                })
                .collect(),
        );
        let d = analyze(&i, now());
        assert_eq!(d.identity_space.utilisation_percent, 99.4);
        assert_eq!(d.identity_space.headroom, 390);
    }

    #[test]
    fn histograms_rate_and_exhaustion() {
        let mut ids = vec![
            ident(300, "a", 10),       // < 1h
            ident(301, "a", HOUR + 1), // 1h-24h
            ident(302, "a", 2 * DAY),  // 1d-7d
            ident(303, "a", 8 * DAY),  // >= 7d
            ident(304, "a", -30),      // future: < 1h
            marked(ident(305, "a", 8 * DAY), 60),
            marked(ident(306, "a", 8 * DAY), 2 * HOUR),
        ];
        let mut unknown = ident(307, "a", 0);
        unknown.identity.created_at = None;
        ids.push(unknown);
        let d = analyze(&input(ids), now());
        let counts: Vec<u64> = d.age.created.iter().map(|b| b.count).collect();
        assert_eq!(counts, vec![2, 1, 1, 3]);
        assert_eq!(d.age.created_unknown, 1);
        let marks: Vec<u64> = d.age.marks.iter().map(|b| b.count).collect();
        assert_eq!(marks, vec![1, 0, 0, 1, 0]);
        assert_eq!(d.age.marks_past_timeout, 1);
        assert_eq!(d.age.created_last24h, 3);
        assert_eq!(d.age.creation_rate_per_hour, 0.13);
        // headroom 65,280 - 8 at 3 per 24h: 522,176 hours.
        let secs = d.age.exhaustion_in_seconds.unwrap();
        assert_eq!(secs, ((65_280.0 - 8.0) / (3.0 / 24.0) * 3600.0_f64).round());
        assert!(!codes(&d).contains(&FindingCode::ExhaustionSoon));
        assert_eq!(d.age.created[3].to_seconds, None);
    }

    #[test]
    fn only_local_creations_count_towards_exhaustion() {
        // 50 local ids left; 50 local and 500 cluster-mesh ids created
        // today. The other cluster's do not use up this range.
        let mut ids: Vec<IdentityRecord> =
            (0..65_180).map(|k| ident(256 + k, "a", 30 * DAY)).collect();
        ids.extend((0..50).map(|k| ident(65_436 + k, "jobs", 600)));
        ids.extend((0..500).map(|k| ident(70_000 + k, "remote", 600)));
        let d = analyze(&input(ids), now());
        assert_eq!(d.identity_space.headroom, 50);
        assert_eq!(d.age.created_last24h, 50);
        assert_eq!(d.age.created[0].count, 550, "the histogram shows them all");
        // 50 ids at 50/24 per hour: 24 hours, not 2.
        assert_eq!(d.age.exhaustion_in_seconds, Some(86_400.0));
        let f = finding(&d, FindingCode::ExhaustionSoon);
        assert_eq!(f.severity, Severity::Warning);
    }

    #[test]
    fn fast_churn_near_the_end_is_critical() {
        // 64,000 old + 1,200 created in the last day: 80 ids left at 50/h.
        let mut ids: Vec<IdentityRecord> =
            (0..64_000).map(|k| ident(256 + k, "a", 30 * DAY)).collect();
        ids.extend((0..1_200).map(|k| ident(64_256 + k, "jobs", 600)));
        let d = analyze(&input(ids), now());
        assert_eq!(d.age.created_last24h, 1_200);
        assert_eq!(d.age.creation_rate_per_hour, 50.0);
        assert_eq!(d.identity_space.headroom, 80);
        assert_eq!(d.age.exhaustion_in_seconds, Some(5_760.0));
        assert_eq!(
            d.age.exhausted_at,
            Some(
                now()
                    .checked_add(jiff::SignedDuration::from_secs(5_760))
                    .unwrap()
            )
        );
        let f = finding(&d, FindingCode::ExhaustionSoon);
        assert_eq!(f.severity, Severity::Critical);
        assert!(f.message.contains("1h36m"), "{}", f.message);
    }

    #[test]
    fn job_churn_keys_are_found_and_a_filter_is_suggested() {
        let ids: Vec<IdentityRecord> = (0..40)
            .map(|k| {
                let r = ident(1000 + k, "batch", DAY);
                let r = label(r, "k8s:job-name", &format!("job-{k}"));
                let r = label(
                    r,
                    "k8s:batch.kubernetes.io/controller-uid",
                    &format!("uid-{k}"),
                );
                label(r, "k8s:tier", if k % 2 == 0 { "a" } else { "b" })
            })
            .collect();
        let d = analyze(&input(ids), now());
        let keys: Vec<(&str, u64, bool)> = d
            .churn
            .label_keys
            .iter()
            .map(|k| (k.key.as_str(), k.distinct_values, k.high_cardinality))
            .collect();
        assert_eq!(
            keys,
            vec![
                // One app per job here, yet `app` is never blamed: policies
                // select on it.
                ("k8s:app", 40, false),
                ("k8s:batch.kubernetes.io/controller-uid", 40, true),
                ("k8s:job-name", 40, true),
                ("k8s:tier", 2, false),
                ("k8s:io.kubernetes.pod.namespace", 1, false),
            ]
        );
        assert_eq!(d.churn.label_keys[0].share_percent, 100.0);
        assert!(codes(&d).contains(&FindingCode::HighCardinalityLabels));
        let f = finding(&d, FindingCode::LabelsFilterMissing);
        assert_eq!(
            d.configuration.suggested_labels.as_deref(),
            Some(r"k8s:!batch\.kubernetes\.io/controller-uid k8s:!job-name")
        );
        assert!(f.suggestion.as_ref().unwrap().contains("labels:"));
        assert!(!codes(&d).contains(&FindingCode::LabelsFilterLeaky));
    }

    #[test]
    fn a_leaky_filter_is_extended_not_replaced() {
        let ids: Vec<IdentityRecord> = (0..20)
            .map(|k| {
                let r = ident(1000 + k, "batch", DAY);
                let r = label(r, "k8s:job-name", &format!("job-{k}"));
                label(r, "k8s:controller-uid", &format!("u-{k}"))
            })
            .collect();
        let mut i = input(ids);
        cfg(&mut i, "labels", "k8s:!job-name k8s:!app");
        let d = analyze(&i, now());
        assert_eq!(d.configuration.leaky_keys, vec!["k8s:controller-uid"]);
        assert_eq!(
            d.configuration.suggested_labels.as_deref(),
            Some("k8s:!job-name k8s:!app k8s:!controller-uid")
        );
        let f = finding(&d, FindingCode::LabelsFilterLeaky);
        assert!(f.evidence.iter().any(|e| e == "passes: k8s:controller-uid"));
        assert!(!codes(&d).contains(&FindingCode::LabelsFilterMissing));
        // A filter that already excludes everything: no finding.
        cfg(
            &mut i,
            "labels",
            "k8s:!job-name k8s:!app k8s:!controller-uid",
        );
        let d = analyze(&i, now());
        assert!(d.configuration.suggested_labels.is_none());
        assert!(codes(&d).contains(&FindingCode::HighCardinalityLabels));
        assert!(!codes(&d).contains(&FindingCode::LabelsFilterLeaky));
    }

    #[test]
    fn label_filter_follows_cilium() {
        let (f, problems) = LabelFilter::new("");
        assert!(problems.is_empty());
        assert!(f.accepts("k8s:job-name"));
        assert!(f.accepts("k8s:app"));
        assert!(!f.accepts("k8s:pod-template-hash"));
        assert!(!f.accepts("k8s:io.kubernetes.foo"));
        assert!(
            f.accepts("k8s:io.kubernetes.pod.namespace"),
            "include beats shorter ignore"
        );
        // Source must match; `!` goes after the source.
        let (f, _) = LabelFilter::new("k8s:!job-name");
        assert!(!f.accepts("k8s:job-name"));
        assert!(f.accepts("container:job-name"));
        // `!` before the source is a different thing: an inclusive pattern of
        // source `!k8s` that matches nothing, which turns the filter into a
        // whitelist and drops every non-default label.
        let (f, _) = LabelFilter::new("!k8s:job-name");
        assert!(!f.accepts("k8s:job-name") && !f.accepts("k8s:app"));
        assert!(f.accepts("k8s:io.kubernetes.pod.namespace"));
        // An inclusive pattern makes it a whitelist.
        let (f, _) = LabelFilter::new("k8s:app");
        assert!(f.accepts("k8s:app"));
        assert!(!f.accepts("k8s:job-name"));
        // Anchored at the start of the key.
        let (f, _) = LabelFilter::new("k8s:!name");
        assert!(f.accepts("k8s:job-name"));
        let (_, problems) = LabelFilter::new("k8s:!job-(name");
        assert_eq!(problems.len(), 1);
        assert_eq!(exclusion("k8s:a.b/c"), r"k8s:!a\.b/c");
    }

    #[test]
    fn namespaces_are_ranked_and_protected_keys_never_blamed() {
        let mut ids: Vec<IdentityRecord> = (0..5).map(|k| ident(1000 + k, "big", DAY)).collect();
        ids.extend((0..3).map(|k| marked(ident(2000 + k, "stale-ns", DAY), 2 * HOUR)));
        ids.push(ident(3000, "small", DAY));
        // Many namespaces with one identity each: the namespace key has one
        // value per identity but is never a churn driver.
        ids.extend((0..30).map(|k| {
            let mut r = ident(4000 + k, &format!("ns-{k}"), DAY);
            r.security_labels.remove("k8s:app");
            r
        }));
        let d = analyze(&input(ids), now());
        let top = &d.churn.namespaces_by_identities[0];
        assert_eq!(
            (top.namespace.as_str(), top.identities, top.unused),
            ("big", 5, 5)
        );
        assert_eq!(d.churn.namespaces_by_identities.len(), 10);
        let stale: Vec<(&str, u64)> = d
            .churn
            .namespaces_by_stale
            .iter()
            .map(|n| (n.namespace.as_str(), n.stale))
            .collect();
        assert_eq!(stale, vec![("stale-ns", 3)]);
        let ns_key = d
            .churn
            .label_keys
            .iter()
            .find(|k| k.key == "k8s:io.kubernetes.pod.namespace")
            .unwrap();
        assert!(ns_key.distinct_values >= 30 && !ns_key.high_cardinality);
        assert!(protected_key("reserved:host"));
        assert!(protected_key("k8s:io.cilium.k8s.policy.serviceaccount"));
        assert!(!protected_key("k8s:job-name"));
    }

    #[test]
    fn duplicates_are_grouped() {
        let same = |id| {
            let mut r = ident(id, "a", DAY);
            r.security_labels.insert("k8s:app".into(), "web".into());
            r
        };
        let d = analyze(
            &input(vec![
                same(1000),
                same(1002),
                same(1001),
                ident(1003, "a", DAY),
            ]),
            now(),
        );
        assert_eq!(d.churn.duplicates.groups, 1);
        assert_eq!(d.churn.duplicates.surplus, 2);
        assert_eq!(
            d.churn.duplicates.examples[0].identities,
            vec!["1000", "1001", "1002"]
        );
        assert_eq!(d.churn.duplicates.examples[0].labels["k8s:app"], "web");
        assert_eq!(
            finding(&d, FindingCode::DuplicateIdentities).severity,
            Severity::Info
        );
    }

    #[test]
    fn dangling_references_count_only_local_ids() {
        let mut i = input(vec![ident(1000, "a", DAY)]);
        i.refs = BTreeMap::from([(1000, 1), (4, 3), (1500, 2), (1501, 1), (70_000, 5)]);
        let d = analyze(&i, now());
        assert_eq!(d.integrity.dangling_ids, 2);
        assert_eq!(d.integrity.dangling_references, 3);
        assert_eq!(d.integrity.dangling_examples, vec![1500, 1501]);
        let f = finding(&d, FindingCode::DanglingReferences);
        assert!(f.evidence[0].contains("1500, 1501"));
    }

    #[test]
    fn strip_loop_needs_unused_unmarked_and_an_agent_after_creation() {
        let mut ids: Vec<IdentityRecord> = (0..6)
            .map(|k| changed(ident(1000 + k, "a", DAY), "cilium-agent", 600 + k as i64))
            .collect();
        ids.push(changed(
            ident(2000, "a", DAY),
            "cilium-operator-generic",
            60,
        )); // not an agent
        ids.push(changed(ident(2001, "a", DAY), "cilium-agent", DAY)); // at creation
        ids.push(changed(
            marked(ident(2002, "a", DAY), 60),
            "cilium-agent",
            30,
        )); // marked
        ids.push(changed(ident(2003, "a", DAY), "cilium-agent", 60)); // in use
        let mut i = input(ids);
        i.refs.insert(2003, 1);
        let d = analyze(&i, now());
        assert_eq!(d.integrity.strip_loop, 6);
        let first = &d.integrity.strip_loop_examples[0];
        assert_eq!(
            (first.name.as_str(), first.manager.as_str()),
            ("1000", "cilium-agent")
        );
        assert_eq!(first.time, ago(600));
        assert_eq!(
            finding(&d, FindingCode::MarkStripLoop).severity,
            Severity::Warning
        );
        assert!(agent_like("Cilium-Agent") && !agent_like("kubectl-cilium-gc"));
    }

    #[test]
    fn modifiers_group_by_newest_manager() {
        let d = analyze(
            &input(vec![
                changed(ident(1000, "a", DAY), "cilium-agent", 600),
                changed(ident(1001, "a", DAY), "cilium-agent", 60),
                changed(ident(1002, "a", DAY), "cilium-operator-generic", 120),
                changed(ident(1003, "a", DAY), "cilium-agent", DAY), // creation only
                ident(1004, "a", DAY),
            ]),
            now(),
        );
        assert_eq!(d.modifiers.changed_identities, 3);
        assert_eq!(
            d.modifiers.managers,
            vec![
                ManagerActivity {
                    manager: "cilium-agent".into(),
                    identities: 2,
                    latest: ago(60)
                },
                ManagerActivity {
                    manager: "cilium-operator-generic".into(),
                    identities: 1,
                    latest: ago(120)
                },
            ]
        );
    }

    #[test]
    fn configuration_findings() {
        let mut i = input(vec![ident(1000, "a", DAY)]);
        cfg(&mut i, "identity-gc-interval", "0s");
        cfg(&mut i, "identity-heartbeat-timeout", "2m");
        cfg(&mut i, "identity-allocation-mode", "kvstore");
        let d = analyze(&i, now());
        assert_eq!(d.configuration.gc_interval_seconds, Some(0.0));
        assert_eq!(d.configuration.heartbeat_timeout_seconds, 120.0);
        let gc = finding(&d, FindingCode::GcDisabled);
        assert_eq!(gc.severity, Severity::Warning);
        assert!(codes(&d).contains(&FindingCode::HeartbeatTimeoutLow));
        assert!(codes(&d).contains(&FindingCode::NotCrdMode));
        let v: Vec<(&str, &str, ConfigSource)> = d
            .configuration
            .values
            .iter()
            .map(|v| (v.key.as_str(), v.value.as_str(), v.source))
            .collect();
        assert_eq!(
            v[3],
            ("identity-gc-interval", "0s", ConfigSource::CiliumConfig)
        );
        assert_eq!(
            v[5],
            ("identity-gc-rate-limit", "2500", ConfigSource::Default)
        );
        assert_eq!(v.len(), CONFIG_KEYS.len());
        // Unreadable config: defaults and an info finding.
        i.config = None;
        i.warnings
            .push("cannot read cilium-config in kube-system: 404".into());
        let d = analyze(&i, now());
        assert!(!d.configuration.found);
        assert_eq!(d.configuration.gc_interval_seconds, Some(900.0));
        assert_eq!(
            finding(&d, FindingCode::ConfigUnavailable).severity,
            Severity::Info
        );
        assert!(d.warnings.iter().any(|w| w.contains("404")));
    }

    #[test]
    fn usage_unknown_without_sources_or_endpoints() {
        let mut i = input(vec![ident(1000, "a", DAY)]);
        i.endpoints = 0;
        let d = analyze(&i, now());
        assert!(finding(&d, FindingCode::UsageUnknown)
            .message
            .contains("zero"));
        i.crds.endpoints = false;
        let d = analyze(&i, now());
        assert!(finding(&d, FindingCode::UsageUnknown)
            .message
            .contains("neither"));
    }

    #[test]
    fn a_healthy_cluster_has_no_findings() {
        let mut i = input((0..5).map(|k| ident(1000 + k, "a", DAY)).collect());
        for k in 0..5 {
            i.refs.insert(1000 + k, 1);
        }
        let d = analyze(&i, now());
        assert!(d.findings.is_empty(), "{:#?}", d.findings);
        assert_eq!(d.kind, KIND);
        assert_eq!(d.schema, SCHEMA_ID);
        assert_eq!(d.generated_at, now());
    }

    #[test]
    fn findings_are_sorted_most_severe_first() {
        let mut i = input(
            (256..256 + 63_000)
                .map(|id| {
                    let mut r = ident(id, "a", 30 * DAY);
                    r.security_labels.clear();
                    r
                })
                .collect(),
        );
        cfg(&mut i, "identity-gc-interval", "0");
        i.identities.push(marked(ident(64_000, "a", DAY), 60));
        i.identities[0].identity.mark = Some("junk".into());
        let d = analyze(&i, now());
        let sev: Vec<Severity> = d.findings.iter().map(|f| f.severity).collect();
        let mut sorted = sev.clone();
        sorted.sort();
        assert_eq!(sev, sorted);
        assert_eq!(
            finding(&d, FindingCode::GcDisabled).severity,
            Severity::Critical
        );
        assert_eq!(sev.last(), Some(&Severity::Info));
    }
}
