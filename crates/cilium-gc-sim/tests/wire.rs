//! The simulated API server's wire semantics, pinned against its answers
//! with the real kube client (and real kubectl when it is on PATH). Each
//! test states the apiserver behaviour it relies on (see
//! k8s-api-semantics.md). Only the simulator and kube are used here: the
//! simulator tests itself, without the engine or the plugin.

use std::path::Path;
use std::time::Duration;

use cilium_gc_sim::Kind;
use cilium_gc_sim::{ActorRates, Denial, Faults, Scenario, Simulator, ThrottleShape};
use futures::{StreamExt, TryStreamExt};
use http::{HeaderMap, Method, Request, StatusCode};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::{json, Value};

const IDS: &str = "/apis/cilium.io/v2/ciliumidentities";
const LIMIT: Duration = Duration::from_secs(60);

/// Whether `CI=true`: in CI a test whose tool is missing fails, since
/// `.ci/run` installs every tool; only a developer's machine may skip.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Fail, showing stderr, unless the command succeeded.
fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run a test body with a timeout so a hung server fails instead of hanging.
async fn timed<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test timed out");
}

/// The small preset with actors off (tests turn on what they need).
fn quiet(name: &str) -> Scenario {
    Scenario {
        actors: ActorRates::default(),
        ..Scenario::preset(name).expect("preset")
    }
}

async fn client_from_yaml(yaml: &str) -> Client {
    let kc = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    cfg.default_retry = false;
    Client::try_from(cfg).expect("client")
}

async fn client(sim: &Simulator) -> Client {
    client_from_yaml(&sim.kubeconfig_yaml()).await
}

