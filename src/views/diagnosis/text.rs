//! The diagnosis as text for humans: findings first, most severe first,
//! then each section. Pure like [`crate::views`]: a `&Diagnosis` in, a
//! `String` out, colour only when the [`Style`] says so.

use std::fmt::Write as _;

use super::glyphs;
use crate::views::format::{Paint, Style};
use crate::views::phrases;
use cilium_gc::{human_duration, thousands};
use cilium_gc_diagnose::Diagnosis;
use cilium_gc_documents::diagnosis::{AgeBucket, Level, Severity};

/// A finding's severity as a fixed-width label, coloured by how bad it is.
fn severity(p: &Paint, sev: Severity) -> String {
    let label = format!("{:<8}", sev.as_str().to_uppercase());
    match sev {
        Severity::Critical => p.red(&label),
        Severity::Warning => p.bold(&p.yellow(&label)),
        Severity::Info => p.cyan(&label),
    }
}

/// How full the identity space is, coloured.
fn level(p: &Paint, level: Level) -> String {
    match level {
        Level::Ok => p.green("ok"),
        Level::Warning => p.bold(&p.yellow("WARNING")),
        Level::Critical => p.red("CRITICAL"),
    }
}

fn buckets(b: &[AgeBucket]) -> String {
    b.iter()
        .map(|b| format!("{}: {}", b.label, thousands(b.count)))
        .collect::<Vec<_>>()
        .join("   ")
}

/// The text view of `d`.
pub fn text(d: &Diagnosis, style: Style) -> String {
    let p = Paint::new(style);
    let mut o = String::new();
    for section in [
        header,
        findings,
        identity_space,
        forecast,
        age_and_rate,
        churn_drivers,
        integrity,
        modifiers,
        writers,
        labels_what_if,
        configuration,
        warnings,
    ] {
        section(&mut o, d, &p);
    }
    o
}

/// The headline: which cluster, when, and whether names are redacted.
fn header(o: &mut String, d: &Diagnosis, p: &Paint) {
    let server = d.cluster.server.as_deref().unwrap_or("(unknown server)");
    let _ = write!(o, "{} {server}", p.bold("Cilium identity diagnosis:"));
    if let Some(c) = &d.cluster.context {
        let _ = write!(o, " (context {c})");
    }
    let _ = writeln!(o, " at {}", d.generated_at);
    if d.redacted {
        let _ = writeln!(o, "{}", p.dim(&format!("redacted: {}", phrases::REDACTED)));
    }
}

/// Findings first, most severe first, each with its evidence and what to do.
fn findings(o: &mut String, d: &Diagnosis, p: &Paint) {
    let _ = writeln!(o, "\n{}", p.bold("FINDINGS"));
    if d.findings.is_empty() {
        let _ = writeln!(o, "  none: {}", phrases::HEALTHY);
    }
    for f in &d.findings {
        let _ = writeln!(
            o,
            "  {} {} {}",
            severity(p, f.severity),
            p.bold(f.code.as_str()),
            f.message
        );
        for e in &f.evidence {
            let _ = writeln!(o, "           {}", p.dim(e));
        }
        if let Some(s) = &f.suggestion {
            let _ = writeln!(o, "           -> {s}");
        }
    }
}

/// How full the local identity range is, by state.
fn identity_space(o: &mut String, d: &Diagnosis, p: &Paint) {
    let sp = &d.identity_space;
    let st = &sp.states;
    let _ = writeln!(o, "\n{}", p.bold("IDENTITY SPACE"));
    let _ = writeln!(
        o,
        "  {}  [{}]",
        phrases::identity_space(sp, "-", |s| s),
        level(p, sp.level)
    );
    for line in glyphs::space_bar(sp, p) {
        let _ = writeln!(o, "{line}");
    }
    for (label, v) in phrases::states(st) {
        let _ = writeln!(o, "  {label:<32} {:>9}", thousands(v));
    }
    let _ = writeln!(o, "  {:<32} {:>9}", "total", thousands(sp.total));
}

