//! Why cilium-operator's GC is not keeping up (issue 15). (Moved from
//! `tests/it/diagnose/gc_health.rs`.)

use super::*;

// ---- Why cilium-operator's GC is not keeping up (issue 15) ----

/// Unused local identities on the server with their objects.
fn unused_identities(w: &World) -> Vec<(String, Value)> {
    let used = w.sim.referenced_ids();
    w.sim
        .identity_names()
        .into_iter()
        .filter(|n| {
            n.parse::<u64>()
                .is_ok_and(|id| (256..65_536).contains(&id) && !used.contains(&id))
        })
        .filter_map(|n| w.sim.identity(&n).map(|o| (n, o)))
        .collect()
}

/// The seed's stale marks are days old with a 30m timeout and a 15m
/// interval: GC is not completing passes. The finding names the oldest mark
/// and its identity (read back from the server), says since when, and
/// counts the overdue marks; with every mark fresh it is silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_not_completing_names_the_oldest_mark_and_since_when() {
    let w = World::start(small()).await;
    let now = w.sim.now();
    let expected = Duration::from_secs(45 * 60);
    let marks: Vec<(String, jiff::Timestamp)> = unused_identities(&w)
        .into_iter()
        .filter_map(|(n, o)| mark_of(&o).map(|m| (n, m)))
        .filter(|(_, m)| now.duration_since(*m).as_secs_f64() > 1800.0)
        .collect();
    let (oldest_name, oldest) = marks.iter().min_by_key(|(_, m)| *m).cloned().unwrap();
    let overdue = marks
        .iter()
        .filter(|(_, m)| now.duration_since(*m).as_secs_f64() > 3.0 * expected.as_secs_f64())
        .count() as u64;
    assert!(overdue > 0, "the seed has old marks");

    let d = diagnose_world(&w).await;
    let h = d.gc_health.as_ref().expect("gc health");
    assert_eq!(h.expected_collection_seconds, expected.as_secs_f64());
    assert_eq!(h.oldest_mark, Some(oldest));
    assert_eq!(
        h.oldest_mark_identity.as_deref(),
        Some(oldest_name.as_str())
    );
    assert_eq!(h.overdue_marks, overdue);
    let total: u64 = h.overdue_distribution.iter().map(|b| b.count).sum();
    assert_eq!(total as usize, marks.len());
    let since = oldest + jiff::SignedDuration::from_mins(30);
    assert_eq!(h.not_completed_since, Some(since));
    let f = finding(&d, FindingCode::GcNotCompleting);
    assert!(f.message.contains(&since.to_string()), "{}", f.message);
    assert!(f.evidence[0].contains(&oldest_name), "{:?}", f.evidence);
    assert!(f.suggestion.is_some());
    assert_sorted(&d);

    // Every stale mark made 40 minutes old: a working operator's view.
    let fresh = (now - jiff::SignedDuration::from_mins(40)).to_string();
    for (name, _) in &marks {
        w.sim.set_heartbeat(name, Some(&fresh)).unwrap();
    }
    let d = diagnose_world(&w).await;
    assert!(
        !codes(&d).contains(&FindingCode::GcNotCompleting),
        "{:#?}",
        d.findings
    );
    assert_eq!(d.gc_health.unwrap().overdue_marks, 0);
}

/// The operator and agent images map to known defects with their upstream
/// issue: 1.15 to #33142 (fix #33143, backport unconfirmed) and #47571, a
/// 1.16 agent to #35946. Without permission to read the workloads the
/// diagnosis says so and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_defects_follow_the_images_and_a_missing_permission_is_said() {
    use cilium_gc_sim::{CiliumInstall, Denial};
    let w = World::start(small()).await;
    let d = diagnose_world(&w).await;
    let c = d
        .gc_health
        .as_ref()
        .unwrap()
        .cilium
        .as_ref()
        .expect("workloads read");
    assert_eq!(c.operator_version.as_deref(), Some("1.15.6"));
    assert_eq!(
        c.operator_images,
        ["quay.io/cilium/operator-generic:v1.15.6"]
    );
    assert_eq!(c.operator_pods.len(), 2);
    let f = finding(&d, FindingCode::KnownGcDefect);
    assert_eq!(f.severity, Severity::Warning);
    let evidence = f.evidence.join("\n");
    assert!(
        evidence.contains("https://github.com/cilium/cilium/issues/33142"),
        "{evidence}"
    );
    assert!(evidence.contains("#33143"), "{evidence}");
    assert!(
        evidence.contains("https://github.com/cilium/cilium/pull/47571"),
        "{evidence}"
    );
    assert!(!evidence.contains("35946"), "{evidence}");

    let mut s = small();
    s.cilium_install = Some(CiliumInstall::version("v1.16.3"));
    let w = World::start(s).await;
    let d = diagnose_world(&w).await;
    let evidence = finding(&d, FindingCode::KnownGcDefect).evidence.join("\n");
    assert!(
        evidence.contains("issues/35946") && !evidence.contains("33142"),
        "{evidence}"
    );

    let mut s = small();
    s.rbac_denials = vec![
        Denial::new("get", "deployments"),
        Denial::new("get", "daemonsets"),
        Denial::new("list", "pods"),
    ];
    let w = World::start(s).await;
    let d = diagnose_world(&w).await;
    let h = d.gc_health.as_ref().unwrap();
    assert!(h.cilium.is_none());
    let problem = h.workloads_problem.as_deref().expect("the problem is said");
    assert!(
        problem.contains("no permission to read deployment kube-system/cilium-operator (optional)"),
        "{problem}"
    );
    assert!(d.warnings.iter().any(|w| w == problem));
    assert!(!codes(&d).contains(&FindingCode::KnownGcDefect));
    assert!(
        codes(&d).contains(&FindingCode::GcNotCompleting),
        "the rest goes on"
    );
}