struct Resp {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

async fn raw(
    c: &Client,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Resp {
    let mut b = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let body = body.map(|v| v.to_string().into_bytes()).unwrap_or_default();
    if !body.is_empty()
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        b = b.header("content-type", "application/json");
    }
    let resp = c
        .send(b.body(kube::client::Body::from(body)).unwrap())
        .await
        .expect("send");
    let (parts, body) = resp.into_parts();
    let bytes = body.collect_bytes().await.expect("body");
    Resp {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

async fn get(c: &Client, path: &str) -> Resp {
    raw(c, Method::GET, path, &[], None).await
}

fn identity_api(c: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cilium.io", "v2", "CiliumIdentity"),
        "ciliumidentities",
    );
    Api::all_with(c.clone(), &ar)
}

fn decode_token(t: &str) -> Value {
    use base64::Engine;
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t)
        .expect("base64url");
    serde_json::from_slice(&b).expect("token json")
}

/// All pages of a list, following `continue`; returns (items, rv of each page).
async fn list_all(c: &Client, base: &str, limit: usize) -> (Vec<Value>, Vec<String>) {
    let (mut items, mut rvs) = (Vec::new(), Vec::new());
    let mut cont = String::new();
    loop {
        let sep = if base.contains('?') { '&' } else { '?' };
        let r = get(c, &format!("{base}{sep}limit={limit}&continue={cont}")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        items.extend(v["items"].as_array().unwrap().iter().cloned());
        rvs.push(
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        match v["metadata"]["continue"].as_str() {
            Some(t) => cont = t.to_owned(),
            None => return (items, rvs),
        }
    }
}

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
async fn delete_preconditions_404_dry_run_and_success_bodies() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let name = sim.identity_names()[3].clone();
        let obj = get(&c, &format!("{IDS}/{name}")).await.json();
        let (uid, rv) = (obj["metadata"]["uid"].as_str().unwrap().to_owned(), obj["metadata"]["resourceVersion"].as_str().unwrap().to_owned());
        // An agent reclaims it: the rv moves and the precondition fails.
        sim.set_heartbeat(&name, Some("2020-01-01T00:00:00Z")).unwrap();
        let now_rv = sim.identity(&name).unwrap()["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
        let body = json!({"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":uid,"resourceVersion":rv},"propagationPolicy":"Background"});
        let r = raw(&c, Method::DELETE, &format!("{IDS}/{name}?dryRun=All"), &[], Some(body)).await;
        assert_eq!(r.status, 409, "body wins over the query: a real conflict, not a dry run");
        assert_eq!(
            r.json(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
              "message": format!("Operation cannot be fulfilled on CiliumIdentity.cilium.io \"{name}\": the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({now_rv}). The object might have been modified"),
              "reason":"Conflict","details":{"name":name,"group":"cilium.io","kind":"CiliumIdentity"},"code":409})
        );
        let r = raw(&c, Method::DELETE, &format!("{IDS}/{name}"), &[], Some(json!({"preconditions":{"uid":"nope"}}))).await;
        assert!(r.json()["message"].as_str().unwrap().contains("the UID in the precondition (nope) does not match the UID in record"));
        // Dry run: the answer of a real delete, but nothing goes.
        let dry = json!({"dryRun":["All"],"preconditions":{"uid":uid,"resourceVersion":now_rv}});
        let r = raw(&c, Method::DELETE, &format!("{IDS}/{name}"), &[], Some(dry)).await;
        assert_eq!(r.status, 200);
        assert!(sim.identity(&name).is_some());
        assert!(sim.ledger().deletes.is_empty());
        // The real delete.
        let ok = json!({"preconditions":{"uid":uid,"resourceVersion":now_rv}});
        let r = raw(&c, Method::DELETE, &format!("{IDS}/{name}"), &[], Some(ok)).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json(), json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",
            "details":{"name":name,"group":"cilium.io","kind":"ciliumidentities","uid":uid}}));
        // Now it is gone: 404 with details.
        let r = raw(&c, Method::DELETE, &format!("{IDS}/{name}"), &[], Some(json!({"preconditions":{"uid":uid}}))).await;
        assert_eq!(r.status, 404);
        assert_eq!(r.json(), json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message": format!("ciliumidentities.cilium.io \"{name}\" not found"),"reason":"NotFound",
            "details":{"name":name,"group":"cilium.io","kind":"ciliumidentities"},"code":404}));
        // Invalid options are 422.
        let other = sim.identity_names()[4].clone();
        let r = raw(&c, Method::DELETE, &format!("{IDS}/{other}"), &[], Some(json!({"dryRun":["Some"]}))).await;
        assert_eq!(r.status, 422);
        let l = sim.ledger();
        assert_eq!(l.deletes.len(), 1);
        assert!(l.deletes[0].preconditions);
        assert_eq!(l.count("delete", 409), 2);
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn ledger_flags_in_use_deletes_and_actor_changes_after_read() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let used = *sim.referenced_ids().iter().next().unwrap();
        let ua = [("user-agent", "gc-test/0.1")];
        let r = raw(&c, Method::DELETE, &format!("{IDS}/{used}"), &ua, None).await;
        assert_eq!(r.status, 200);
        let stale = sim
            .identity_names()
            .into_iter()
            .find(|n| {
                n.parse::<u64>()
                    .is_ok_and(|id| !sim.referenced_ids().contains(&id))
            })
            .unwrap();
        assert_eq!(get(&c, &format!("{IDS}/{stale}")).await.status, 200);
        sim.set_heartbeat(&stale, None).unwrap();
        assert_eq!(
            raw(&c, Method::DELETE, &format!("{IDS}/{stale}"), &[], None)
                .await
                .status,
            200
        );
        let l = sim.ledger();
        assert_eq!(l.deletes.len(), 2);
        assert!(l.deletes[0].referenced, "in-use identity recorded as such");
        assert!(!l.deletes[0].preconditions);
        assert_eq!(l.deletes[0].user_agent, "gc-test/0.1");
        assert!(!l.deletes[1].referenced);
        assert!(l.deletes[1].actor_changed_since_read);
        assert!(l.actor_touched.contains(&stale));
        assert_eq!(l.unsafe_deletes().count(), 1);
        assert!(l
            .requests
            .iter()
            .any(|q| q.verb == "delete" && q.status == 200));
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn writes_keep_managed_fields_generation_and_optimistic_locking() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        let name = sim.identity_names()[7].clone();
        let path = format!("{IDS}/{name}");
        let merge = [("content-type", "application/merge-patch+json")];
        let patch = json!({"metadata":{"annotations":{"example.com/note":"hello"}}});
        let r = raw(&c, Method::PATCH, &format!("{path}?fieldManager=kubectl-annotate"), &merge, Some(patch.clone())).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        assert_eq!(v["metadata"]["generation"], 1, "metadata-only change keeps generation");
        let mf = v["metadata"]["managedFields"].as_array().unwrap();
        let e = mf.iter().find(|e| e["manager"] == "kubectl-annotate").expect("manager recorded");
        assert_eq!(e["operation"], "Update");
        assert_eq!(e["fieldsV1"], json!({"f:metadata":{"f:annotations":{"f:example.com/note":{}}}}));
        // Same patch again: nothing changes, so rv and managedFields stay.
        let again = raw(&c, Method::PATCH, &format!("{path}?fieldManager=other"), &merge, Some(patch)).await.json();
        assert_eq!(again["metadata"]["resourceVersion"], v["metadata"]["resourceVersion"]);
        assert_eq!(again["metadata"]["managedFields"], v["metadata"]["managedFields"]);
        // Without fieldManager the User-Agent up to '/' is the manager.
        let r = raw(&c, Method::PATCH, &path, &[("content-type", "application/merge-patch+json"), ("user-agent", "gc-test/1.2 (linux)")],
            Some(json!({"security-labels":{"k8s:extra":"x"}}))).await.json();
        assert!(r["metadata"]["managedFields"].as_array().unwrap().iter().any(|e| e["manager"] == "gc-test"));
        assert_eq!(r["metadata"]["generation"], 2, "a change outside metadata bumps generation");
        // A stale resourceVersion in a merge patch is a precondition.
        let stale = json!({"metadata":{"resourceVersion":"1","annotations":{"a":"b"}}});
        let r = raw(&c, Method::PATCH, &path, &merge, Some(stale)).await;
        assert_eq!(r.status, 409);
        assert_eq!(r.json()["message"], format!("Operation cannot be fulfilled on ciliumidentities.cilium.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"));
        // Strategic merge is not for CRs.
        let r = raw(&c, Method::PATCH, &path, &[("content-type", "application/strategic-merge-patch+json")], Some(json!({}))).await;
        assert_eq!(r.status, 415);
        assert_eq!(r.json()["reason"], "UnsupportedMediaType");
        // PUT: stale rv 409, missing rv 422.
        let mut cur = r_get(&c, &path).await;
        cur["metadata"]["resourceVersion"] = json!("2");
        assert_eq!(raw(&c, Method::PUT, &path, &[], Some(cur.clone())).await.status, 409);
        cur["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        assert_eq!(raw(&c, Method::PUT, &path, &[], Some(cur)).await.status, 422);
        // Create: 201, then 409 AlreadyExists.
        let new = json!({"apiVersion":"cilium.io/v2","kind":"CiliumIdentity","metadata":{"name":"99999"},"security-labels":{"k8s:a":"b"}});
        let r = raw(&c, Method::POST, IDS, &[], Some(new.clone())).await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert!(r.json()["metadata"]["uid"].is_string());
        let r = raw(&c, Method::POST, IDS, &[], Some(new)).await;
        assert_eq!((r.status.as_u16(), r.json()["reason"].clone()), (409, json!("AlreadyExists")));
        sim.shutdown().await;
    })
    .await
}