/// Where the range is heading: creations per hour as a sparkline, the
/// pace, and the range if GC stops or works (`gc-cannot-keep-up` and
/// `exhaustion-soon` say what to do about it among the findings).
fn forecast(o: &mut String, d: &Diagnosis, p: &Paint) {
    let Some(f) = &d.forecast else { return };
    let _ = writeln!(o, "\n{}", p.bold("FORECAST"));
    let timeout = d.configuration.heartbeat_timeout_seconds;
    for line in glyphs::creations(f, timeout, p)
        .into_iter()
        .chain(glyphs::forecast_words(f, p))
    {
        let _ = writeln!(o, "{line}");
    }
}

/// When identities were created and marked, and the creation rate.
fn age_and_rate(o: &mut String, d: &Diagnosis, p: &Paint) {
    let a = &d.age;
    let _ = writeln!(o, "\n{}", p.bold("AGE AND RATE"));
    let _ = write!(o, "  created  {}", buckets(&a.created));
    if a.created_unknown > 0 {
        let _ = write!(o, "   unknown: {}", thousands(a.created_unknown));
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  marks    {}   (past the {} timeout: {})",
        buckets(&a.marks),
        human_duration(d.configuration.heartbeat_timeout_seconds),
        thousands(a.marks_past_timeout)
    );
    let _ = write!(
        o,
        "  created in the last 24h: {} ({}/h)",
        thousands(a.created_last24h),
        a.creation_rate_per_hour
    );
    match (a.exhaustion_in_seconds, a.exhausted_at) {
        (Some(s), Some(at)) if s > 0.0 => {
            let _ = writeln!(o, "{}", phrases::exhaustion(&human_duration(s), at));
        }
        (Some(_), _) => {
            let _ = writeln!(o, "; the range is full");
        }
        _ => {
            let _ = writeln!(o);
        }
    }
}

