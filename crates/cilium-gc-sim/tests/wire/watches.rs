//! Watches: events, bookmarks, 410 for old versions, and kube-runtime's watcher against them.

use crate::support::*;

#[tokio::test]
async fn watch_streams_events_bookmarks_and_410_for_old_versions() {
    timed(async {
        let sim = Simulator::start(Scenario {
            bookmark_interval: Duration::from_millis(200),
            ..quiet("small")
        })
        .await
        .unwrap();
        let c = client(&sim).await;
        let rv = sim.resource_version();
        let name = sim.identity_names()[5].clone();
        let gone = sim.identity_names()[6].clone();
        let path =
            format!("{IDS}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2");
        let watching = {
            let c = c.clone();
            tokio::spawn(async move { get(&c, &path).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        sim.set_heartbeat(&name, Some("2020-01-01T00:00:00Z"))
            .unwrap();
        sim.delete_object(Kind::Identity, &gone, "cilium-operator-generic", true)
            .unwrap();
        let created = json!({"metadata":{"name":"77777"},"security-labels":{"k8s:a":"b"}});
        sim.create_object(Kind::Identity, created, "cilium-agent")
            .unwrap();
        let r = watching.await.unwrap();
        assert_eq!(r.status, 200);
        let events: Vec<Value> = r
            .body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let seen: Vec<(String, String)> = events
            .iter()
            .filter(|e| e["type"] != "BOOKMARK")
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_owned(),
                    e["object"]["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                ("MODIFIED".into(), name),
                ("DELETED".into(), gone),
                ("ADDED".into(), "77777".into())
            ]
        );
        let bm = events
            .iter()
            .find(|e| e["type"] == "BOOKMARK")
            .expect("a bookmark");
        assert_eq!(bm["object"]["kind"], "CiliumIdentity");
        assert_eq!(
            bm["object"].as_object().unwrap().len(),
            3,
            "only kind, apiVersion, metadata: {bm}"
        );
        assert_eq!(bm["object"]["metadata"].as_object().unwrap().len(), 1);
        // A compacted resourceVersion: ERROR event with a 410 Status.
        sim.compact();
        let r = get(&c, &format!("{IDS}?watch=true&resourceVersion={rv}")).await;
        let ev: Value = serde_json::from_str(r.body.lines().next().unwrap()).unwrap();
        assert_eq!(ev["type"], "ERROR");
        assert_eq!(
            (ev["object"]["code"].clone(), ev["object"]["reason"].clone()),
            (json!(410), json!("Expired"))
        );
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn kube_runtime_watcher_syncs_and_stays_live_while_actors_run() {
    timed(async {
        let scenario = Scenario {
            actors: ActorRates {
                operator_mark: 20.0,
                agent_reclaim: 20.0,
                identity_churn: 10.0,
                ..ActorRates::default()
            },
            ..Scenario::preset("small").unwrap()
        };
        let sim = Simulator::start(scenario).await.unwrap();
        let c = client(&sim).await;
        let mut stream = watcher(identity_api(&c), watcher::Config::default()).boxed();
        let mut init = 0;
        loop {
            match stream.try_next().await.unwrap().unwrap() {
                watcher::Event::InitApply(_) => init += 1,
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        assert!(init >= 300, "{init}");
        sim.create_object(
            Kind::Identity,
            json!({"metadata":{"name":"88888"},"security-labels":{"k8s:a":"b"}}),
            "test",
        )
        .unwrap();
        loop {
            if let watcher::Event::Apply(o) = stream.try_next().await.unwrap().unwrap() {
                if o.metadata.name.as_deref() == Some("88888") {
                    break;
                }
            }
        }
        while sim.ledger().actor_touched.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sim.shutdown().await;
    })
    .await
}

/// A watch reads `labelSelector` and `fieldSelector` as a list does (one
/// `ListOptions` in kube-apiserver): the same selection, the same 400s.
#[tokio::test]
async fn watch_selectors_are_a_lists_selectors() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let rv = sim.resource_version();
        let bad = get(
            &c,
            &format!("{IDS}?watch=1&resourceVersion={rv}&fieldSelector=metadata.namespace%3Dx"),
        )
        .await;
        assert_eq!(bad.status, 400);
        assert_eq!(
            bad.json()["message"],
            "field label not supported: metadata.namespace"
        );
        let name = sim.identity_names()[3].clone();
        let other = sim.identity_names()[4].clone();
        let path = format!(
            "{IDS}?watch=1&resourceVersion={rv}&timeoutSeconds=1&fieldSelector=metadata.name!%3D{other}"
        );
        let watching = {
            let c = c.clone();
            tokio::spawn(async move { get(&c, &path).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        for n in [&name, &other] {
            sim.set_heartbeat(n, Some("2020-01-01T00:00:00Z")).unwrap();
        }
        let r = watching.await.unwrap();
        let names: Vec<String> = r
            .body
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|e| e["object"]["metadata"]["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(names, vec![name]);
        sim.shutdown().await;
    })
    .await
}