async fn r_get(c: &Client, path: &str) -> Value {
    get(c, path).await.json()
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

#[tokio::test]
async fn authentication_rbac_and_access_reviews() {
    timed(async {
        let sim = Simulator::start(quiet("forbidden")).await.unwrap();
        let bad = client_from_yaml(&sim.kubeconfig_yaml().replace("sim-token-", "bad-token-")).await;
        let r = get(&bad, IDS).await;
        assert_eq!(r.status, 401);
        assert_eq!(r.json(), json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}));
        let c = client(&sim).await;
        let r = raw(&c, Method::DELETE, &format!("{IDS}/300"), &[], None).await;
        assert_eq!(r.status, 403);
        assert_eq!(r.json(), json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"ciliumidentities.cilium.io \"300\" is forbidden: User \"sim-admin\" cannot delete resource \"ciliumidentities\" in API group \"cilium.io\" at the cluster scope",
            "reason":"Forbidden","details":{"name":"300","group":"cilium.io","kind":"ciliumidentities"},"code":403}));
        assert!(sim.identity("300").is_some());
        let ssar = |verb: &str| json!({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
            "spec":{"resourceAttributes":{"group":"cilium.io","version":"v2","resource":"ciliumidentities","verb":verb}}});
        let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        let r = raw(&c, Method::POST, path, &[], Some(ssar("delete"))).await;
        assert_eq!(r.status, 201);
        assert_eq!(r.json()["status"], json!({"allowed": false}));
        let r = raw(&c, Method::POST, path, &[], Some(ssar("list"))).await;
        assert_eq!(r.json()["status"]["allowed"], true);
        assert_eq!(r.json()["spec"]["resourceAttributes"]["verb"], "list");
        sim.set_rbac_denials(vec![Denial::new("list", "*")]);
        let r = get(&c, IDS).await;
        assert_eq!(r.json()["message"], "ciliumidentities.cilium.io is forbidden: User \"sim-admin\" cannot list resource \"ciliumidentities\" in API group \"cilium.io\" at the cluster scope");
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn throttling_and_server_errors_have_real_shapes() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let c = client(&sim).await;
        sim.set_faults(Faults {
            throttle_fraction: 1.0,
            retry_after_secs: 3,
            ..Faults::default()
        });
        let r = get(&c, IDS).await;
        assert_eq!(r.status, 429);
        assert_eq!(r.body, "Too many requests, please try again later.\n");
        assert_eq!(r.headers["retry-after"], "3");
        assert!(r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"));
        sim.set_faults(Faults {
            throttle_fraction: 1.0,
            throttle_shape: ThrottleShape::Status,
            retry_after_secs: 2,
            ..Faults::default()
        });
        let r = get(&c, IDS).await;
        assert_eq!(r.status, 429);
        assert_eq!(r.headers["retry-after"], "2");
        let v = r.json();
        assert_eq!(
            (
                v["reason"].clone(),
                v["details"]["retryAfterSeconds"].clone()
            ),
            (json!("TooManyRequests"), json!(2))
        );
        for (f, code, reason) in [
            (
                Faults {
                    error_500_fraction: 1.0,
                    ..Faults::default()
                },
                500,
                "InternalError",
            ),
            (
                Faults {
                    error_503_fraction: 1.0,
                    ..Faults::default()
                },
                503,
                "ServiceUnavailable",
            ),
            (
                Faults {
                    error_504_fraction: 1.0,
                    ..Faults::default()
                },
                504,
                "Timeout",
            ),
        ] {
            sim.set_faults(f);
            let r = get(&c, IDS).await;
            assert_eq!(
                (r.status.as_u16(), r.json()["reason"].clone()),
                (code, json!(reason))
            );
        }
        // A delete rate cap answers excess deletes with 429.
        sim.set_faults(Faults {
            delete_rate_cap: Some(2.0),
            ..Faults::default()
        });
        let mut throttled = 0;
        for n in &sim.identity_names()[..10] {
            if raw(&c, Method::DELETE, &format!("{IDS}/{n}"), &[], None)
                .await
                .status
                == 429
            {
                throttled += 1;
            }
        }
        assert!(throttled >= 5, "{throttled}");
        // Discovery is never faulted; resets break the response.
        sim.set_faults(Faults {
            reset_fraction: 1.0,
            ..Faults::default()
        });
        assert_eq!(get(&c, "/apis").await.status, 200);
        let req = Request::builder()
            .uri(IDS)
            .body(kube::client::Body::from(Vec::new()))
            .unwrap();
        let broken = match c.send(req).await {
            Err(_) => true,
            Ok(resp) => resp.into_body().collect_bytes().await.is_err(),
        };
        assert!(broken, "a reset must surface as an error");
        sim.set_faults(Faults::default());
        let l = sim.ledger();
        assert!(l.count("list", 429) >= 2);
        assert!(l.requests.iter().any(|q| q.retry_after == Some(3)));
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn discovery_crds_config_and_absent_crds() {
    timed(async {
        let sim = Simulator::start(quiet("kvstore")).await.unwrap();
        let c = client(&sim).await;
        let apis = get(&c, "/apis").await.json();
        assert!(apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "cilium.io"));
        let v2 = get(&c, "/apis/cilium.io/v2").await.json();
        let names: Vec<&str> = v2["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"ciliumidentities") && names.contains(&"ciliumendpoints"));
        let crd = get(
            &c,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ciliumidentities.cilium.io",
        )
        .await
        .json();
        assert_eq!(crd["spec"]["names"]["kind"], "CiliumIdentity");
        let cm = get(
            &c,
            "/api/v1/namespaces/kube-system/configmaps/cilium-config",
        )
        .await
        .json();
        assert_eq!(cm["data"]["identity-allocation-mode"], "kvstore");
        sim.shutdown().await;

        let sim = Simulator::start(Scenario {
            cilium_config: None,
            ..quiet("missing-crd")
        })
        .await
        .unwrap();
        let c = client(&sim).await;
        let r = get(&c, IDS).await;
        assert_eq!(
            (r.status.as_u16(), r.body.as_str()),
            (404, "404 page not found\n")
        );
        let r = get(
            &c,
            "/api/v1/namespaces/kube-system/configmaps/cilium-config",
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.json()["reason"].clone()),
            (404, json!("NotFound"))
        );
        let r = get(
            &c,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ciliumidentities.cilium.io",
        )
        .await;
        assert_eq!(r.status, 404);
        sim.shutdown().await;

        let sim = Simulator::start(quiet("no-cep-crd")).await.unwrap();
        let c = client(&sim).await;
        assert_eq!(
            get(&c, "/apis/cilium.io/v2/ciliumendpoints").await.status,
            404
        );
        assert_eq!(get(&c, "/apis/cilium.io/v2alpha1").await.status, 404);
        assert_eq!(get(&c, IDS).await.status, 200);
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn restart_keeps_port_objects_and_kubeconfig() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let (url, kc) = (sim.url(), sim.kubeconfig_yaml());
        let name = sim.identity_names()[0].clone();
        sim.delete_object(Kind::Identity, &name, "test", false)
            .unwrap();
        let rv = sim.resource_version();
        let sim = sim.restart().await.unwrap();
        assert_eq!(sim.url(), url);
        assert_eq!(sim.resource_version(), rv);
        let c = client_from_yaml(&kc).await;
        assert_eq!(get(&c, &format!("{IDS}/{name}")).await.status, 404);
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn actors_change_objects_and_pause() {
    timed(async {
        let scenario = Scenario {
            actors: ActorRates {
                agent_reclaim: 50.0,
                reuse: 20.0,
                operator_mark: 50.0,
                identity_churn: 10.0,
                endpoint_churn: 20.0,
                ..ActorRates::default()
            },
            ..Scenario::preset("small").unwrap()
        };
        let sim = Simulator::start(scenario).await.unwrap();
        let rv0 = sim.resource_version();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(sim.resource_version() > rv0 + 10);
        let touched = sim.ledger().actor_touched;
        assert!(!touched.is_empty());
        sim.pause_actors();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let rv1 = sim.resource_version();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(sim.resource_version(), rv1, "paused actors write nothing");
        let reclaimed = touched.iter().filter_map(|n| sim.identity(n)).find(|v| {
            v["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["manager"] == "cilium-agent" && e["time"].is_string())
        });
        assert!(reclaimed.is_some());
        sim.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn seed_preset_loads_quickly() {
    timed(async {
        let sim = Simulator::start(Scenario {
            actors: ActorRates::default(),
            ..Scenario::preset("seed").unwrap()
        })
        .await
        .unwrap();
        assert_eq!(sim.count(Kind::Identity), 65_001);
        assert_eq!(sim.count(Kind::Endpoint), 15_000);
        eprintln!("seed scenario loaded in {:?}", sim.seed_time);
        assert!(
            sim.seed_time < Duration::from_secs(30),
            "{:?}",
            sim.seed_time
        );
        sim.shutdown().await;
    })
    .await
}

// ---- real kubectl ----

fn kubectl(home: &Path, kubeconfig: &Path, args: &[&str]) -> Option<std::process::Output> {
    let out = std::process::Command::new("kubectl")
        .args(args)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .env("HOME", home)
        .env("KUBECONFIG", kubeconfig)
        .output();
    match out {
        Ok(o) => Some(o),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                !in_ci(),
                "kubectl not found and CI=true: the kubectl tests cannot run (.ci/run installs it)"
            );
            eprintln!("kubectl not found: SKIPPING kubectl test");
            None
        }
        Err(e) => panic!("kubectl: {e}"),
    }
}

async fn run_kubectl(home: &Path, kc: &Path, args: &[&str]) -> Option<std::process::Output> {
    let (home, kc) = (home.to_owned(), kc.to_owned());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl(&home, &kc, &a)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_in_chunks_and_deletes() {
    timed(async {
        let sim = Simulator::start(quiet("small")).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kc = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kc).unwrap();
        let Some(out) = run_kubectl(
            dir.path(),
            &kc,
            &["get", "ciliumidentities", "--chunk-size=100", "-o", "name"],
        )
        .await
        else {
            return;
        };
        assert_ok(&out);
        let listed = String::from_utf8_lossy(&out.stdout).lines().count();
        assert_eq!(listed, sim.identity_names().len());
        assert!(
            sim.ledger().count("list", 200) >= 4,
            "chunked: several pages"
        );

        let name = sim.identity_names()[1].clone();
        let out = run_kubectl(
            dir.path(),
            &kc,
            &["delete", "ciliumidentity", &name, "--wait=false"],
        )
        .await
        .unwrap();
        assert_ok(&out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("ciliumidentity.cilium.io \"{name}\" deleted")
        );
        assert!(sim.identity(&name).is_none());

        let name = sim.identity_names()[2].clone();
        let out = run_kubectl(
            dir.path(),
            &kc,
            &["delete", "ciliumidentity", &name, "--timeout=20s"],
        )
        .await
        .unwrap();
        assert_ok(&out);
        assert!(sim.identity(&name).is_none());
        let d = sim.ledger().deletes;
        assert_eq!(d.len(), 2);
        assert!(d[0].user_agent.starts_with("kubectl"));

        let out = run_kubectl(
            dir.path(),
            &kc,
            &[
                "get",
                "ciliumendpoints",
                "-A",
                "--chunk-size=50",
                "-o",
                "name",
            ],
        )
        .await
        .unwrap();
        assert_ok(&out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count(),
            sim.endpoint_keys().len()
        );
        sim.shutdown().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reports_missing_crd() {
    timed(async {
        let sim = Simulator::start(quiet("missing-crd")).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kc = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kc).unwrap();
        let Some(out) = run_kubectl(dir.path(), &kc, &["get", "ciliumidentities"]).await else {
            return;
        };
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr)
            .contains("the server doesn't have a resource type \"ciliumidentities\""));
        sim.shutdown().await;
    })
    .await
}
