//! The audit-log checker can fail (issue 33, item 1, negative control):
//! identities deleted while a CiliumEndpoint or a CiliumEndpointSlice
//! references them are flagged, by whoever deleted them; one whose endpoint
//! was deleted first is not; a dry run deletes nothing.

use std::time::Duration;

use kube::api::DeleteParams;

use crate::support::audit::{Actor, Resource, Verb};
use crate::support::cluster::{client_for, Cluster};
use crate::support::objects::{api, create_all, endpoint, identity, namespace, slice, Kind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_flags_identities_deleted_while_an_endpoint_or_slice_references_them() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let admin = cluster.admin().await;
    create_all(&admin, vec![namespace("team-0")]).await;
    create_all(
        &admin,
        vec![
            identity(1000, "team-0", None),
            identity(1001, "team-0", None),
            identity(1002, "team-0", None),
            identity(1003, "team-0", None),
            endpoint("team-0", "pod-1000", 1000),
            endpoint("team-0", "pod-1002", 1002),
            slice("ces-1", "team-0", &[("pod-1001".into(), 1001)]),
            endpoint("team-0", "pod-1003", 1003),
        ],
    )
    .await;
    let ids = api(&admin, Kind::Identity, None);
    let ceps = api(&admin, Kind::Endpoint, Some("team-0"));
    // 1002's endpoint goes first: no longer referenced when it is deleted.
    ceps.delete("pod-1002", &DeleteParams::default())
        .await
        .expect("endpoint deleted");
    // A dry run of 1003's delete writes nothing.
    ids.delete("1003", &DeleteParams::default().dry_run())
        .await
        .expect("dry run");
    for id in ["1000", "1001", "1002"] {
        ids.delete(id, &DeleteParams::default())
            .await
            .expect("identity deleted");
    }
    // The same delete by the plugin's user, through the API (the plugin
    // itself would refuse): a violation.
    create_all(&admin, vec![identity(1000, "team-0", None)]).await;
    let gc = api(
        &client_for(&cluster.gc_kubeconfig()).await,
        Kind::Identity,
        None,
    );
    gc.delete("1000", &DeleteParams::default())
        .await
        .expect("the published RBAC may delete identities");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let no_preconditions =
        std::panic::catch_unwind(|| cluster.audit().assert_plugin_deletes_carry_preconditions());
    assert!(
        no_preconditions.is_err(),
        "a delete by cilium-gc without preconditions is flagged"
    );
    // And told from the plugin's own by its user agent (kube's test client
    // sends none).
    let other_client =
        std::panic::catch_unwind(|| cluster.audit().assert_plugin_deletes_name_the_plugin());
    assert!(
        other_client.is_err(),
        "a delete by cilium-gc from another client is told apart by its user agent"
    );

    let audit = cluster.audit();
    let judged = audit.judge(Duration::from_secs(5));
    let admin_user = Actor::Other("admin".into());
    let flagged = |name: &str, actor: &Actor| -> Vec<String> {
        let d: Vec<_> = judged
            .deletes
            .iter()
            .filter(|d| d.name == name && &d.actor == actor)
            .collect();
        assert_eq!(d.len(), 1, "one delete of {name} by {actor}: {d:?}");
        d[0].referenced_by.clone()
    };
    assert_eq!(
        flagged("1000", &admin_user),
        ["Endpoint team-0/pod-1000"],
        "referenced by its endpoint"
    );
    assert_eq!(
        flagged("1001", &admin_user),
        ["Slice ces-1"],
        "referenced by its slice"
    );
    assert!(
        flagged("1002", &admin_user).is_empty(),
        "its endpoint was deleted first"
    );
    assert!(
        judged.deletes.iter().all(|d| d.name != "1003"),
        "a dry run deletes nothing"
    );
    assert!(
        audit
            .writes()
            .iter()
            .any(|w| w.resource == Resource::Identity && w.verb == Verb::Delete && w.dry_run),
        "the dry run is in the log, read as one"
    );
    // 1000 came back (created again by admin, same label set), then the
    // plugin's user deleted it while referenced.
    let first = judged.deletes.iter().find(|d| d.name == "1000").unwrap();
    let back = first.came_back.as_ref().expect("1000 came back");
    assert!(back.same_labels && back.actor == admin_user, "{back:?}");
    assert_eq!(
        flagged("1000", &Actor::Plugin),
        ["Endpoint team-0/pod-1000"]
    );
    let recreated = audit
        .first_identity_create(first.at)
        .expect("1000 created again");
    assert_eq!(
        (recreated.name.as_str(), recreated.user.as_str()),
        ("1000", "admin")
    );
    let violations = judged.violations();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(
        audit
            .first_identity_delete(&Actor::Plugin)
            .map(|w| w.name.as_str()),
        Some("1000")
    );
    let result = std::panic::catch_unwind(|| judged.assert_no_plugin_violation());
    assert!(result.is_err(), "the plugin's violation fails a test");
    // This test made the violation on purpose: the cluster's own check
    // (on drop) is told so.
    cluster.violations_expected();
}

