//! Against the simulator: one scenario per finding. (Moved from
//! `tests/it/diagnose/findings.rs`; `--redact` through the binary stays
//! there, in `views.rs`.)

use super::*;

/// 31,000 identities in a range of 32,512 (cluster-id 0 with 511 clusters:
/// 256-32767): 95.3% full, all created in the last hour, so at that rate the
/// remaining 1,512 ids last about an hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_exhaustion_is_critical_with_the_numbers() {
    let s = Scenario {
        identities: 31_000,
        endpoints: 200,
        job_ratio: 0.0,
        age_spread: Duration::from_secs(3600),
        cilium_config: config(&[("max-connected-clusters", "511")]),
        ..small()
    };
    let w = World::start(s).await;
    let d = diagnose_world_with(&w, pages_of(5000)).await;
    let sp = &d.identity_space;
    assert_eq!(
        sp.local_range,
        IdRange {
            min: 256,
            max: 32_767
        }
    );
    assert_eq!(sp.total, 31_001, "31,000 local and one cluster-mesh id");
    assert_eq!(sp.capacity, 32_512);
    assert_eq!(sp.allocated, 31_000);
    assert_eq!(sp.headroom, 1_512);
    assert_eq!(sp.utilisation_percent, 95.3);
    assert_eq!(sp.level, Level::Critical);
    assert_eq!(sp.states.not_local, 1);
    assert_eq!(sp.states.in_use as usize, w.sim.referenced_ids().len());
    assert_eq!(sp.states.in_use, 200);
    let st = &sp.states;
    assert_eq!(
        st.in_use
            + st.stale_candidates
            + st.unused_marked
            + st.unused_unmarked
            + st.too_young
            + st.not_local
            + st.malformed_mark,
        sp.total,
        "every identity counted once"
    );

    let full = finding(&d, FindingCode::IdentitySpaceNearlyFull);
    assert_eq!(full.severity, Severity::Critical);
    assert_eq!(
        full.evidence[0],
        "31,000 of 32,512 local ids allocated (95.3%), 1,512 free (range 256-32767)"
    );
    assert!(full.message.contains("95.3% full"), "{}", full.message);

    // Everything was created within the last 61 minutes; the cluster-mesh
    // id does not use up the local range, so only the 31,000 count for the
    // rate.
    assert_eq!(d.age.created[0].count + d.age.created[1].count, 31_001);
    assert_eq!(d.age.created_last24h, 31_000);
    let rate = 31_000.0 / 24.0;
    assert_eq!(
        d.age.creation_rate_per_hour,
        (rate * 100.0_f64).round() / 100.0
    );
    let secs = (1_512.0 / rate * 3600.0_f64).round();
    assert_eq!(d.age.exhaustion_in_seconds, Some(secs));
    let soon = finding(&d, FindingCode::ExhaustionSoon);
    assert_eq!(soon.severity, Severity::Critical, "under a day");
    // The finding reads the recent pace first (the last 5 minutes hold
    // enough creations), the day's rate after it.
    assert!(
        soon.evidence[0].starts_with("pace: ") && soon.evidence[0].contains("over the last 5m"),
        "{:?}",
        soon.evidence
    );
    assert!(
        soon.evidence[2].starts_with("31,000 identities created in the last 24h"),
        "{:?}",
        soon.evidence
    );
    assert_eq!(d.findings[0].severity, Severity::Critical);
    assert_sorted(&d);
    assert!(!codes(&d).contains(&FindingCode::GcDisabled));
}

