//! Lists: pages, snapshots, expired continue tokens, metadata-only answers and selectors.

use crate::support::*;

#[tokio::test]
async fn paginated_list_returns_every_identity_with_kind_and_remaining_count() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let first = get(&c, &format!("{IDS}?limit=100")).await.json();
        assert_eq!(first["kind"], "CiliumIdentityList");
        assert_eq!(first["apiVersion"], "cilium.io/v2");
        let total = sim.identity_names().len();
        assert_eq!(first["metadata"]["remainingItemCount"], json!(total - 100));
        let tok = decode_token(first["metadata"]["continue"].as_str().unwrap());
        assert_eq!(tok["v"], "meta.k8s.io/v1");
        assert!(tok["start"].as_str().unwrap().ends_with('\u{0}'));
        let (items, rvs) = list_all(&c, IDS, 100).await;
        assert_eq!(items.len(), total);
        assert!(items
            .iter()
            .all(|i| i["kind"] == "CiliumIdentity" && i["apiVersion"] == "cilium.io/v2"));
        assert!(
            rvs.windows(2).all(|w| w[0] == w[1]),
            "every page shows the snapshot rv: {rvs:?}"
        );
        // The last page carries neither continue nor remainingItemCount.
        let last = get(&c, &format!("{IDS}?limit={total}")).await.json();
        assert!(
            last["metadata"].get("continue").is_none()
                && last["metadata"].get("remainingItemCount").is_none()
        );
        // resourceVersion=0 ignores limit.
        let all = get(&c, &format!("{IDS}?limit=10&resourceVersion=0"))
            .await
            .json();
        assert_eq!(all["items"].as_array().unwrap().len(), total);
        assert!(all["metadata"].get("continue").is_none());
        // A malformed token is a 400.
        let bad = get(&c, &format!("{IDS}?limit=10&continue=garbage!")).await;
        assert_eq!(bad.status, 400);
        assert!(bad.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid continue token"));
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn later_pages_show_the_snapshot_while_objects_change() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let names = sim.identity_names();
        let first = get(&c, &format!("{IDS}?limit=50")).await.json();
        let snap_rv = first["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
        let (modified, deleted) = (names[100].clone(), names[101].clone());
        let before = sim.identity(&modified).unwrap();
        sim.set_heartbeat(&modified, Some("2020-01-01T00:00:00Z"))
            .unwrap();
        sim.delete_object(Kind::Identity, &deleted, "cilium-operator-generic", true)
            .unwrap();
        let mut rest = Vec::new();
        let mut cont = first["metadata"]["continue"].as_str().unwrap().to_owned();
        loop {
            let p = get(&c, &format!("{IDS}?limit=50&continue={cont}"))
                .await
                .json();
            assert_eq!(p["metadata"]["resourceVersion"], snap_rv.as_str());
            rest.extend(p["items"].as_array().unwrap().iter().cloned());
            match p["metadata"]["continue"].as_str() {
                Some(t) => cont = t.to_owned(),
                None => break,
            }
        }
        let m = rest
            .iter()
            .find(|i| i["metadata"]["name"] == modified.as_str())
            .expect("modified one listed");
        assert_eq!(
            m["metadata"]["resourceVersion"],
            before["metadata"]["resourceVersion"]
        );
        assert!(
            rest.iter()
                .any(|i| i["metadata"]["name"] == deleted.as_str()),
            "deleted one still in the snapshot"
        );
        // A fresh list sees the changes.
        let (now, _) = list_all(&c, IDS, 500).await;
        assert!(!now
            .iter()
            .any(|i| i["metadata"]["name"] == deleted.as_str()));
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn compaction_expires_continue_tokens_with_an_inconsistent_continuation() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let first = get(&c, &format!("{IDS}?limit=100")).await.json();
        let cont = first["metadata"]["continue"].as_str().unwrap().to_owned();
        sim.set_heartbeat(&sim.identity_names()[0], Some("2020-01-01T00:00:00Z"))
            .unwrap();
        sim.compact();
        let r = get(&c, &format!("{IDS}?limit=100&continue={cont}")).await;
        assert_eq!(r.status, 410);
        let v = r.json();
        assert_eq!(v["reason"], "Expired");
        assert_eq!(v["code"], 410);
        assert!(v["message"]
            .as_str()
            .unwrap()
            .starts_with("The provided continue parameter is too old"));
        let next = v["metadata"]["continue"]
            .as_str()
            .expect("a token for the inconsistent continuation");
        assert_eq!(decode_token(next)["rv"], -1);
        let rest = get(&c, &format!("{IDS}?limit=1000&continue={next}")).await;
        assert_eq!(rest.status, 200);
        let n = rest.json()["items"].as_array().unwrap().len();
        assert_eq!(n + 100, sim.identity_names().len());
        // An exact list at a compacted rv is gone too.
        let old = get(&c, &format!("{IDS}?limit=5&resourceVersion=3")).await;
        assert_eq!(old.status, 410);
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn metadata_only_lists_and_gets() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let api = identity_api(&c);
        let page = api
            .list_metadata(&ListParams::default().limit(50))
            .await
            .unwrap();
        assert_eq!(page.items.len(), 50);
        assert!(page.metadata.continue_.is_some());
        let name = sim.identity_names()[0].clone();
        let m = api.get_metadata(&name).await.unwrap();
        assert_eq!(m.metadata.name.as_deref(), Some(name.as_str()));
        let accept = [(
            "accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        )];
        let v = raw(&c, Method::GET, &format!("{IDS}?limit=2"), &accept, None)
            .await
            .json();
        assert_eq!(v["kind"], "PartialObjectMetadataList");
        assert_eq!(v["items"][0]["kind"], "PartialObjectMetadata");
        assert!(v["items"][0].get("security-labels").is_none());
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn selectors_filter_and_drop_remaining_count() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let ns = sim.identity(&sim.identity_names()[0]).unwrap()["metadata"]["labels"]
            ["io.kubernetes.pod.namespace"]
            .as_str()
            .unwrap()
            .to_owned();
        let v = get(
            &c,
            &format!("{IDS}?limit=2&labelSelector=io.kubernetes.pod.namespace%3D{ns}"),
        )
        .await
        .json();
        assert!(v["metadata"].get("remainingItemCount").is_none());
        let (items, _) = list_all(
            &c,
            &format!("{IDS}?labelSelector=io.kubernetes.pod.namespace+in+({ns},nowhere)"),
            7,
        )
        .await;
        assert!(!items.is_empty());
        assert!(items
            .iter()
            .all(|i| i["metadata"]["labels"]["io.kubernetes.pod.namespace"] == ns.as_str()));
        let one = get(&c, &format!("{IDS}?fieldSelector=metadata.name%3D256"))
            .await
            .json();
        assert_eq!(one["items"].as_array().unwrap().len(), 1);
        let bad = get(&c, &format!("{IDS}?fieldSelector=metadata.namespace%3Dx")).await;
        assert_eq!(bad.status, 400);
        assert_eq!(
            bad.json()["message"],
            "field label not supported: metadata.namespace"
        );
        let ceps = get(
            &c,
            &format!("/apis/cilium.io/v2/namespaces/{ns}/ciliumendpoints"),
        )
        .await
        .json();
        assert!(ceps["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["metadata"]["namespace"] == ns.as_str()));
        sim.shutdown().await;
    })
    .await
}