/// One audit event as kube-apiserver writes it at `ResponseComplete`:
/// `verb` on `resource`/`name` by `user` with `agent` as user agent,
/// received at `t` seconds (of a fixed minute) and answered `ms` later,
/// with the object the server answered.
fn event(
    verb: &str,
    resource: &str,
    name: &str,
    (user, agent): (&str, &str),
    (t, ms): (f64, u32),
    object: serde_json::Value,
) -> String {
    let at = |s: f64| format!("2026-01-01T00:00:{s:09.6}Z");
    serde_json::json!({
        "stage": "ResponseComplete", "verb": verb,
        "objectRef": {"resource": resource, "namespace": "team-0", "name": name},
        "user": {"username": user}, "userAgent": agent,
        "requestReceivedTimestamp": at(t),
        "stageTimestamp": at(t + f64::from(ms) / 1000.0),
        "responseStatus": {"code": if verb == "create" { 201 } else { 200 }},
        "responseObject": object,
        "requestObject": {"preconditions": {"uid": "u", "resourceVersion": "1"}},
    })
    .to_string()
}

/// The checker's race and agent-wrote branches can fire (a control: every
/// recorded run had them at 0). From a log written for the purpose:
/// identity 3000's endpoint is created by a request that overlaps the
/// plugin's delete in time (racing, not a violation: no reader could order
/// it); identity 3001 is updated by an agent 1 s before the plugin deletes
/// it (within a 5 s window, not within 0.5 s); identity 3002 is neither.
#[test]
fn the_audit_checker_tells_a_racing_endpoint_write_and_an_agents_recent_write() {
    let (plugin, admin, agents) = (
        ("cilium-gc", "kubectl-cilium-gc/v0"),
        ("admin", "kubectl"),
        ("admin", "cilium-agents/v1"),
    );
    let id = |n: u64| identity(n, "team-0", None);
    let log = [
        event(
            "create",
            "ciliumidentities",
            "3000",
            admin,
            (1.0, 2),
            id(3000),
        ),
        event(
            "create",
            "ciliumidentities",
            "3001",
            admin,
            (1.0, 2),
            id(3001),
        ),
        event(
            "create",
            "ciliumidentities",
            "3002",
            admin,
            (1.0, 2),
            id(3002),
        ),
        event(
            "update",
            "ciliumidentities",
            "3001",
            agents,
            (19.0, 1),
            id(3001),
        ),
        event(
            "create",
            "ciliumendpoints",
            "pod-3000",
            agents,
            (20.000, 10),
            endpoint("team-0", "pod-3000", 3000),
        ),
        event(
            "delete",
            "ciliumidentities",
            "3000",
            plugin,
            (20.005, 3),
            serde_json::json!({"kind": "Status"}),
        ),
        event(
            "delete",
            "ciliumidentities",
            "3001",
            plugin,
            (20.1, 1),
            serde_json::json!({"kind": "Status"}),
        ),
        event(
            "delete",
            "ciliumidentities",
            "3002",
            plugin,
            (30.0, 1),
            serde_json::json!({"kind": "Status"}),
        ),
    ];
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("audit.log"), log.join("\n")).expect("log written");
    let audit = crate::support::audit::Audit::read(dir.path());
    let verdict = |window: Duration, name: &str| {
        audit
            .judge(window)
            .deletes
            .into_iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name} judged"))
    };
    let wide = Duration::from_secs(5);
    let raced = verdict(wide, "3000");
    assert_eq!(
        (raced.racing.as_slice(), raced.referenced_by.len()),
        (["Endpoint team-0/pod-3000".to_string()].as_slice(), 0),
        "{raced:?}"
    );
    assert!(
        verdict(wide, "3001").agent_wrote_before,
        "1 s before, 5 s window"
    );
    assert!(
        !verdict(Duration::from_millis(500), "3001").agent_wrote_before,
        "1 s before, 0.5 s window"
    );
    let quiet = verdict(wide, "3002");
    assert!(
        quiet.racing.is_empty() && quiet.referenced_by.is_empty() && !quiet.agent_wrote_before,
        "{quiet:?}"
    );
    audit.judge(wide).assert_no_plugin_violation();
}