/// Jobs with no `labels` filter: the four job keys split the space and the
/// suggested filter excludes exactly them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_churn_names_the_keys_and_the_filter_to_set() {
    let w = World::start(batch_cluster(None)).await;
    let objs = w.identity_objects();
    let counts = label_key_counts(&objs);
    let d = diagnose_world(&w).await;
    let total = objs.len() as u64;
    assert_eq!(d.identity_space.total, total);

    let jobs = counts["k8s:job-name"].1;
    assert!(jobs > 800, "90% of 1,000 are Jobs ({jobs})");
    for key in JOB_KEYS {
        let stat = d
            .churn
            .label_keys
            .iter()
            .find(|k| k.key == key)
            .unwrap_or_else(|| panic!("{key} not ranked"));
        let (distinct, carried) = counts[key];
        assert_eq!(
            (stat.distinct_values, stat.identities),
            (distinct, carried),
            "{key}"
        );
        assert_eq!(distinct, jobs, "{key}: one value per Job");
        assert_eq!(stat.share_percent, percent(carried, total));
        assert!(stat.high_cardinality, "{key}");
    }
    let high: Vec<&str> = d
        .churn
        .label_keys
        .iter()
        .filter(|k| k.high_cardinality)
        .map(|k| k.key.as_str())
        .collect();
    assert_eq!(high, JOB_KEYS, "only the job keys drive churn");
    let app = d
        .churn
        .label_keys
        .iter()
        .find(|k| k.key == "k8s:app")
        .unwrap();
    assert_eq!(app.distinct_values, counts["k8s:app"].0);

    let hc = finding(&d, FindingCode::HighCardinalityLabels);
    assert_eq!(hc.severity, Severity::Warning);
    assert!(
        hc.message.starts_with("4 security-label keys"),
        "{}",
        hc.message
    );
    assert_eq!(hc.evidence.len(), 4);
    let missing = finding(&d, FindingCode::LabelsFilterMissing);
    assert_eq!(missing.severity, Severity::Warning);
    // Cilium's defaults already drop both controller-uid keys (cilium#31964):
    // only the job names leak.
    assert_eq!(
        d.configuration.leaky_keys,
        ["k8s:batch.kubernetes.io/job-name", "k8s:job-name"]
    );
    assert_eq!(
        d.configuration.suggested_labels.as_deref(),
        Some(r"k8s:!batch\.kubernetes\.io/job-name k8s:!job-name")
    );
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterLeaky));

    // Created over the last 12 hours: every local identity is the day's
    // churn (the cluster-mesh one does not count), but 64k free ids at
    // 41.7/h last longer than a week.
    let local = total - 1;
    assert_eq!(d.age.created_last24h, local);
    assert_eq!(
        d.age.creation_rate_per_hour,
        (local as f64 / 24.0 * 100.0).round() / 100.0
    );
    assert!(!codes(&d).contains(&FindingCode::ExhaustionSoon));
    assert_sorted(&d);
}

/// A filter that excludes the `batch.kubernetes.io/` keys but not their
/// short twin `job-name` is leaky (`controller-uid` is in Cilium's own
/// defaults); the suggestion keeps the current patterns, adds the missing
/// one, and a cluster configured with it has no leak left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_labels_filter_is_extended_and_the_extension_closes_it() {
    let current = r"k8s:!batch\.kubernetes\.io/controller-uid k8s:!batch\.kubernetes\.io/job-name";
    let w = World::start(batch_cluster(Some(current))).await;
    let d = diagnose_world(&w).await;
    assert_eq!(d.configuration.leaky_keys, ["k8s:job-name"]);
    let suggested = format!("{current} k8s:!job-name");
    assert_eq!(
        d.configuration.suggested_labels.as_deref(),
        Some(suggested.as_str())
    );
    let leaky = finding(&d, FindingCode::LabelsFilterLeaky);
    assert_eq!(leaky.severity, Severity::Warning);
    assert!(leaky.message.contains("lets 1 high-cardinality key "));
    assert_eq!(
        leaky.evidence,
        vec![
            format!("current labels: {current:?}"),
            "passes: k8s:job-name".to_string(),
        ]
    );
    assert!(leaky
        .suggestion
        .as_ref()
        .unwrap()
        .contains(&suggested.replace('\\', r"\\")));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterMissing));
    let labels = d
        .configuration
        .values
        .iter()
        .find(|v| v.key == "labels")
        .unwrap();
    assert_eq!(
        (labels.value.as_str(), labels.source),
        (current, ConfigSource::CiliumConfig)
    );
    w.sim.shutdown().await;

    // Same cluster with the suggestion applied: the keys are still
    // high-cardinality in the existing objects, but none passes the filter.
    let w = World::start(batch_cluster(Some(&suggested))).await;
    let d = diagnose_world(&w).await;
    assert!(d.configuration.leaky_keys.is_empty());
    assert!(d.configuration.suggested_labels.is_none());
    assert!(codes(&d).contains(&FindingCode::HighCardinalityLabels));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterLeaky));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterMissing));
}

