//! Today's identity-management modes (issue 36, item 4): the real current
//! cilium-operator with `identity-management-mode` `operator` and `both`,
//! a Pod on the server, and the plugin refusing next to it.
//!
//! What the test pins, from the server: the operator creates the Pod's
//! identity itself; its heartbeat GC marks that identity although the Pod
//! runs (no CiliumEndpoint yet); the mark stays and the resourceVersion
//! does not move (nothing strips it in these modes), so the server accepts
//! a delete with the marked {uid, resourceVersion} preconditions; the
//! plugin refuses before any write and the identity keeps its uid; the
//! operator then deletes and re-creates it under the same name. And the
//! harm the refusal prevents: overridden (cilium-config edited to say
//! `agent`), the plugin deletes the running Pod's re-created identity. The
//! reading of Cilium's code behind it is in docs/real-cilium.md.

use std::process::Output;
use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, Preconditions};

use crate::support::audit::Actor;
use crate::support::cluster::Cluster;
use crate::support::objects::{api, Kind, HEARTBEAT};
use crate::support::operator::{Operator, Version};
use crate::support::workload::{record, PLUGIN_TIMEOUT};
use crate::support::{assert_exit, finish, plugin, report};

/// The namespace of the test's Pod.
const NS: &str = "modes";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_mode_marks_a_running_pods_identity_and_the_plugin_refuses() {
    refused_next_to_the_operator("operator").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_mode_marks_a_running_pods_identity_and_the_plugin_refuses() {
    refused_next_to_the_operator("both").await;
}

/// The Pod's identity as the server holds it: name, uid, resourceVersion
/// and its heartbeat mark.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    name: String,
    uid: String,
    rv: String,
    mark: Option<String>,
}

async fn refused_next_to_the_operator(mode: &str) {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    // cilium-config says the mode, as Helm writes it; the operator reads
    // the same key as a flag (its ConfigMap is mounted as --config-dir).
    cluster.set_cilium_config(&[("identity-management-mode", mode)]);
    let flag = format!("--identity-management-mode={mode}");
    let Some(operator) = Operator::up(&cluster, Version::Current, &[&flag]) else {
        return;
    };
    // Premise: in this mode the operator runs both its CID controller and
    // the heartbeat GC (the script's defaults: a pass every 10 s, 20 s).
    let log = operator.log();
    assert!(log.contains(&format!("--identity-management-mode='{mode}'")));
    assert!(log.contains("Starting CID controller Operator"), "{log}");
    assert!(log.contains("Starting CRD identity garbage collector"));

    cluster.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: {NS}, labels: {{app: web}}}}\n\
         spec: {{containers: [{{name: c, image: web}}]}}\n"
    ));
    let client = cluster.admin().await;
    // Premise: the operator created the Pod's identity (its field manager
    // wrote it; no agent runs here).
    let created = wait_for(&client, "the operator to create the Pod's identity", |h| {
        h.is_some()
    })
    .await;
    let ids = api(&client, Kind::Identity, None);
    let obj = ids.get(&created.name).await.expect("identity read");
    let managers: Vec<_> = obj
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["cilium-operator-generic"], "who wrote it");
    assert_eq!(
        creations(&operator.log(), &created.name),
        1,
        "its log says so"
    );

    // Its heartbeat GC marks it although the Pod runs: the operator's use
    // is CiliumEndpoints and slices only (identitygc/crd_gc.go, gc).
    let marked = wait_for(&client, "the operator's GC to mark it", |h| {
        h.is_some_and(|h| h.uid == created.uid && h.mark.is_some())
    })
    .await;
    assert!(pod_runs(&cluster), "the Pod is on the server");
    // Nothing strips the mark: the server accepts a delete with the
    // preconditions taken at the mark (dry run: nothing is deleted).
    let dry = DeleteParams {
        dry_run: true,
        preconditions: Some(Preconditions {
            uid: Some(marked.uid.clone()),
            resource_version: Some(marked.rv.clone()),
        }),
        ..DeleteParams::default()
    };
    ids.delete(&marked.name, &dry)
        .await
        .expect("the server accepts the marked preconditions while the Pod runs");

    // The plugin refuses before any write. The operator cannot delete the
    // identity within 20 s of its mark (its heartbeat store records the
    // mark's own update as a lifesign, identitygc/heartbeat.go isAlive).
    let out = delete_run(&cluster, &[]).await;
    let after = held(&client).await.expect("the identity is still there");
    // Same uid: the plugin deleted nothing; same mark and resourceVersion:
    // neither it nor anyone else wrote it.
    assert_eq!(after, marked, "the identity as it was at the mark");
    assert_refused(&out, mode);

    // The operator's GC then deletes it although the Pod still runs, and its
    // CID controller re-creates it under the same name (a new uid).
    let again = wait_for(&client, "the operator to delete and re-create it", |h| {
        h.is_some_and(|h| h.uid != marked.uid)
    })
    .await;
    assert_eq!(again.name, marked.name);
    assert!(pod_runs(&cluster), "the Pod is still on the server");
    let creates = creations(&operator.log(), &marked.name);
    assert!(creates >= 2, "created again: {}", operator.log());
    let harm = harm_when_overridden(&cluster, &client, &again).await;
    let line = format!(
        "identity-management-mode={mode}: identity {} of running Pod {NS}/web marked (uid {}), kept its mark and resourceVersion {}, then deleted and re-created by the operator (uid {}); Creating CID lines for it: {creates}; {harm}",
        marked.name, marked.uid, marked.rv, again.uid
    );
    eprintln!("{line}");
    record(
        &format!("identity_modes_{mode}"),
        serde_json::json!({"mode": mode, "identity": marked.name, "markedUid": marked.uid,
               "resourceVersion": marked.rv, "recreatedUid": again.uid,
               "creatingCidLines": creates, "printed": [line]}),
    );
}

