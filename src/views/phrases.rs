//! The sentences both views of a diagnosis print, the text view
//! (`diagnose::text`) and the Markdown one (`markdown::diagnosis`): written
//! once here, so the two cannot drift. Each view adds only its own markup
//! (capitals, bold, a full stop).

/// What `--redact` replaced.
pub const REDACTED: &str = "namespaces, label values, server and context are hashes";

/// No finding at all.
pub const HEALTHY: &str = "the identity space looks healthy";

/// When the range fills at the current creation rate; `full_in` is the
/// duration as the view shows it (plain, or bold).
pub fn exhaustion(full_in: &str, at: impl std::fmt::Display) -> String {
    format!("; at that rate the range is full in {full_in} ({at}) if GC stalls")
}

/// How many label sets several identities share, and the identities
/// beyond the first of each; `groups` as the view shows it.
pub fn duplicates(groups: &str, surplus: &str) -> String {
    format!("{groups} ({surplus} surplus identities)")
}

/// How full the local range is: "local range 256-65535: 1,200 of 65,280
/// allocated (1.8%), 64,080 free". `dash` joins the range's ends (the
/// Markdown view typesets an en dash), `emph` marks the allocation (bold
/// in Markdown).
pub fn identity_space(
    sp: &cilium_gc_documents::diagnosis::IdentitySpace,
    dash: &str,
    emph: impl Fn(String) -> String,
) -> String {
    use cilium_gc::thousands;
    format!(
        "local range {}{dash}{}: {}, {} free",
        sp.local_range.min,
        sp.local_range.max,
        emph(format!(
            "{} of {} allocated ({}%)",
            thousands(sp.allocated),
            thousands(sp.capacity),
            sp.utilisation_percent
        )),
        thousands(sp.headroom),
    )
}

/// The identity states, in the order both views list them, with their
/// counts (lower case: the Markdown view capitalises).
pub fn states(st: &cilium_gc_documents::diagnosis::StateCounts) -> [(&'static str, u64); 7] {
    [
        ("in use", st.in_use),
        ("stale candidates (GC may delete)", st.stale_candidates),
        ("unused, marked (too recent)", st.unused_marked),
        ("unused, unmarked", st.unused_unmarked),
        ("too young to judge", st.too_young),
        ("not local", st.not_local),
        ("malformed mark", st.malformed_mark),
    ]
}

/// `s` with its first letter capitalised (the Markdown view's labels).
pub fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// What the verdict on cilium-operator's GC passes rests on.
pub fn pass_evidence(e: cilium_gc_documents::diagnosis::PassEvidence) -> &'static str {
    use cilium_gc_documents::diagnosis::PassEvidence;
    match e {
        PassEvidence::OperatorMetrics => "operator metrics",
        PassEvidence::HeartbeatMarks => "heartbeat marks' ages",
        PassEvidence::Version => "operator version only",
        PassEvidence::None => "none",
    }
}

/// Whether cilium-operator's GC passes complete.
pub fn pass_verdict(v: cilium_gc_documents::diagnosis::PassVerdict) -> &'static str {
    use cilium_gc_documents::diagnosis::PassVerdict;
    match v {
        PassVerdict::Completing => "completing",
        PassVerdict::NotCompleting => "not completing",
        PassVerdict::NoPasses => "no pass counted",
        PassVerdict::Unknown => "unknown",
    }
}
