//! `diagnose` names who writes the identities, from their `managedFields`
//! (issue 36, 1): on the real kube-apiserver, identities allocated by agents
//! running Cilium's own code, marked by the real current operator, then
//! written by a third program with a field manager of its own
//! (`kubectl patch --field-manager=label-sync`), as a label-syncing
//! controller would. The server's own record of each patched identity
//! (its managedFields and its mark) is the premise; the diagnosis must name
//! the third writer with exactly that count, and the agents and the
//! operator as what they are.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::support::cluster::Cluster;
use crate::support::objects::{api, Kind};
use crate::support::operator::{Operator, Version, World};
use crate::support::workload::seed_old;
use crate::support::{assert_exit, report, run};

/// Identities the third writer patches.
const PATCHED: usize = 7;

/// The operator marks every unused identity in a pass (2 s), but deletes at
/// most one an hour: its marks stay on the server for the test.
const SLOW_GC: [&str; 4] = [
    "--identity-gc-interval=2s",
    "--identity-heartbeat-timeout=2s",
    "--identity-gc-rate-limit=1",
    "--identity-gc-rate-interval=1h",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnose_names_a_third_writer_after_the_operators_mark() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    if crate::support::operator::build(Version::Current).is_none() {
        return;
    }
    let old = seed_old(&cluster, Version::Current).await;
    let operator = Operator::up(&cluster, Version::Current, &SLOW_GC).expect("operator");
    let client = cluster.admin().await;
    wait_marked(&client, &old).await;
    // Past the one delete the rate limit allows.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let world = World::read(&client).await;
    let chosen: Vec<String> = old
        .iter()
        .filter(|n| world.identities.get(*n).is_some_and(|i| i.marked))
        .take(PATCHED)
        .cloned()
        .collect();
    assert_eq!(chosen.len(), PATCHED, "marked identities to patch");
    for name in &chosen {
        cluster.patch_as_label_sync(name);
    }
    // The premise, from the server: every patched identity still carries
    // the operator's mark and a label-sync entry no older than the mark's
    // second; no other identity has a label-sync entry.
    let ids = api(&client, Kind::Identity, None)
        .list(&Default::default())
        .await
        .unwrap();
    let mut synced = BTreeSet::new();
    for o in &ids.items {
        let name = o.metadata.name.clone().unwrap_or_default();
        let fields = o.metadata.managed_fields.clone().unwrap_or_default();
        let Some(sync) = fields
            .iter()
            .find(|f| f.manager.as_deref() == Some("label-sync"))
        else {
            continue;
        };
        let mark = o
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("io.cilium.heartbeat"))
            .unwrap_or_else(|| panic!("{name}: patched identity lost its mark"));
        let mark: jiff::Timestamp = mark.parse().expect("mark is a time");
        let at = sync.time.as_ref().expect("entry time").0;
        assert!(
            at.as_second() >= mark.as_second(),
            "{name}: label-sync wrote at {at:?}, before the mark {mark}"
        );
        synced.insert(name);
    }
    assert_eq!(
        synced,
        chosen.iter().cloned().collect(),
        "label-sync entries on the server"
    );

    let out = run(&cluster.gc_kubeconfig(), &["diagnose", "-o", "json"]).await;
    assert_exit(&out, 0);
    let d = report(&out);
    let managers = d["writers"]["managers"]
        .as_array()
        .expect("writers")
        .clone();
    let by = |m: &str| -> &Value {
        managers
            .iter()
            .find(|a| a["manager"] == m)
            .unwrap_or_else(|| panic!("no {m} among {managers:#?}"))
    };
    let sync = by("label-sync");
    assert_eq!(sync["role"], "other", "{sync}");
    assert_eq!(sync["operation"], "Update", "{sync}");
    assert_eq!(sync["writtenAfterMark"], PATCHED as u64, "{sync}");
    assert_eq!(sync["identities"], PATCHED as u64, "{sync}");
    let agents = by("cilium-agents");
    assert_eq!(agents["role"], "cilium-agent", "{agents}");
    assert!(
        agents["identities"].as_u64() >= Some(old.len() as u64 - 1),
        "{agents}"
    );
    let operator_entry = by("cilium-operator-generic");
    assert_eq!(
        operator_entry["role"], "cilium-operator",
        "{operator_entry}"
    );
    let still_marked = World::read(&client)
        .await
        .identities
        .values()
        .filter(|i| i.marked)
        .count() as u64;
    assert_eq!(
        operator_entry["marksHeld"].as_u64(),
        Some(still_marked),
        "the operator holds every mark: {operator_entry}"
    );
    assert_eq!(operator_entry["writtenAfterMark"], 0, "{operator_entry}");
    let finding = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "conflict-writers")
        .unwrap_or_else(|| panic!("no conflict-writers finding: {}", d["findings"]))
        .clone();
    assert_eq!(finding["severity"], "warning");
    let message = finding["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("label-sync ({PATCHED})")),
        "{message}"
    );
    assert!(!message.contains("cilium-agents"), "{message}");
    let evidence = finding["evidence"].to_string();
    assert!(
        evidence.contains("cilium-agents (Update, a Cilium agent)")
            && evidence.contains("cilium-operator-generic (Update, cilium-operator)"),
        "{evidence}"
    );
    drop(operator);
}

/// Wait (at most 60 s) until the operator has marked every identity of
/// `names` still on the server.
async fn wait_marked(client: &kube::Client, names: &BTreeSet<String>) {
    for _ in 0..120 {
        let w = World::read(client).await;
        if names
            .iter()
            .all(|n| w.identities.get(n).is_none_or(|i| i.marked))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the operator did not mark the stale identities within 60 s");
}