/// Which label keys and namespaces make new identities.
fn churn_drivers(o: &mut String, d: &Diagnosis, p: &Paint) {
    let c = &d.churn;
    let _ = writeln!(o, "\n{}", p.bold("CHURN DRIVERS"));
    if !c.label_keys.is_empty() {
        let width = c
            .label_keys
            .iter()
            .map(|k| k.key.len())
            .max()
            .unwrap_or(0)
            .max(9);
        let _ = writeln!(
            o,
            "  {:<width$}  {:>9}  {:>10}  {:>6}",
            "label key", "values", "identities", "share"
        );
        for k in c.label_keys.iter().take(10) {
            let _ = writeln!(
                o,
                "  {:<width$}  {:>9}  {:>10}  {:>5}%{}",
                k.key,
                thousands(k.distinct_values),
                thousands(k.identities),
                k.share_percent,
                if k.high_cardinality {
                    "  high cardinality"
                } else {
                    ""
                }
            );
        }
    }
    let ns_list = |v: &[cilium_gc_documents::diagnosis::NamespaceStat], stale: bool| {
        v.iter()
            .take(5)
            .map(|s| {
                format!(
                    "{} ({})",
                    s.namespace,
                    thousands(if stale { s.stale } else { s.identities })
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !c.namespaces_by_identities.is_empty() {
        let _ = writeln!(
            o,
            "  namespaces by identities: {}",
            ns_list(&c.namespaces_by_identities, false)
        );
    }
    if !c.namespaces_by_stale.is_empty() {
        let _ = writeln!(
            o,
            "  namespaces by stale: {}",
            ns_list(&c.namespaces_by_stale, true)
        );
    }
    let groups = thousands(c.duplicates.groups);
    let surplus = thousands(c.duplicates.surplus);
    let _ = writeln!(
        o,
        "  duplicate label sets: {}",
        phrases::duplicates(&groups, &surplus)
    );
}

/// Dangling references and strip loops.
fn integrity(o: &mut String, d: &Diagnosis, p: &Paint) {
    let i = &d.integrity;
    let _ = writeln!(o, "\n{}", p.bold("INTEGRITY"));
    let _ = write!(
        o,
        "  dangling references: {} missing ids, {} references",
        thousands(i.dangling_ids),
        thousands(i.dangling_references)
    );
    if !i.dangling_examples.is_empty() {
        let ids: Vec<String> = i.dangling_examples.iter().map(u64::to_string).collect();
        let _ = write!(o, " ({})", ids.join(", "));
    }
    let _ = writeln!(o);
    let _ = write!(
        o,
        "  mark stripped by an agent while unused: {}",
        thousands(i.strip_loop)
    );
    if let Some(e) = i.strip_loop_examples.first() {
        let _ = write!(o, " (latest: {} by {} at {})", e.name, e.manager, e.time);
    }
    let _ = writeln!(o);
}

/// Who modifies identities after creation.
fn modifiers(o: &mut String, d: &Diagnosis, p: &Paint) {
    let m = &d.modifiers;
    let _ = writeln!(o, "\n{}", p.bold("WHO MODIFIES IDENTITIES"));
    let _ = writeln!(
        o,
        "  changed after creation: {}",
        thousands(m.changed_identities)
    );
    for a in &m.managers {
        let _ = writeln!(
            o,
            "  {:<32} {:>9}  latest {}",
            a.manager,
            thousands(a.identities),
            a.latest
        );
    }
}

/// Who writes identities, every managedFields entry.
fn writers(o: &mut String, d: &Diagnosis, p: &Paint) {
    let Some(w) = &d.writers else { return };
    let _ = writeln!(o, "\n{}", p.bold("WHO WRITES IDENTITIES"));
    let _ = writeln!(
        o,
        "  marked: {}   written after the mark: {}   window: {}",
        thousands(w.marked_identities),
        thousands(w.written_after_mark),
        human_duration(w.window_seconds)
    );
    let _ = writeln!(
        o,
        "  {:<32} {:<7} {:<16} {:>9} {:>9} {:>11} {:>9}",
        "MANAGER", "OP", "ROLE", "IDS", "LATELY", "AFTER MARK", "MARKS"
    );
    for a in &w.managers {
        let role = serde_json::to_value(a.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  {:<32} {:<7} {:<16} {:>9} {:>9} {:>11} {:>9}",
            a.manager,
            a.operation,
            role,
            thousands(a.identities),
            thousands(a.written_lately),
            thousands(a.written_after_mark),
            thousands(a.marks_held)
        );
    }
}

/// `--labels`: what the proposed filter would do.
fn labels_what_if(o: &mut String, d: &Diagnosis, p: &Paint) {
    let Some(w) = &d.labels_what_if else { return };
    let _ = writeln!(o, "\n{}", p.bold("PROPOSED LABELS FILTER"));
    let _ = writeln!(
        o,
        "  labels: {:?} (on {}'s defaults)\n  label sets: {} now, {} with it ({} identities)",
        w.filter,
        w.defaults_release,
        thousands(w.label_sets_now),
        thousands(w.label_sets_after),
        thousands(w.identities)
    );
    for k in &w.dropped_keys {
        let _ = writeln!(
            o,
            "  drops {:<40} {:>9} identities {:>9} values  alone: {} sets",
            k.key,
            thousands(k.identities),
            thousands(k.distinct_values),
            thousands(k.label_sets_without_it)
        );
    }
    let _ = writeln!(o, "  policies read: {}", thousands(w.policies_read));
    for a in &w.policies {
        let ns = a
            .namespace
            .as_deref()
            .map_or(String::new(), |n| format!("{n}/"));
        let _ = writeln!(
            o,
            "  breaks {:?} {ns}{}: {}",
            a.kind,
            a.name,
            a.keys.join(", ")
        );
    }
    if let Some(problem) = &w.policies_problem {
        let _ = writeln!(o, "  {problem}");
    }
}

/// The cilium-config values that matter to GC.
fn configuration(o: &mut String, d: &Diagnosis, p: &Paint) {
    let cfg = &d.configuration;
    let _ = writeln!(o, "\n{}", p.bold("CONFIGURATION"));
    if !cfg.found {
        let _ = writeln!(
            o,
            "  {}",
            p.dim("cilium-config not readable: Cilium defaults shown")
        );
    }
    for v in &cfg.values {
        let source = match v.source {
            cilium_gc_documents::report::ConfigSource::CiliumConfig => "",
            _ => " (default)",
        };
        let value = if v.value.is_empty() {
            "\"\""
        } else {
            v.value.as_str()
        };
        let _ = writeln!(o, "  {:<30} {value}{}", v.key, p.dim(source));
    }
    if let Some(s) = &cfg.suggested_labels {
        let _ = writeln!(o, "  suggested labels: {s:?}");
    }
    if let Some(h) = &d.gc_health {
        let verdict = h
            .operator_metrics
            .as_ref()
            .map(|m| phrases::pass_verdict(m.verdict))
            .unwrap_or("no operator pod found");
        let _ = writeln!(
            o,
            "  {:<30} {verdict} {}",
            "cilium-operator GC passes",
            p.dim(&format!(
                "(evidence: {})",
                phrases::pass_evidence(h.pass_evidence)
            ))
        );
    }
}

/// What could not be read.
fn warnings(o: &mut String, d: &Diagnosis, p: &Paint) {
    if !d.warnings.is_empty() {
        let _ = writeln!(o, "\n{}", p.bold("WARNINGS"));
        for w in &d.warnings {
            let _ = writeln!(o, "  {w}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cilium_gc_cluster::model::Identity;
    use cilium_gc_diagnose::{analyze, IdentityRecord, Input};
    use std::collections::BTreeMap;

    fn sample() -> Diagnosis {
        let ids = (0..15)
            .map(|k| IdentityRecord {
                identity: Identity {
                    name: (1000 + k).to_string(),
                    uid: "u".into(),
                    resource_version: "1".into(),
                    created_at: Some("2026-05-01T00:00:00Z".parse().unwrap()),
                    labels: BTreeMap::new(),
                    namespace: Some("jobs".into()),
                    mark: (k < 3).then(|| "2026-05-02T00:00:00Z".into()),
                    last_change: None,
                },
                security_labels: BTreeMap::from([("k8s:job-name".into(), format!("j{k}"))]),
            })
            .collect();
        let mut input = Input {
            identities: ids,
            refs: BTreeMap::from([(5000, 2)]),
            endpoints: 4,
            crds: cilium_gc_diagnose::Crds {
                identities: true,
                endpoints: true,
                slices: false,
                slices_v2: false,
            },
            config: Some(BTreeMap::from([(
                "identity-gc-interval".into(),
                "0".into(),
            )])),
            server: Some("https://k:6443".into()),
            ..Default::default()
        };
        input.warnings.push("a warning".into());
        input
            .malformed
            .push("ciliumidentity 77: no metadata.uid".into());
        analyze(&input, "2026-06-01T00:00:00Z".parse().unwrap())
    }

    #[test]
    fn findings_come_first_most_severe_first() {
        let t = text(&sample(), Style { color: false });
        let findings = t.find("FINDINGS").unwrap();
        let space = t.find("IDENTITY SPACE").unwrap();
        assert!(findings < space);
        let warning = t.find("WARNING  gc-disabled").expect(&t);
        let info = t.find("INFO").expect(&t);
        assert!(warning < info, "{t}");
        for s in [
            "stale candidates (GC may delete)         3",
            "total                                  ",
            "k8s:job-name",
            "high cardinality",
            "dangling references: 1 missing ids, 2 references (5000)",
            "suggested labels: \"k8s:!job-name\"",
            "identity-gc-interval           0",
            "identity-heartbeat-timeout     30m0s (default)",
            "-> set `labels:",
            "a warning",
        ] {
            assert!(t.contains(s), "missing {s:?} in\n{t}");
        }
        assert!(!t.contains('\u{1b}'));
    }

    #[test]
    fn the_pictures_sit_under_the_range_and_in_the_forecast() {
        let d = sample();
        let t = text(&d, Style { color: false });
        let bar = t.lines().position(|l| l.starts_with("  ▕")).expect(&t);
        let range = t.lines().position(|l| l.contains("local range")).expect(&t);
        assert_eq!(bar, range + 1, "{t}");
        let forecast = t.find("\nFORECAST\n").expect(&t);
        let created = t.find("  created/h  none in the last 48h").expect(&t);
        assert!(t.find("IDENTITY SPACE").unwrap() < forecast && forecast < created);
        assert!(created < t.find("AGE AND RATE").unwrap(), "{t}");
        for s in ["  pace       ", "  GC stops   ", "  GC works   "] {
            assert!(t.contains(s), "missing {s:?} in\n{t}");
        }
        // No forecast (a saved diagnosis from before it): no section.
        let old = Diagnosis {
            forecast: None,
            ..d
        };
        let t = text(&old, Style { color: false });
        assert!(t.contains("  ▕") && !t.contains("FORECAST"), "{t}");
    }

    #[test]
    fn colour_only_when_asked() {
        assert!(text(&sample(), Style { color: true }).contains('\u{1b}'));
    }
}
