//! The server around the resources: authentication and RBAC, throttling and errors, discovery, restarts, actors and the large preset.

use crate::support::*;

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
