//! Issue 12, "Fail closed, leak nothing": the safety promises the engine
//! keeps, pinned against the simulator (or a tiny stand-in server) with
//! settings as plain values. Moved from `tests/it/safety.rs`; the promises
//! that go through the binary (secrets in every output, bad flags, proxies,
//! credentials) stay there.
//! https://github.com/kubectl-cilium-gc/kubectl-cilium-gc/issues/12

use std::time::Duration;

use cilium_gc::Exit;
use cilium_gc::{GcSettings, ScanSettings};
use cilium_gc_documents::report::{CheckName, ConfigSource, ErrorKind};
use cilium_gc_sim::default_cilium_config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    assert_valid, calm, delete_with, json, scan, scan_with, server_dry_run, unlimited, yes, Engine,
    World,
};

/// `--cilium-namespace nope`, and `--identity-allocation-mode` when given.
fn cilium_namespace_nope(mode: Option<&str>) -> ScanSettings {
    ScanSettings {
        cilium_namespace: "nope".into(),
        identity_allocation_mode: mode.map(str::to_owned),
        ..ScanSettings::default()
    }
}

/// `delete --yes --heartbeat-timeout 10m`, with
/// `--allow-short-heartbeat-timeout` when `allow_short`.
fn ten_minute_timeout(allow_short: bool) -> GcSettings {
    let scan = ScanSettings {
        heartbeat_timeout: Some(Duration::from_secs(10 * 60)),
        allow_short_heartbeat_timeout: allow_short,
        ..ScanSettings::default()
    };
    delete_with(scan, yes())
}

/// `delete --yes`.
fn delete_yes() -> GcSettings {
    delete_with(ScanSettings::default(), yes())
}

/// cilium-config unreadable (a wrong --cilium-namespace): delete refuses
/// unless the mode is stated; the stated mode is in the report; scan warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_cilium_config_refuses_delete_unless_the_mode_is_stated() {
    let w = World::start(calm("kvstore")).await;
    let before = w.names();
    let (r, exit) = w.gc(&delete_with(cilium_namespace_nope(None), yes())).await;
    assert_eq!(exit, Exit::Refused, "{:?}", r.aborted);
    assert!(r
        .aborted
        .unwrap()
        .message
        .contains("--identity-allocation-mode crd"));
    assert_eq!(w.names(), before);
    let (r, exit) = w.gc(&scan_with(cilium_namespace_nope(None))).await;
    assert_eq!(exit, Exit::Success);
    assert!(r
        .errors
        .iter()
        .any(|e| e.message.contains("allocation mode is unknown")));

    // Stated explicitly: the run goes on, and the report says where it came from.
    let w = World::start(calm("small")).await;
    let (r, exit) = w
        .gc(&delete_with(cilium_namespace_nope(Some("crd")), yes()))
        .await;
    assert_eq!(exit, Exit::Success, "{:?}", r.aborted);
    let mode = r
        .cluster
        .cilium_config
        .iter()
        .find(|v| v.key == "identity-allocation-mode")
        .unwrap();
    assert_eq!(
        (mode.value.as_str(), mode.source),
        ("crd", ConfigSource::Flag)
    );
    assert_eq!(r.options.identity_allocation_mode.as_deref(), Some("crd"));
    assert!(r.summary.deleted > 0);
    assert_valid(&json(&r));
}

/// `--heartbeat-timeout` under cilium-config's value is a refusal, with an
/// explicit override. (Under 5m it is a usage error: the plugin's
/// `safety::heartbeat_timeout_under_5m_is_a_one_line_usage_error`, and
/// `run::settings_reject_what_the_flags_would_reject` here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_heartbeat_timeouts_need_an_override() {
    let w = World::start(calm("small")).await;
    let before = w.names();
    let (r, exit) = w.gc(&ten_minute_timeout(false)).await;
    assert_eq!(exit, Exit::Refused, "{:?}", r.aborted);
    let hb = r
        .preflight
        .checks
        .iter()
        .find(|c| c.name == CheckName::HeartbeatTimeout)
        .unwrap();
    assert!(!hb.passed && hb.message.contains("30m"), "{}", hb.message);
    assert_eq!(w.names(), before);
    let (r, exit) = w.gc(&ten_minute_timeout(true)).await;
    assert_eq!(exit, Exit::Success, "{:?}", r.aborted);
    assert!(r.options.allow_short_heartbeat_timeout);
}

/// cluster-id is checked against max-connected-clusters as Cilium does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_id_out_of_range_is_refused() {
    for (id, max) in [("300", "255"), ("1", "300"), ("x", "255")] {
        let mut s = calm("small");
        let mut c = default_cilium_config("crd");
        c.insert("cluster-id".into(), id.into());
        c.insert("max-connected-clusters".into(), max.into());
        s.cilium_config = Some(c);
        let w = World::start(s).await;
        let (r, exit) = w.gc(&delete_yes()).await;
        assert_eq!(exit, Exit::Refused, "{id}/{max}");
        let c = r
            .preflight
            .checks
            .iter()
            .find(|c| c.name == CheckName::ClusterId)
            .unwrap();
        assert!(!c.passed, "{id}/{max}: {}", c.message);
        assert!(w.sim.ledger().deletes.is_empty());
    }
    let mut s = calm("small");
    let mut c = default_cilium_config("crd");
    c.insert("cluster-id".into(), "511".into());
    c.insert("max-connected-clusters".into(), "511".into());
    s.cilium_config = Some(c);
    let w = World::start(s).await;
    let (_, exit) = w.gc(&scan()).await;
    assert_eq!(exit, Exit::Success);
}

