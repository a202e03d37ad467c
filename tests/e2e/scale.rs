//! Thousands of identities, endpoints and slices created through the API;
//! `delete --yes -o json` as the non-admin user deletes exactly the
//! eligible ones, and the report's counts equal what the server shows.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::audit::Actor;
use crate::support::cluster::Cluster;
use crate::support::objects::{self, ago, create_all, identity_names};
use crate::support::{assert_exit, report, run, summary};

/// What a seeded cluster holds, by what the plugin must decide.
pub struct Seeded {
    /// Every identity created.
    pub all: BTreeSet<String>,
    /// Unused, marked an hour ago: eligible.
    pub stale: BTreeSet<String>,
    /// Referenced by an endpoint or a slice (half of them marked long ago).
    pub in_use: BTreeSet<String>,
}

/// Seed `n` identities (ids from 1000) in five namespaces: a fifth used by
/// CiliumEndpoints, a fifth by CiliumEndpointSlices (each of those half
/// marked an hour ago, as a racing operator would), a fifth stale, a fifth
/// marked five minutes ago, a fifth unmarked. Plus three out of the local
/// range and two with malformed marks.
pub async fn seed(cluster: &Cluster, n: u64) -> Seeded {
    let client = cluster.admin().await;
    let hour = ago(Duration::from_secs(3600));
    let recent = ago(Duration::from_secs(300));
    let namespaces: Vec<String> = (0..5).map(|i| format!("team-{i}")).collect();
    create_all(
        &client,
        namespaces.iter().map(|n| objects::namespace(n)).collect(),
    )
    .await;
    let mut objs = Vec::new();
    let (mut stale, mut in_use) = (BTreeSet::new(), BTreeSet::new());
    let mut slice_entries: Vec<Vec<(String, u64)>> = vec![Vec::new(); 5];
    for id in 1000..1000 + n {
        let ns = &namespaces[(id % 5) as usize];
        let long_marked = (id / 5) % 2 == 0;
        let mark = match id % 5 {
            0 | 1 => long_marked.then_some(hour),
            2 => Some(hour),
            3 => Some(recent),
            _ => None,
        };
        objs.push(objects::identity(id, ns, mark));
        match id % 5 {
            0 => {
                objs.push(objects::endpoint(ns, &format!("pod-{id}"), id));
                in_use.insert(id.to_string());
            }
            1 => {
                slice_entries[(id % 5) as usize].push((format!("pod-{id}"), id));
                in_use.insert(id.to_string());
            }
            2 => {
                stale.insert(id.to_string());
            }
            _ => {}
        }
    }
    for (i, entries) in slice_entries.iter().enumerate() {
        for (j, chunk) in entries.chunks(100).enumerate() {
            objs.push(objects::slice(
                &format!("ces-{i}-{j}"),
                &namespaces[i],
                chunk,
            ));
        }
    }
    for id in [70000u64, 70001, 99999] {
        objs.push(objects::identity(id, "team-0", Some(hour)));
    }
    for id in [900u64, 901] {
        let mut v = objects::identity(id, "team-0", None);
        v["metadata"]["annotations"] = serde_json::json!({ objects::HEARTBEAT: "yesterday" });
        objs.push(v);
    }
    create_all(&client, objs).await;
    let all = identity_names(&client).await;
    assert_eq!(all.len() as u64, n + 5, "every identity created");
    Seeded { all, stale, in_use }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_as_the_least_privileged_user_removes_exactly_the_stale_identities() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let seeded = seed(&cluster, 3000).await;
    let client = cluster.admin().await;

    // A scan first: read-only, same decision.
    let out = run(&cluster.gc_kubeconfig(), &["scan", "-o", "json"]).await;
    assert_exit(&out, 0);
    let scan = report(&out);
    assert_eq!(summary(&scan, "candidates"), seeded.stale.len() as u64);
    assert_eq!(
        identity_names(&client).await,
        seeded.all,
        "scan wrote nothing"
    );

    let out = run(
        &cluster.gc_kubeconfig(),
        &[
            "delete",
            "--yes",
            "-o",
            "json",
            "--qps",
            "500",
            "--concurrency",
            "16",
        ],
    )
    .await;
    assert_exit(&out, 0);
    let r = report(&out);
    let left = identity_names(&client).await;
    let expected: BTreeSet<String> = seeded.all.difference(&seeded.stale).cloned().collect();
    assert_eq!(left, expected, "exactly the stale identities are gone");
    assert!(seeded.in_use.is_subset(&left), "no identity in use deleted");

    // The report's counts are what the server shows.
    assert_eq!(summary(&r, "scanned"), seeded.all.len() as u64);
    assert_eq!(
        summary(&r, "deleted"),
        (seeded.all.len() - left.len()) as u64
    );
    assert_eq!(summary(&r, "candidates"), seeded.stale.len() as u64);
    assert_eq!(summary(&r, "failed"), 0);
    let reasons = &r["summary"]["reasons"];
    assert_eq!(reasons["inUse"], seeded.in_use.len() as u64);
    assert_eq!(reasons["notLocal"], 3);
    assert_eq!(reasons["malformedMark"], 2);
    assert_eq!(reasons["stale"], seeded.stale.len() as u64);
    assert_eq!(reasons["markTooRecent"], 600);
    assert_eq!(reasons["unmarked"], 600);
    let deleted: BTreeSet<String> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["outcome"] == "deleted")
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(deleted, seeded.stale, "the report names what was deleted");
    assert!(
        r["errors"].as_array().is_none_or(|e| e.is_empty()),
        "no errors (no 403): {}",
        r["errors"]
    );
}

/// Deletes begin from the first pages: the plugin judges each identity as
/// its page arrives (usage is known by then), so an SRE restoring a full
/// range gets ids back while a 65k list is still paging. Judged by the
/// server's record, an order and not a time: the plugin's first delete the
/// server answered 200 was received before the server answered the last
/// page of its identity list (the premise: that list had at least 100
/// pages).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_begin_while_the_identity_list_is_still_paging() {
    const LIMIT: u32 = 20;
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let seeded = seed(&cluster, 3000).await;
    let limit = LIMIT.to_string();
    let out = run(
        &cluster.gc_kubeconfig(),
        &["delete", "--yes", "-o", "json", "--page-size", &limit],
    )
    .await;
    assert_exit(&out, 0);
    assert_eq!(summary(&report(&out), "deleted"), seeded.stale.len() as u64);
    let audit = cluster.audit();
    let pages = audit.first_plugin_list(LIMIT);
    assert!(
        pages.len() >= 100,
        "premise: the plugin's identity list paged ({} pages of {LIMIT})",
        pages.len()
    );
    let first = audit
        .first_identity_delete(&Actor::Plugin)
        .expect("the plugin deleted");
    let last_page = pages.last().expect("pages").done;
    let answered_before = pages.iter().filter(|p| p.done < first.received).count();
    let line = format!(
        "streaming: delete --yes --page-size {LIMIT} over {} identities: the first delete ({}) was received after {answered_before} of its list's {} pages were answered",
        seeded.all.len(),
        first.name,
        pages.len()
    );
    eprintln!("{line}");
    assert!(
        first.received < last_page,
        "{line}: deletes waited for the whole list"
    );
}
