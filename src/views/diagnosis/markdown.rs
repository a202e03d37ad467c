//! `diagnose -o markdown`: the diagnosis, one section per part.

use std::fmt::Write as _;

use cilium_gc::{human_duration, thousands};
use cilium_gc_diagnose::Diagnosis;
use cilium_gc_documents::diagnosis::{AgeBucket, Level, Severity};

use super::charts;
use crate::views::markdown::*;
use crate::views::phrases;
use cilium_gc_documents::diagnosis::{CiliumWorkloads, GcHealth};
use cilium_gc_documents::forecast::{Forecast, PaceSource};

/// The diagnosis as Markdown.
pub fn diagnosis(d: &Diagnosis) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Cilium identity diagnosis\n");
    let _ = writeln!(o, "**Verdict: {}**\n", diagnosis_verdict(d));
    let c = &d.cluster;
    let mut about = vec![
        vec!["Cluster".into(), opt(c.server.as_deref())],
        vec!["Context".into(), opt(c.context.as_deref())],
        vec!["Kubernetes".into(), opt(c.kubernetes_version.as_deref())],
        vec!["Generated at".into(), d.generated_at.to_string()],
        vec!["Tool".into(), tool_line(&d.header.tool)],
        vec![
            "Endpoints".into(),
            format!(
                "{} CiliumEndpoints, {} CiliumEndpointSlices",
                thousands(c.endpoints),
                thousands(c.endpoint_slices)
            ),
        ],
    ];
    if d.redacted {
        about.push(vec![
            "Redacted".into(),
            format!("yes: {}", phrases::REDACTED),
        ]);
    }
    table(&mut o, &["About", "Value"], &about);

    let _ = writeln!(o, "## Findings\n");
    findings_table(&mut o, &d.findings);

    identity_space_section(&mut o, d);
    forecast_section(&mut o, d);
    gc_health_section(&mut o, d);
    age_section(&mut o, d);
    churn_section(&mut o, d);
    integrity_section(&mut o, d);
    writers_section(&mut o, d);
    labels_what_if_section(&mut o, d);
    config_section(&mut o, d);
    if !d.warnings.is_empty() {
        let rows: Vec<Vec<String>> = d.warnings.iter().map(|w| vec![cell(w)]).collect();
        let _ = writeln!(o, "## Warnings\n");
        long_table(&mut o, "warnings", &["Warning"], &rows);
    }
    let _ = writeln!(
        o,
        "<sub>Written by {} at {}; the same diagnosis as JSON: `kubectl cilium-gc diagnose -o json`.</sub>",
        tool_line(&d.header.tool),
        d.generated_at
    );
    o
}

/// One line: the worst finding, or that all is well.
fn diagnosis_verdict(d: &Diagnosis) -> String {
    let count = |s: Severity| d.findings.iter().filter(|f| f.severity == s).count() as u64;
    let (crit, warn, info) = (
        count(Severity::Critical),
        count(Severity::Warning),
        count(Severity::Info),
    );
    let tally = format!("{crit} critical, {warn} warning, {info} info");
    match d.findings.iter().min_by_key(|f| f.severity) {
        Some(f) if f.severity != Severity::Info => {
            format!("{} — {} ({tally})", severity(f.severity), cell(&f.message))
        }
        _ => format!("🟢 healthy — nothing needs attention ({tally})"),
    }
}

fn identity_space_section(o: &mut String, d: &Diagnosis) {
    let sp = &d.identity_space;
    let st = &sp.states;
    let level = match sp.level {
        Level::Ok => "ok",
        Level::Warning => "**warning** (80% or more)",
        Level::Critical => "**critical** (95% or more)",
    };
    let _ = writeln!(o, "## Identity space\n");
    let sentence = phrases::identity_space(sp, "–", |s| format!("**{s}**"));
    let _ = writeln!(o, "{} — {level}.\n", phrases::capitalised(&sentence));
    let mut rows: Vec<Vec<String>> = phrases::states(st)
        .iter()
        .map(|(k, v)| vec![phrases::capitalised(k), thousands(*v)])
        .collect();
    rows.push(vec!["**Total**".into(), thousands(sp.total)]);
    table(o, &["State", "Identities"], &rows);
    let _ = writeln!(o, "{}", charts::composition(sp));
}