/// `--dry-run=server` carries dryRun=All in the query string too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dry_run_sends_dry_run_in_the_query() {
    let w = World::start(calm("small")).await;
    let before = w.names();
    let (r, exit) = w.gc(&server_dry_run()).await;
    assert_eq!(exit, Exit::Success, "{:?}", r.aborted);
    let deletes: Vec<_> = w
        .sim
        .ledger()
        .requests
        .into_iter()
        .filter(|q| q.method == "DELETE")
        .collect();
    assert!(!deletes.is_empty());
    assert!(
        deletes.iter().all(|q| q.path.contains("dryRun=All")),
        "{:?}",
        deletes[0].path
    );
    assert_eq!(w.names(), before);
}

/// CiliumEndpointSlices are read at v2 where the server serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_slices_are_read_at_v2_where_served() {
    for v2 in [false, true] {
        let mut s = calm("slices");
        s.crds.slices_v2 = v2;
        let w = World::start(s).await;
        let (r, exit) = w
            .gc(&delete_with(ScanSettings::default(), unlimited()))
            .await;
        assert_eq!(exit, Exit::Success, "{:?}", r.aborted);
        assert!(r.summary.endpoint_slices > 0);
        let paths: Vec<String> = w
            .sim
            .ledger()
            .requests
            .into_iter()
            .map(|q| q.path)
            .collect();
        let at = |v: &str| {
            paths
                .iter()
                .any(|p| p.starts_with(&format!("/apis/cilium.io/{v}/ciliumendpointslices")))
        };
        assert_eq!((at("v2"), at("v2alpha1")), (v2, !v2), "v2 served: {v2}");
        // Nothing in use was deleted.
        let used = w.sim.referenced_ids();
        assert!(w
            .sim
            .ledger()
            .deletes
            .iter()
            .all(|d| d.name.parse::<u64>().map_or(true, |id| !used.contains(&id))));
    }
}

/// A stand-in server speaking raw HTTP/1.1: `answer(path)` gives status,
/// extra header lines and body. No `Date` header unless given.
async fn raw_server(answer: fn(&str) -> (u16, String, Vec<u8>)) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                loop {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if s.read(&mut b).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(b[0]);
                    }
                    let h = String::from_utf8_lossy(&head);
                    let path = h.split(' ').nth(1).unwrap_or("/").to_owned();
                    let (code, extra, body) = answer(&path);
                    let resp = format!(
                        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n",
                        body.len()
                    );
                    if s.write_all(resp.as_bytes()).await.is_err()
                        || s.write_all(&body).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    url
}

fn api_at(url: &str) -> cilium_gc_cluster::ApiClient {
    let config = kube::Config::new(url.parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    cilium_gc_cluster::ApiClient::new(
        client,
        Default::default(),
        Some(Duration::from_secs(10)),
        Default::default(),
    )
}

/// A server repeating its continue token is stopped with a clear error; a
/// redirect names status and Location; no Date header is noticed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_servers_end_in_clear_errors() {
    let url = raw_server(|path| {
        if path.starts_with("/moved") {
            (
                301,
                "Location: https://elsewhere.example/api\r\n".into(),
                Vec::new(),
            )
        } else if path.starts_with("/big") {
            (200, String::new(), vec![b' '; 3 << 20])
        } else {
            (
                200,
                String::new(),
                br#"{"metadata":{"continue":"same"},"items":[]}"#.to_vec(),
            )
        }
    })
    .await;
    let mut api = api_at(&url);
    let stop = cilium_gc::Stop::default();
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        cilium_gc_cluster::scan::list_raw(
            &api,
            "/apis/cilium.io/v2/ciliumidentities",
            10,
            0,
            &stop,
            |_| {},
        ),
    )
    .await
    .expect("the loop ends");
    let e = r.unwrap_err().to_string();
    assert!(e.contains("continue token it had already returned"), "{e}");
    assert!(api.clock.local_clock_used(), "no Date header was seen");

    let a = api.get("/moved", 0).await;
    assert!(
        a.message.contains("301") && a.message.contains("https://elsewhere.example/api"),
        "{}",
        a.message
    );

    api.max_body = 1 << 20;
    let a = api.get("/big", 0).await;
    assert!(a.message.contains("larger than"), "{}", a.message);
    assert!(!a.class.is_retryable());
}

/// The report says when mark ages were judged by the local clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_warns_when_the_server_sends_no_date() {
    let w = World::start(calm("small")).await;
    let (r, _) = w.gc(&scan()).await;
    assert!(
        !r.errors.iter().any(|e| e.kind == ErrorKind::Warning),
        "the simulator sends Date"
    );

    // Behind a proxy that strips `Date`, the run goes on by the local clock
    // and the report says so, for scan and for delete alike.
    let mut s = calm("small");
    s.faults.omit_date_header = true;
    let w = World::start(s).await;
    for (args, settings) in [("scan", scan()), ("delete --yes", delete_yes())] {
        let (r, exit) = w.gc(&settings).await;
        assert_eq!(exit, Exit::Success, "{args:?}: {:?}", r.aborted);
        let warned = r
            .errors
            .iter()
            .filter(|e| e.kind == ErrorKind::Warning && e.message.contains("Date header"))
            .count();
        assert_eq!(warned, 1, "{args:?}: one Date warning: {:?}", r.errors);
    }
    assert!(
        w.sim.ledger().count("delete", 200) > 0,
        "delete still deletes by the local clock"
    );
}
