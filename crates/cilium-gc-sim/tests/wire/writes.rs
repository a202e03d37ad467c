//! Writes: delete preconditions and bodies, managed fields and optimistic locking, and the safety ledger.

use crate::support::*;

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