/// Where the range is heading at the recent pace: the three answers, then
/// the creations of the last 48 hours as a chart (the findings
/// `gc-cannot-keep-up` and `exhaustion-soon` say what to do about it).
fn forecast_section(o: &mut String, d: &Diagnosis) {
    let Some(f) = &d.forecast else { return };
    let _ = writeln!(o, "## Forecast\n");
    table(o, &["Forecast", "Value"], &forecast_rows(f));
    o.push_str(&charts::creations(
        f,
        d.configuration.heartbeat_timeout_seconds,
    ));
}

/// `seconds` to the hour past two days, to the minute past an hour: a
/// forecast is no more precise (`31d16h`, not `31d15h30m44s`).
fn roughly(seconds: f64) -> f64 {
    let unit = if seconds >= 2.0 * 86_400.0 {
        3_600.0
    } else if seconds >= 3_600.0 {
        60.0
    } else {
        1.0
    };
    (seconds / unit).round() * unit
}

/// The pace and where it was read; the range if GC stops; what a working
/// GC holds at that pace against the range.
fn forecast_rows(f: &Forecast) -> Vec<Vec<String>> {
    let p = &f.pace;
    let read = match p.source {
        PaceSource::Sample => format!("watched live for {}", p.window),
        PaceSource::CreationTimes => format!("over the last {}", p.window),
    };
    let full = &f.full_if_gc_stops;
    let stops = match (full.seconds, full.at) {
        (None, _) => "never: nothing is being created".to_string(),
        (Some(s), Some(at)) if s > 0.0 => format!(
            "full in **{}**, at {at} ({} ids free)",
            human_duration(roughly(s)),
            thousands(full.headroom)
        ),
        (Some(_), _) => "**full now**".to_string(),
    };
    let works = match &f.steady_state {
        None => "GC is disabled (`identity-gc-interval` 0): it holds every identity".to_string(),
        Some(s) => format!(
            "holds {} stale (the pace × {}, the heartbeat timeout plus the GC interval; \
             up to {}) + {} in use = **{}% of the range**{}",
            thousands(s.stale_held),
            human_duration(s.held_seconds),
            thousands(s.stale_held_max),
            thousands(s.in_use),
            s.percent_of_range,
            if s.exceeds_range {
                ": more than the range, no GC keeps up"
            } else {
                ""
            }
        ),
    };
    vec![
        vec![
            "Pace".into(),
            format!(
                "{}/h {read} ({} created)",
                p.rate_per_hour,
                thousands(p.created)
            ),
        ],
        vec!["If GC stops".into(), stops],
        vec!["With GC working".into(), works],
    ]
}

fn gc_health_section(o: &mut String, d: &Diagnosis) {
    let Some(h) = &d.gc_health else {
        return;
    };
    let _ = writeln!(o, "## cilium-operator GC\n");
    table(o, &["GC evidence", "Value"], &gc_evidence_rows(h));
    let buckets: Vec<Vec<String>> = h
        .overdue_distribution
        .iter()
        .map(|b| vec![cell(&b.label), thousands(b.count)])
        .collect();
    table(o, &["Stale mark age (x expected)", "Identities"], &buckets);
    if let Some(c) = &h.cilium {
        operator_pods_table(o, c);
    }
}