/// Identities that CiliumEndpoints still reference are deleted behind their
/// backs: the diagnosis names the ids and counts the references.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_references_are_counted_per_endpoint() {
    let w = World::start(small()).await;
    let refs = endpoint_refs(&w);
    // Two ids several endpoints share, three with one endpoint each.
    let mut shared: Vec<u64> = refs
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| *id)
        .collect();
    let mut single: Vec<u64> = refs
        .iter()
        .filter(|(_, n)| **n == 1)
        .map(|(id, _)| *id)
        .collect();
    shared.sort_unstable();
    single.sort_unstable();
    assert!(
        shared.len() >= 2 && single.len() >= 3,
        "seed shares some ids"
    );
    let mut gone: Vec<u64> = shared[..2].iter().chain(&single[..3]).copied().collect();
    gone.sort_unstable();
    let in_use_before = w.sim.referenced_ids().len() as u64;
    for id in &gone {
        w.sim
            .delete_object(Kind::Identity, &id.to_string(), "someone", false)
            .unwrap();
    }
    let d = diagnose_world(&w).await;
    let want_refs: u64 = gone.iter().map(|id| refs[id]).sum();
    assert!(want_refs > 5);
    let i = &d.integrity;
    assert_eq!(i.dangling_ids, 5);
    assert_eq!(i.dangling_references, want_refs);
    assert_eq!(i.dangling_examples, gone);
    assert_eq!(d.identity_space.states.in_use, in_use_before - 5);
    assert_eq!(d.cluster.endpoints as usize, w.sim.endpoint_keys().len());
    let f = finding(&d, FindingCode::DanglingReferences);
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.message.starts_with(&format!(
            "{want_refs} endpoint references point at 5 identities that do not exist"
        )),
        "{}",
        f.message
    );
    let ids: Vec<String> = gone.iter().map(u64::to_string).collect();
    assert_eq!(f.evidence, vec![format!("missing ids: {}", ids.join(", "))]);
}

/// Endpoint references per identity id, counted from the
/// CiliumEndpointSlices as a client lists them (one per endpoint entry).
async fn slice_refs(w: &World) -> HashMap<u64, u64> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&w.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let req = http::Request::get("/apis/cilium.io/v2alpha1/ciliumendpointslices")
        .body(Vec::new())
        .unwrap();
    let list: Value = client.request(req).await.expect("slices listed");
    let mut refs = HashMap::new();
    for ces in list["items"].as_array().unwrap() {
        for ep in ces["endpoints"].as_array().into_iter().flatten() {
            *refs.entry(ep["id"].as_u64().unwrap()).or_default() += 1;
        }
    }
    refs
}

/// The same over CiliumEndpointSlices: a slice counts once per endpoint in
/// it, and usage comes from the slices alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_references_are_counted_in_endpoint_slices() {
    let w = World::preset("slices").await;
    assert_eq!(w.sim.actor_rates(), Default::default(), "no actors");
    let refs = slice_refs(&w).await;
    let mut by_count: Vec<(u64, u64)> = refs.iter().map(|(id, n)| (*n, *id)).collect();
    by_count.sort_unstable_by(|a, b| b.cmp(a));
    let mut gone: Vec<u64> = by_count[..3].iter().map(|(_, id)| *id).collect();
    gone.sort_unstable();
    let in_use_before = w.sim.referenced_ids().len() as u64;
    assert_eq!(in_use_before as usize, refs.len());
    for id in &gone {
        w.sim
            .delete_object(Kind::Identity, &id.to_string(), "someone", false)
            .unwrap();
    }
    let d = diagnose_world(&w).await;
    assert!(d.cluster.endpoint_slice_crd);
    assert_eq!(
        d.cluster.endpoint_slices as usize,
        w.sim.count(Kind::EndpointSlice)
    );
    assert_eq!(d.cluster.endpoints, 0);
    assert_eq!(d.identity_space.states.in_use, in_use_before - 3);
    let want_refs: u64 = gone.iter().map(|id| refs[id]).sum();
    assert!(want_refs > 3, "the most shared ids were deleted");
    assert_eq!(d.integrity.dangling_ids, 3);
    assert_eq!(d.integrity.dangling_references, want_refs);
    assert_eq!(d.integrity.dangling_examples, gone);
    assert!(!codes(&d).contains(&FindingCode::UsageUnknown));
}