/// An operator pod that restarted 4 times, last 5 minutes ago: the finding
/// gives the pod, its restarts and times, and cites #28339.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_restarts_are_reported_with_counts_and_times() {
    use cilium_gc_sim::CiliumInstall;
    let mut s = small();
    let mut install = CiliumInstall::default();
    install.operator_pods[0].restarts = 4;
    install.operator_pods[0].running_for = Duration::from_secs(300);
    let pod = install.operator_pods[0].name.clone();
    s.cilium_install = Some(install);
    let w = World::start(s).await;
    let d = diagnose_world(&w).await;
    let f = finding(&d, FindingCode::OperatorRestarts);
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.message.contains("restarted 4 times") && f.message.contains("28339"),
        "{}",
        f.message
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.starts_with(&format!("pod {pod}: 4 restarts"))),
        "{:?}",
        f.evidence
    );
    let p = &d
        .gc_health
        .as_ref()
        .unwrap()
        .cilium
        .as_ref()
        .unwrap()
        .operator_pods;
    let restarted = p.iter().find(|p| p.name == pod).unwrap();
    assert_eq!(restarted.restarts, 4);
    let since = restarted.running_since.unwrap();
    let now = w.sim.now();
    assert!(
        now.duration_since(since).as_secs() >= 300 && now.duration_since(since).as_secs() < 3600
    );

    // The default install never restarted: no finding.
    let d = diagnose_world(&World::start(small()).await).await;
    assert!(!codes(&d).contains(&FindingCode::OperatorRestarts));
}

/// The #35946 pattern: unused identities whose mark an agent just removed,
/// created long before: counted with their namespaces, and the finding
/// states the uncertainty of one snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_held_by_an_agent_but_unused_are_counted_by_namespace() {
    let w = World::start(small()).await;
    let before = diagnose_world(&w).await;
    assert_eq!(before.gc_health.as_ref().unwrap().agent_held_unused, 0);
    assert!(!codes(&before).contains(&FindingCode::AgentHeldUnused));
    let now = w.sim.now();
    let mut namespaces: BTreeMap<String, u64> = BTreeMap::new();
    let held: Vec<String> = unused_identities(&w)
        .into_iter()
        .filter(|(_, o)| mark_of(o).is_some())
        .filter(|(_, o)| {
            o["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .is_some_and(|c| now.duration_since(c).as_secs() > 3600)
        })
        .take(6)
        .map(|(n, o)| {
            let ns = o["metadata"]["labels"]["io.kubernetes.pod.namespace"]
                .as_str()
                .unwrap()
                .to_string();
            *namespaces.entry(ns).or_default() += 1;
            n
        })
        .collect();
    assert_eq!(held.len(), 6);
    for name in &held {
        w.sim.set_heartbeat(name, None).unwrap(); // written by cilium-agent, now
    }
    let d = diagnose_world(&w).await;
    let h = d.gc_health.as_ref().unwrap();
    assert_eq!(h.agent_held_unused, 6);
    let got: BTreeMap<String, u64> = h
        .agent_held_namespaces
        .iter()
        .map(|n| (n.namespace.clone(), n.identities))
        .collect();
    assert_eq!(got, namespaces);
    let f = finding(&d, FindingCode::AgentHeldUnused);
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("35946"), "{}", f.message);
    assert!(
        f.evidence.iter().any(|e| e.contains("one snapshot")),
        "{:?}",
        f.evidence
    );
}