/// The GC section's evidence: one row per thing the verdict rests on.
fn gc_evidence_rows(h: &GcHealth) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "Expected collection time (heartbeat timeout + GC interval)".into(),
        human_duration(h.expected_collection_seconds),
    ]];
    if let (Some(m), Some(id)) = (h.oldest_mark, &h.oldest_mark_identity) {
        rows.push(vec![
            "Oldest stale mark".into(),
            format!("{m} (identity {})", cell(id)),
        ]);
    }
    if let Some(t) = h.not_completed_since {
        rows.push(vec!["No GC pass completed since".into(), t.to_string()]);
    }
    rows.push(vec!["Overdue marks".into(), thousands(h.overdue_marks)]);
    rows.push(vec![
        format!(
            "GC passes (evidence: {})",
            phrases::pass_evidence(h.pass_evidence)
        ),
        h.operator_metrics
            .as_ref()
            .map(|m| phrases::pass_verdict(m.verdict))
            .unwrap_or("no operator pod found")
            .into(),
    ]);
    for p in h.operator_metrics.iter().flat_map(|m| &m.pods) {
        let what = match &p.problem {
            Some(problem) => problem.clone(),
            None => p.evidence.join("; "),
        };
        rows.push(vec![
            format!("Operator pod {} metrics", cell(&p.pod)),
            cell(&what),
        ]);
    }
    rows.push(vec![
        "Unused identities held by an agent".into(),
        thousands(h.agent_held_unused),
    ]);
    match (&h.cilium, &h.workloads_problem) {
        (Some(c), _) => {
            rows.push(vec![
                "cilium-operator".into(),
                cell(&c.operator_images.join(", ")),
            ]);
            rows.push(vec![
                "cilium-agent".into(),
                cell(&c.agent_images.join(", ")),
            ]);
        }
        (None, Some(p)) => rows.push(vec!["Cilium workloads".into(), cell(p)]),
        (None, None) => {}
    }
    rows
}

/// The operator's pods: restarts and since when they run.
fn operator_pods_table(o: &mut String, c: &CiliumWorkloads) {
    if !c.operator_pods.is_empty() {
        let rows: Vec<Vec<String>> = c
            .operator_pods
            .iter()
            .map(|p| {
                vec![
                    cell(&p.name),
                    p.restarts.to_string(),
                    p.running_since.map(|t| t.to_string()).unwrap_or_default(),
                    p.started_at.map(|t| t.to_string()).unwrap_or_default(),
                ]
            })
            .collect();
        table(
            o,
            &["Operator pod", "Restarts", "Running since", "Started"],
            &rows,
        );
    }
}

fn age_section(o: &mut String, d: &Diagnosis) {
    let a = &d.age;
    let bucket_rows = |b: &[AgeBucket]| -> Vec<Vec<String>> {
        b.iter()
            .map(|b| vec![cell(&b.label), thousands(b.count)])
            .collect()
    };
    let _ = writeln!(o, "## Age and rate\n");
    table(o, &["Created", "Identities"], &bucket_rows(&a.created));
    table(
        o,
        &["Heartbeat mark age", "Identities"],
        &bucket_rows(&a.marks),
    );
    let _ = write!(
        o,
        "Marks past the {} heartbeat timeout: **{}**. Created in the last 24h: **{}** ({}/h)",
        human_duration(d.configuration.heartbeat_timeout_seconds),
        thousands(a.marks_past_timeout),
        thousands(a.created_last24h),
        a.creation_rate_per_hour
    );
    match (a.exhaustion_in_seconds, a.exhausted_at) {
        (Some(s), Some(at)) if s > 0.0 => {
            let full_in = format!("**{}**", human_duration(s));
            let _ = writeln!(o, "{}.\n", phrases::exhaustion(&full_in, at));
        }
        (Some(_), _) => {
            let _ = writeln!(o, "; the range is full.\n");
        }
        _ => {
            let _ = writeln!(o, ".\n");
        }
    }
}

fn churn_section(o: &mut String, d: &Diagnosis) {
    let c = &d.churn;
    let _ = writeln!(o, "## Churn\n");
    if !c.label_keys.is_empty() {
        let rows: Vec<Vec<String>> = c
            .label_keys
            .iter()
            .map(|k| {
                vec![
                    format!("`{}`", k.key.replace('`', "'")),
                    thousands(k.distinct_values),
                    thousands(k.identities),
                    format!("{}%", k.share_percent),
                    if k.high_cardinality { "**yes**" } else { "no" }.into(),
                ]
            })
            .collect();
        long_table(
            o,
            "label keys",
            &[
                "Label key",
                "Values",
                "Identities",
                "Share",
                "High cardinality",
            ],
            &rows,
        );
    }
    let ns_rows = |v: &[cilium_gc_documents::diagnosis::NamespaceStat]| -> Vec<Vec<String>> {
        v.iter()
            .map(|s| {
                vec![
                    cell(&s.namespace),
                    thousands(s.identities),
                    thousands(s.stale),
                    thousands(s.unused),
                ]
            })
            .collect()
    };
    let header = ["Namespace", "Identities", "Stale", "Unused"];
    if !c.namespaces_by_identities.is_empty() {
        let _ = writeln!(o, "**Namespaces by identities**\n");
        long_table(
            o,
            "namespaces",
            &header,
            &ns_rows(&c.namespaces_by_identities),
        );
    }
    if !c.namespaces_by_stale.is_empty() {
        let _ = writeln!(o, "**Namespaces by stale identities**\n");
        long_table(o, "namespaces", &header, &ns_rows(&c.namespaces_by_stale));
    }
    duplicates_part(o, &c.duplicates);
}