/// Unused identities the operator marked long ago lose their mark to
/// cilium-agent: the mark-strip loop. Before the strips there is none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_strip_loop_is_seen_in_managed_fields() {
    let w = World::start(small()).await;
    let before = diagnose_world(&w).await;
    assert_eq!(before.integrity.strip_loop, 0, "the seed has no strips");
    assert!(!codes(&before).contains(&FindingCode::MarkStripLoop));

    // Six unused identities the operator marked over 2 hours ago.
    let stale_marked: Vec<String> =
        cilium_gc_testkit::stale_names(&w.sim, Duration::from_secs(2 * 3600))
            .into_iter()
            .take(6)
            .collect();
    assert_eq!(stale_marked.len(), 6, "the seed has stale identities");
    for name in &stale_marked {
        // The agent removes the operator's mark (an Update by cilium-agent).
        w.sim.set_heartbeat(name, None).unwrap();
    }
    let d = diagnose_world(&w).await;
    let i = &d.integrity;
    assert_eq!(i.strip_loop, 6);
    let named: BTreeSet<&str> = i
        .strip_loop_examples
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    let want: BTreeSet<&str> = stale_marked.iter().map(String::as_str).collect();
    assert_eq!(named, want);
    for e in &i.strip_loop_examples {
        assert_eq!(e.manager, "cilium-agent");
        let obj = w.sim.identity(&e.name).unwrap();
        assert_eq!(
            e.namespace.as_deref(),
            obj["security-labels"][format!("k8s:{NAMESPACE_LABEL}")].as_str()
        );
    }
    // They moved from stale to unused-and-unmarked.
    let (b, a) = (&before.identity_space.states, &d.identity_space.states);
    assert_eq!(a.stale_candidates, b.stale_candidates - 6);
    assert_eq!(
        a.unused_unmarked + a.too_young,
        b.unused_unmarked + b.too_young + 6
    );
    // The agent is the newest writer of exactly those six.
    let agent = d
        .modifiers
        .managers
        .iter()
        .find(|m| m.manager == "cilium-agent")
        .expect("cilium-agent listed");
    assert_eq!(agent.identities, 6);
    let f = finding(&d, FindingCode::MarkStripLoop);
    assert_eq!(f.severity, Severity::Warning, "five or more");
    assert!(
        f.message.starts_with("6 unused identities"),
        "{}",
        f.message
    );
    assert_eq!(f.evidence.last().unwrap(), "managers: cilium-agent");
}

/// `identity-gc-interval: 0s` turns the operator's GC off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_disabled_is_reported_from_cilium_config() {
    let s = Scenario {
        cilium_config: config(&[("identity-gc-interval", "0s")]),
        ..small()
    };
    let w = World::start(s).await;
    let d = diagnose_world(&w).await;
    assert_eq!(d.configuration.gc_interval_seconds, Some(0.0));
    let gc = d
        .configuration
        .values
        .iter()
        .find(|v| v.key == "identity-gc-interval")
        .unwrap();
    assert_eq!(
        (gc.value.as_str(), gc.source),
        ("0s", ConfigSource::CiliumConfig)
    );
    let f = finding(&d, FindingCode::GcDisabled);
    assert_eq!(f.severity, Severity::Warning, "the space is not full");
    assert_eq!(
        f.evidence,
        vec!["300 of 65,280 local ids allocated (0.5%), 64,980 free (range 256-65535)"]
    );
    assert_eq!(d.identity_space.level, Level::Ok);
}
