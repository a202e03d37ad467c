//! Malformed objects in lists and watches: reported and skipped, never deleted, never a stall.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_malformed_objects_are_reported_and_skipped_never_deleted() {
    let w = World::start(calm_sized(100)).await;
    let sim = &w.sim;
    let now = sim.now();
    let old = ago(now, 2 * 3600);
    let hb = |m: &str| json!({ HEARTBEAT_ANNOTATION: m });
    // Identities a delete must never touch, however stale they look.
    let malformed: BTreeMap<&str, Value> = BTreeMap::from([
        (
            "60001",
            json!({"name": "60001", "resourceVersion": "3", "annotations": hb(&old)}),
        ),
        (
            "60002",
            json!({"name": "60002", "uid": "u-60002", "annotations": hb(&old)}),
        ),
        (
            "60003",
            json!({"name": "60003", "uid": "u", "resourceVersion": "3",
                          "labels": {"app": 7}, "annotations": hb(&old)}),
        ),
        (
            "60004",
            json!({"name": "60004", "uid": "u", "resourceVersion": "3",
                          "annotations": [HEARTBEAT_ANNOTATION, old]}),
        ),
        (
            "60005",
            json!({"name": "60005", "uid": "u", "resourceVersion": "3",
                          "annotations": {HEARTBEAT_ANNOTATION: 1_700_000_000}}),
        ),
        (
            "60006",
            json!({"name": 60006, "uid": "u", "resourceVersion": "3",
                          "annotations": hb(&old)}),
        ),
        (
            "60007",
            json!({"name": "60007", "uid": ["u"], "resourceVersion": 3,
                          "annotations": hb(&old)}),
        ),
    ]);
    for (key, meta) in &malformed {
        sim.inject_raw(Kind::Identity, key, raw_identity(meta.clone()));
    }
    sim.inject_raw(
        Kind::Identity,
        "60008",
        json!({"apiVersion": "cilium.io/v2", "kind": "CiliumIdentity", "metadata": "60008"}),
    );
    sim.inject_raw(Kind::Identity, "60009", json!(["not", "an", "object"]));
    // Well-formed, but never collected: not numeric, out of range, bad marks.
    for name in [
        "stale-but-named",
        "99999999999999999999999",
        "70000",
        "-300",
    ] {
        sim.create_object(
            Kind::Identity,
            identity(name, Some(&old)),
            "cilium-operator",
        )
        .unwrap();
    }
    for (name, mark) in [
        ("60010", "yesterday"),
        ("60011", ""),
        ("60012", "1700000000"),
    ] {
        sim.create_object(
            Kind::Identity,
            identity(name, Some(mark)),
            "cilium-operator",
        )
        .unwrap();
    }
    // Referenced through an id that is a numeric string (or an integral
    // float): in use, whatever the mark says.
    for name in ["60020", "60021"] {
        sim.create_object(
            Kind::Identity,
            identity(name, Some(&old)),
            "cilium-operator",
        )
        .unwrap();
    }
    sim.inject_raw(
        Kind::Endpoint,
        "chaos/by-string",
        raw_endpoint(
            json!("by-string"),
            Some(json!({"identity": {"id": "60020"}})),
        ),
    );
    sim.inject_raw(
        Kind::Endpoint,
        "chaos/by-float",
        raw_endpoint(
            json!("by-float"),
            Some(json!({"identity": {"id": 60021.0}})),
        ),
    );
    // Two endpoints whose names are unreadable must not share one key: each
    // keeps its own identity in use.
    for (i, id) in [(1, 60022), (2, 60023)] {
        sim.create_object(
            Kind::Identity,
            identity(&id.to_string(), Some(&old)),
            "cilium-operator",
        )
        .unwrap();
        let mut cep = raw_endpoint(json!(i), Some(json!({"identity": {"id": id}})));
        cep["metadata"]["uid"] = json!(format!("uid-unnamed-{i}"));
        sim.inject_raw(Kind::Endpoint, &format!("chaos/unnamed-{i}"), cep);
    }
    // Endpoints that reference nothing: no status, id 0, wrong types.
    for (name, status) in [
        ("no-status", None),
        ("id-zero", Some(json!({"identity": {"id": 0}}))),
        ("id-bool", Some(json!({"identity": {"id": true}}))),
        (
            "id-object",
            Some(json!({"identity": {"id": {"value": 60030}}})),
        ),
        ("id-negative", Some(json!({"identity": {"id": -60031}}))),
        ("status-string", Some(json!("ready"))),
        ("identity-list", Some(json!({"identity": [60032]}))),
    ] {
        sim.inject_raw(
            Kind::Endpoint,
            &format!("chaos/{name}"),
            raw_endpoint(json!(name), status),
        );
    }
    // A valid stale identity with a huge label map is an ordinary candidate.
    let mut huge = identity("60040", Some(&old));
    for i in 0..5000 {
        huge["metadata"]["labels"][format!("k8s:label-{i}")] = json!(format!("value-{i}"));
    }
    sim.create_object(Kind::Identity, huge, "cilium-operator")
        .unwrap();

    let stale = w.stale_now(TIMEOUT_30M);
    // Issue 12: endpoints whose identity cannot be read block deletes.
    let before = w.names();
    let (refused, exit) = w.gc(&delete_with(all_items(), unlimited())).await;
    assert_eq!(exit, Exit::Refused, "{:?}", refused.aborted);
    let why = &refused.aborted.as_ref().unwrap().message;
    assert!(
        why.contains("chaos/id-bool") && why.contains("--allow-unreadable-endpoints"),
        "{why}"
    );
    assert!(
        !why.contains("chaos/id-zero") && !why.contains("no-status"),
        "{why}"
    );
    assert_eq!(w.names(), before, "nothing deleted");
    assert!(w.sim.ledger().deletes.is_empty());
    assert_valid(&json(&refused));

    let allow_unreadable = WriteSettings {
        allow_unreadable_endpoints: true,
        ..unlimited()
    };
    let (report, exit) = w.gc(&delete_with(all_items(), allow_unreadable)).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert!(report.options.allow_unreadable_endpoints);
    assert_valid(&json(&report));
    check_ledger_agrees(&report, &w);

    // Every malformed identity and endpoint is counted and named: 9
    // identities, and 7 endpoints whose name or id path cannot be read.
    assert_eq!(report.summary.malformed, 16, "{:#?}", report.errors);
    let malformed_errors: Vec<&str> = report
        .errors
        .iter()
        .filter(|e| e.kind == ErrorKind::MalformedObject)
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(malformed_errors.len(), 16, "{malformed_errors:#?}");
    for name in ["60001", "60002", "60003", "60004", "60005", "60007"] {
        assert!(
            malformed_errors.iter().any(|m| m.contains(name)),
            "{name} is named: {malformed_errors:#?}"
        );
    }
    for name in [
        "id-bool",
        "id-object",
        "id-negative",
        "status-string",
        "identity-list",
    ] {
        let what = format!("ciliumendpoint chaos/{name}:");
        assert!(
            malformed_errors.iter().any(|m| m.starts_with(&what)),
            "{name} is named: {malformed_errors:#?}"
        );
    }
    assert_eq!(
        malformed_errors
            .iter()
            .filter(|m| m.starts_with("ciliumendpoint <no name>: no readable metadata.name"))
            .count(),
        2
    );
    for m in &malformed_errors {
        assert!(
            m.ends_with("(skipped)")
                || m.ends_with("--allow-unreadable-endpoints)")
                || m.ends_with("its identity reference was read)"),
            "{m}"
        );
    }

    let left = w.names();
    for name in [
        "60001",
        "60002",
        "60003",
        "60004",
        "60005",
        "60006",
        "60007",
        "60008",
        "60009",
        "stale-but-named",
        "99999999999999999999999",
        "70000",
        "-300",
        "60010",
        "60011",
        "60012",
        "60020",
        "60021",
        "60022",
        "60023",
    ] {
        assert!(left.contains(name), "{name} must not be deleted");
    }
    assert!(
        !left.contains("60040"),
        "a huge label map is no reason to keep"
    );
    let item = |n: &str| report.items.iter().find(|i| i.name == n);
    for n in ["60020", "60021", "60022", "60023"] {
        assert_eq!(
            item(n).map(|i| i.reason),
            Some(cilium_gc_cluster::policy::Reason::InUse),
            "{n}"
        );
    }
    // Everything else stale by the simulator's reckoning went. (It calls the
    // malformed ones stale too, and 60022/60023: its decoder drops an
    // endpoint whose name is not a string; keeping them is the safe side.)
    let kept_on_purpose = ["60021", "60022", "60023"];
    let should_go: BTreeSet<&String> = stale
        .iter()
        .filter(|n| !malformed.contains_key(n.as_str()) && !kept_on_purpose.contains(&n.as_str()))
        .collect();
    let stayed: Vec<_> = should_go.iter().filter(|n| left.contains(**n)).collect();
    assert!(stayed.is_empty(), "stale but not deleted: {stayed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_malformed_endpoints_arriving_by_watch_do_not_stall_or_confuse_the_run() {
    let w = World::start(calm_sized(200)).await;
    let stale = w.stale_now(TIMEOUT_30M);
    assert!(stale.len() > 20);
    let sim = &w.sim;
    let writes = WriteSettings {
        pacing: Pacing {
            qps: 25.0,
            burst: Some(1),
            ..yes().pacing
        },
        allow_unreadable_endpoints: true,
        ..yes()
    };
    let settings = delete_with(ScanSettings::default(), writes);
    let run = w.gc(&settings);
    let inject = async {
        while sim.ledger().deletes.len() < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        sim.inject_raw(Kind::Endpoint, "chaos/junk", json!("junk"));
        sim.inject_raw(
            Kind::Endpoint,
            "chaos/no-rv",
            json!({"metadata": {"name": "no-rv", "namespace": "chaos"},
                   "status": {"identity": {"id": true}}}),
        );
        sim.inject_raw(
            Kind::Endpoint,
            "chaos/meta-string",
            json!({"metadata": "x", "status": {"identity": {"id": "zero"}}}),
        );
        sim.inject_raw(
            Kind::Endpoint,
            "chaos/huge",
            raw_endpoint(
                json!("huge"),
                Some(json!({"identity": {"id": 0, "labels": vec!["k8s:x=y"; 20_000]}})),
            ),
        );
    };
    let ((report, exit), ()) = tokio::join!(run, inject);
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    // Seen by watch or by the re-list a watch event without resourceVersion
    // causes: reported, referencing nothing.
    let reported: Vec<&str> = report
        .errors
        .iter()
        .filter(|e| e.kind == ErrorKind::MalformedObject)
        .map(|e| e.message.as_str())
        .collect();
    assert!(
        reported
            .iter()
            .any(|m| m.starts_with("ciliumendpoint chaos/no-rv: status.identity.id")),
        "{reported:#?}"
    );
    assert!(
        reported.iter().any(|m| m.contains("not a JSON object")),
        "{reported:#?}"
    );
    assert_eq!(report.summary.malformed as usize, reported.len());
    check_ledger_agrees(&report, &w);
    assert_eq!(
        w.names().intersection(&stale).count(),
        0,
        "every stale identity went"
    );
    assert_valid(&json(&report));
}