/// The duplicate label sets: how many, and the largest groups.
fn duplicates_part(o: &mut String, dups: &cilium_gc_documents::diagnosis::Duplicates) {
    let groups = format!("**{}**", thousands(dups.groups));
    let surplus = thousands(dups.surplus);
    let _ = writeln!(
        o,
        "Duplicate label sets: {}.\n",
        phrases::duplicates(&groups, &surplus)
    );
    if !dups.examples.is_empty() {
        let rows: Vec<Vec<String>> = dups
            .examples
            .iter()
            .map(|g| {
                let labels = g
                    .labels
                    .iter()
                    .map(|(k, v)| cell(&format!("{k}={v}")))
                    .collect::<Vec<_>>()
                    .join("<br>");
                vec![cell(&g.identities.join(", ")), labels]
            })
            .collect();
        details(
            o,
            &format!("{} largest duplicate groups", rows.len()),
            &["Identities", "Security labels"],
            &rows,
        );
    }
}

fn integrity_section(o: &mut String, d: &Diagnosis) {
    let i = &d.integrity;
    let m = &d.modifiers;
    let _ = writeln!(o, "## Integrity and modifiers\n");
    table(
        o,
        &["Check", "Count"],
        &[
            vec![
                "Ids referenced by endpoints but missing".into(),
                thousands(i.dangling_ids),
            ],
            vec![
                "Endpoint references to missing ids".into(),
                thousands(i.dangling_references),
            ],
            vec![
                "Unused identities whose mark an agent stripped".into(),
                thousands(i.strip_loop),
            ],
            vec![
                "Identities changed after creation".into(),
                thousands(m.changed_identities),
            ],
        ],
    );
    if !i.dangling_examples.is_empty() {
        let rows: Vec<Vec<String>> = i
            .dangling_examples
            .iter()
            .map(|id| vec![id.to_string()])
            .collect();
        details(o, "Missing ids", &["Identity id"], &rows);
    }
    if !i.strip_loop_examples.is_empty() {
        let rows: Vec<Vec<String>> = i
            .strip_loop_examples
            .iter()
            .map(|e| {
                vec![
                    cell(&e.name),
                    opt(e.namespace.as_deref()),
                    cell(&e.manager),
                    e.time.to_string(),
                ]
            })
            .collect();
        details(
            o,
            "Identities whose mark was stripped while unused",
            &["Identity", "Namespace", "Manager", "Changed at"],
            &rows,
        );
    }
    if !m.managers.is_empty() {
        let rows: Vec<Vec<String>> = m
            .managers
            .iter()
            .map(|a| {
                vec![
                    cell(&a.manager),
                    thousands(a.identities),
                    a.latest.to_string(),
                ]
            })
            .collect();
        long_table(
            o,
            "field managers",
            &["Last changed by", "Identities", "Latest change"],
            &rows,
        );
    }
}

/// Who writes identities, from every managedFields entry.
fn writers_section(o: &mut String, d: &Diagnosis) {
    let Some(w) = &d.writers else { return };
    let _ = writeln!(o, "## Who writes identities\n");
    let _ = writeln!(
        o,
        "{} marked identities, {} written after their mark; \"lately\" is the last {}.\n",
        thousands(w.marked_identities),
        thousands(w.written_after_mark),
        human_duration(w.window_seconds)
    );
    let rows: Vec<Vec<String>> = w
        .managers
        .iter()
        .map(|a| {
            vec![
                cell(&a.manager),
                cell(&a.operation),
                cell(
                    serde_json::to_value(a.role)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .as_deref()
                        .unwrap_or_default(),
                ),
                thousands(a.identities),
                thousands(a.written_lately),
                thousands(a.written_after_mark),
                thousands(a.marks_held),
            ]
        })
        .collect();
    long_table(
        o,
        "field managers",
        &[
            "Manager",
            "Operation",
            "Role",
            "Identities",
            "Lately",
            "After the mark",
            "Marks held",
        ],
        &rows,
    );
}