/// The harm the refusal prevents, shown on this scratch cluster: with the
/// check overridden (cilium-config edited to say `agent`, as a user forcing
/// the run would, and `--force` for the endpoints no agent wrote here), the
/// plugin deletes the running Pod's identity once the
/// operator has marked it again and the mark is past the plugin's timeout:
/// no CiliumEndpoint references it, only the Pod holds it. Judged by the
/// audit log: one delete of it by the plugin, its answer 200, the Pod on
/// the server. Returns the printed part.
async fn harm_when_overridden(cluster: &Cluster, client: &kube::Client, again: &Held) -> String {
    let remarked = wait_for(client, "the operator to mark it again", |h| {
        h.is_some_and(|h| h.uid == again.uid && h.mark.is_some())
    })
    .await;
    let mark: jiff::Timestamp = remarked
        .mark
        .as_deref()
        .and_then(|m| m.parse().ok())
        .expect("an RFC 3339 mark");
    // Past the plugin's 5 s, well before the operator's own delete (20 s).
    let due = mark + jiff::SignedDuration::from_secs(6);
    if let Ok(wait) = Duration::try_from(due - jiff::Timestamp::now()) {
        tokio::time::sleep(wait).await;
    }
    cluster.set_cilium_config(&[("identity-management-mode", "agent")]);
    // --force too: no agent runs here, so there is no CiliumEndpoint at all,
    // which the plugin also refuses to trust without it.
    let out = delete_run(cluster, &["--force"]).await;
    assert_exit(&out, 0);
    let ours: Vec<_> = cluster
        .audit()
        .identity_deletes()
        .filter(|d| d.actor == Actor::Plugin && d.name == remarked.name)
        .map(|d| d.done)
        .collect();
    assert!(
        ours.len() == 1 && pod_runs(cluster),
        "overridden, the plugin deleted the running Pod's identity {} (audit log: {ours:?})",
        remarked.name
    );
    format!(
        "with the check overridden (cilium-config saying agent, --force), delete --yes deleted identity {} (uid {}) of the running Pod (audit log), which the default run refused",
        remarked.name, remarked.uid
    )
}

/// `delete --yes` as the published RBAC's user, as against the agents.
async fn delete_run(cluster: &Cluster, extra: &[&str]) -> Output {
    let mut cmd = plugin();
    cmd.arg("--kubeconfig")
        .arg(cluster.gc_kubeconfig())
        .args(["delete", "--yes", "-o", "json"])
        .args(extra)
        .args([
            "--heartbeat-timeout",
            PLUGIN_TIMEOUT,
            "--allow-short-heartbeat-timeout",
        ]);
    finish(cmd).await
}

/// Exit 3, the allocation-mode check failed naming the mode and the reason,
/// nothing deleted by the report's count either.
fn assert_refused(out: &Output, mode: &str) {
    assert_exit(out, 3);
    let r = report(out);
    let check = r["preflight"]["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "allocation-mode")
        .unwrap_or_else(|| panic!("no allocation-mode check: {}", r["preflight"]))
        .clone();
    assert_eq!(check["passed"], false);
    let msg = check["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!("{mode:?}")) && msg.contains("strips"),
        "{msg}"
    );
}

/// The identity of the test's Pod (security label `k8s:app=web` in
/// [`NS`]), if the server holds one.
async fn held(client: &kube::Client) -> Option<Held> {
    let list = api(client, Kind::Identity, None)
        .list(&Default::default())
        .await
        .expect("identities listed");
    list.items.into_iter().find_map(|o: DynamicObject| {
        let sl = &o.data["security-labels"];
        (sl["k8s:app"] == "web" && sl["k8s:io.kubernetes.pod.namespace"] == NS).then(|| Held {
            name: o.metadata.name.clone().unwrap_or_default(),
            uid: o.metadata.uid.clone().unwrap_or_default(),
            rv: o.metadata.resource_version.clone().unwrap_or_default(),
            mark: o
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(HEARTBEAT).cloned()),
        })
    })
}

/// Poll (every 500 ms, at most 120 s) until `ok` holds of the Pod's
/// identity; return it.
async fn wait_for(client: &kube::Client, what: &str, ok: impl Fn(Option<&Held>) -> bool) -> Held {
    for _ in 0..240 {
        let h = held(client).await;
        if ok(h.as_ref()) {
            return h.expect("an identity");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("waited 120 s for {what}: {:?}", held(client).await);
}

/// How many times the operator's log says its CID controller created the
/// identity `name` for the Pod's labels.
fn creations(log: &str, name: &str) -> usize {
    let id = format!("ciliumIdentityName={name}");
    log.lines()
        .filter(|l| {
            l.contains("msg=\"Creating CID\"")
                && l.contains("k8s:app:web")
                && l.split_whitespace().any(|w| w == id)
        })
        .count()
}

/// Whether the server holds the test's Pod.
fn pod_runs(cluster: &Cluster) -> bool {
    cluster
        .kubectl(&["-n", NS, "get", "pod", "web", "-o", "name"])
        .status
        .success()
}
