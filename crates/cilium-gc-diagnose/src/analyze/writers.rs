//! Who writes the identities, from every `managedFields`
//! entry: when an audit log cannot be read or reconfigured, the field
//! managers are the only record of which program changed an identity.
//!
//! A write after the operator's mark is what turns its delete into a 409:
//! cilium-operator deletes with the resourceVersion it marked at as a
//! precondition, and any write since changes it. Cilium's own writers do
//! that as part of the protocol (an agent reusing an identity strips the
//! mark); anything else doing it is the cause the reporter looked for.

use std::collections::BTreeMap;
use std::time::Duration;

use cilium_gc_cluster::humanize::{human_duration, thousands};
use cilium_gc_cluster::policy;
use cilium_gc_documents::diagnosis::{FindingCode, Severity, WriterActivity, WriterRole, Writers};
use jiff::Timestamp;

use super::evidence::{Evidence, Findings};
use crate::input::Input;

/// What a field manager is, by its name: agents write as `cilium-agent`
/// (forks and test drivers as `*agent*`), the operator as
/// `cilium-operator-<provider>`, this plugin as its own field manager.
pub(super) fn role(manager: &str) -> WriterRole {
    if manager == cilium_gc_cluster::cluster::FIELD_MANAGER {
        WriterRole::ThisTool
    } else if manager.starts_with("cilium-operator") {
        WriterRole::CiliumOperator
    } else if crate::input::agent_like(manager) {
        WriterRole::CiliumAgent
    } else {
        WriterRole::Other
    }
}

/// Per manager and operation: identities written, lately (within
/// `window` before `now`), after a mark, and marks held. "After a mark" is
/// at or after the mark's second (managedFields times have no fraction) by
/// an entry that does not hold the mark, so the marker's own write is not
/// counted; the server's clock stamps the entry, the operator's the mark.
pub(super) fn writers(input: &Input, window: Duration, now: Timestamp) -> Writers {
    let since = now.as_second() - window.as_secs() as i64;
    let mut by: BTreeMap<(&str, &str), WriterActivity> = BTreeMap::new();
    let (mut marked, mut after_any) = (0, 0);
    for r in &input.identities {
        let Some(writes) = input.writes.get(&r.identity.name) else {
            continue;
        };
        let mark = r.identity.mark.as_deref().and_then(policy::parse_mark);
        marked += u64::from(mark.is_some());
        let mut after_here = false;
        for w in writes {
            let a = by
                .entry((&w.manager, &w.operation))
                .or_insert_with(|| WriterActivity {
                    manager: if w.manager.is_empty() {
                        "<none>".into()
                    } else {
                        w.manager.clone()
                    },
                    operation: w.operation.clone(),
                    role: role(&w.manager),
                    identities: 0,
                    written_lately: 0,
                    written_after_mark: 0,
                    marks_held: 0,
                    latest: None,
                });
            a.identities += 1;
            a.marks_held += u64::from(w.owns_mark && mark.is_some());
            let Some(t) = w.time else { continue };
            a.latest = a.latest.max(Some(t));
            a.written_lately += u64::from(t.as_second() >= since);
            let after = mark.is_some_and(|m| !w.owns_mark && t.as_second() >= m.as_second());
            a.written_after_mark += u64::from(after);
            after_here |= after;
        }
        after_any += u64::from(after_here);
    }
    let mut managers: Vec<WriterActivity> = by.into_values().collect();
    managers.sort_by(|a, b| {
        (
            b.written_after_mark,
            b.written_lately,
            b.identities,
            &a.manager,
        )
            .cmp(&(
                a.written_after_mark,
                a.written_lately,
                a.identities,
                &b.manager,
            ))
    });
    Writers {
        window_seconds: window.as_secs_f64(),
        marked_identities: marked,
        written_after_mark: after_any,
        managers,
    }
}

/// The role as a reader says it.
fn what(role: WriterRole) -> &'static str {
    match role {
        WriterRole::CiliumAgent => "a Cilium agent",
        WriterRole::CiliumOperator => "cilium-operator",
        WriterRole::ThisTool => "this plugin",
        WriterRole::Other => "not Cilium",
    }
}

/// One line per manager: who it is, what it wrote.
fn line(a: &WriterActivity, window: &str) -> String {
    format!(
        "{} ({}, {}): {} identities, {} written in the last {window}, {} after the mark, {} marks held",
        a.manager,
        a.operation,
        what(a.role),
        thousands(a.identities),
        thousands(a.written_lately),
        thousands(a.written_after_mark),
        thousands(a.marks_held)
    )
}

/// `conflict-writers`: a writer that is not Cilium wrote identities after
/// the mark (warning), or lately (info). Cilium's own writers are named in
/// the evidence as what they are, so the reader can tell the two apart.
pub(super) fn conflict_writers(c: &Evidence, out: &mut Findings) {
    let Some(w) = &c.d.writers else { return };
    let others: Vec<&WriterActivity> = w
        .managers
        .iter()
        .filter(|a| a.role == WriterRole::Other && (a.written_after_mark + a.written_lately) > 0)
        .collect();
    if others.is_empty() {
        return;
    }
    let after: u64 = others.iter().map(|a| a.written_after_mark).sum();
    let window = human_duration(w.window_seconds);
    let names = others
        .iter()
        .map(|a| {
            if after > 0 {
                format!("{} ({})", a.manager, thousands(a.written_after_mark))
            } else {
                format!("{} ({})", a.manager, thousands(a.written_lately))
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let (severity, message) = if after > 0 {
        (
            Severity::Warning,
            format!(
                "something other than Cilium writes marked identities after cilium-operator's mark: {names}. Each such write makes the operator's delete fail with 409 Conflict (1.15 abandons the pass; later versions skip the identity until the next pass)"
            ),
        )
    } else {
        (
            Severity::Info,
            format!("something other than Cilium wrote identities in the last {window}: {names}"),
        )
    };
    let evidence = w
        .managers
        .iter()
        .take(8)
        .map(|a| line(a, &window))
        .collect();
    out.add(
        severity,
        FindingCode::ConflictWriters,
        message,
        evidence,
        Some(format!(
            "find the program that writes as field manager {} (`kubectl get ciliumidentities --show-managed-fields -o yaml`) and stop it writing CiliumIdentities (a label or annotation sync should skip ciliumidentities.cilium.io); to see the user behind it, log writes to ciliumidentities in the audit policy (docs/diagnose.md, \"Who writes\")",
            others[0].manager
        )),
    );
}