/// `--labels`: what the proposed filter would do.
fn labels_what_if_section(o: &mut String, d: &Diagnosis) {
    let Some(w) = &d.labels_what_if else { return };
    let _ = writeln!(o, "## Proposed labels filter\n");
    let _ = writeln!(
        o,
        "labels `{}` on {}'s defaults: {} label sets now, {} with it ({} identities); {} policies read.\n",
        cell(&w.filter).replace('`', "'"),
        w.defaults_release,
        thousands(w.label_sets_now),
        thousands(w.label_sets_after),
        thousands(w.identities),
        thousands(w.policies_read)
    );
    let rows: Vec<Vec<String>> = w
        .dropped_keys
        .iter()
        .map(|k| {
            vec![
                cell(&k.key),
                thousands(k.identities),
                thousands(k.distinct_values),
                thousands(k.label_sets_without_it),
            ]
        })
        .collect();
    if !rows.is_empty() {
        long_table(
            o,
            "dropped keys",
            &[
                "Dropped key",
                "Identities",
                "Values",
                "Label sets without it",
            ],
            &rows,
        );
    }
    let rows: Vec<Vec<String>> = w
        .policies
        .iter()
        .map(|a| {
            vec![
                cell(&format!("{:?}", a.kind)),
                cell(a.namespace.as_deref().unwrap_or("")),
                cell(&a.name),
                cell(&a.keys.join(", ")),
            ]
        })
        .collect();
    if !rows.is_empty() {
        long_table(
            o,
            "policies it breaks",
            &["Kind", "Namespace", "Name", "Keys it drops"],
            &rows,
        );
    }
    if let Some(problem) = &w.policies_problem {
        let _ = writeln!(o, "{}\n", cell(problem));
    }
}

fn config_section(o: &mut String, d: &Diagnosis) {
    let cfg = &d.configuration;
    let _ = writeln!(o, "## Configuration\n");
    if !cfg.found {
        let _ = writeln!(
            o,
            "_cilium-config could not be read: Cilium defaults shown._\n"
        );
    }
    let rows: Vec<Vec<String>> = cfg
        .values
        .iter()
        .map(|v| {
            let source = match v.source {
                cilium_gc_documents::report::ConfigSource::CiliumConfig => "cilium-config",
                cilium_gc_documents::report::ConfigSource::Flag => "flag",
                cilium_gc_documents::report::ConfigSource::Default => "default",
                cilium_gc_documents::report::ConfigSource::Discovered => "discovered",
            };
            let value = if v.value.is_empty() {
                "\"\"".to_string()
            } else {
                cell(&v.value)
            };
            vec![format!("`{}`", v.key), value, source.into()]
        })
        .collect();
    table(o, &["Key", "Value", "Source"], &rows);
    if let Some(s) = &cfg.suggested_labels {
        let _ = writeln!(o, "Suggested `labels`: `{}`\n", s.replace('`', "'"));
    }
}

/// The findings as a table (severity, code, finding, evidence, next step),
/// or that there are none. Shared with the fleet view's per-cluster details.
pub(crate) fn findings_table(o: &mut String, findings: &[cilium_gc_documents::diagnosis::Finding]) {
    if findings.is_empty() {
        let _ = writeln!(o, "None: {}.\n", phrases::HEALTHY);
        return;
    }
    let rows: Vec<Vec<String>> = findings
        .iter()
        .map(|f| {
            vec![
                severity(f.severity).into(),
                format!("`{}`", f.code.as_str()),
                cell(&f.message),
                f.evidence
                    .iter()
                    .map(|e| cell(e))
                    .collect::<Vec<_>>()
                    .join("<br>"),
                f.suggestion.as_deref().map(cell).unwrap_or_default(),
            ]
        })
        .collect();
    table(
        o,
        &["Severity", "Code", "Finding", "Evidence", "Next step"],
        &rows,
    );
}
