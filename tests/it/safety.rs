//! Issue 12, "Fail closed, leak nothing": each safety and security promise
//! pinned against the simulator (or a tiny stand-in server) as a user meets
//! it. https://github.com/kubectl-cilium-gc/kubectl-cilium-gc/issues/12

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use cilium_gc::report::{CheckName, ConfigSource, ErrorKind};
use cilium_gc::Exit;
use cilium_gc_sim::default_cilium_config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::calm;
use crate::support::world::{assert_valid, binary, json, World};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A kubeconfig for the simulator with `user` as the user section and
/// `cluster_extra` added to the cluster section, `server` as the URL.
fn kubeconfig(w: &World, server: &str, cluster_extra: &str, user: &str) -> std::path::PathBuf {
    let ca = base64::engine::general_purpose::STANDARD.encode(w.sim.ca_pem().as_bytes());
    let path = w.dir.path().join(format!("kc-{}", rand::random::<u32>()));
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n{cluster_extra}users:\n- name: sim\n  user:\n{user}contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\ncurrent-context: sim\n"
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The critical one: a failing exec plugin's env values, arguments and
/// output reach no output: not stderr, stdout, the report file, nor
/// `diagnose --redact`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_exec_plugin_leaks_no_secret_anywhere() {
    let w = World::start(calm("small")).await;
    let plugin = w.dir.path().join("cred-plugin");
    std::fs::write(
        &plugin,
        "#!/bin/sh\necho 'token: PRINTED-TOKEN-9f8e7d'\necho \"vault=$VAULT_TOKEN\" >&2\nexit 7\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let user = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      args: [\"--oidc-client-secret=OIDC-SECRET-5a4b3c\"]\n      env:\n      - name: VAULT_TOKEN\n        value: hvs.VAULT-SECRET-1a2b3c\n      interactiveMode: IfAvailable\n",
        plugin.display()
    );
    let kc = kubeconfig(&w, &w.sim.url(), "", &user);
    let secrets = [
        "PRINTED-TOKEN-9f8e7d",
        "OIDC-SECRET-5a4b3c",
        "VAULT-SECRET-1a2b3c",
    ];
    for args in [
        &["scan", "-o", "json"][..],
        &["delete", "--yes", "-o", "json"],
        &["diagnose", "--redact", "-o", "json"],
        &["diagnose", "-o", "text"],
    ] {
        let report = w.dir.path().join("report.json");
        let _ = std::fs::remove_file(&report);
        let mut cmd = binary();
        cmd.arg("--kubeconfig").arg(&kc).args(args);
        if args[0] != "diagnose" {
            cmd.arg("--report-file").arg(&report);
        }
        let out = cmd
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let file = std::fs::read_to_string(&report).unwrap_or_default();
        for s in secrets {
            assert!(!stdout.contains(s), "{args:?} stdout leaks {s}: {stdout}");
            assert!(!stderr.contains(s), "{args:?} stderr leaks {s}: {stderr}");
            assert!(!file.contains(s), "{args:?} report leaks {s}: {file}");
        }
        assert!(
            stderr.contains("cred-plugin") && stderr.contains("exit status 7"),
            "{args:?} names the plugin and its status: {stderr}"
        );
    }
}

/// cilium-config unreadable (a wrong --cilium-namespace): delete refuses
/// unless the mode is stated; the stated mode is in the report; scan warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_cilium_config_refuses_delete_unless_the_mode_is_stated() {
    let w = World::start(calm("kvstore")).await;
    let before = w.names();
    let (r, exit) = w
        .gc(&["delete", "--yes", "--cilium-namespace", "nope"])
        .await;
    assert_eq!(exit, Exit::Refused, "{:?}", r.aborted);
    assert!(r
        .aborted
        .unwrap()
        .message
        .contains("--identity-allocation-mode crd"));
    assert_eq!(w.names(), before);
    let (r, exit) = w.gc(&["scan", "--cilium-namespace", "nope"]).await;
    assert_eq!(exit, Exit::Success);
    assert!(r
        .errors
        .iter()
        .any(|e| e.message.contains("allocation mode is unknown")));

    // Stated explicitly: the run goes on, and the report says where it came from.
    let w = World::start(calm("small")).await;
    let (r, exit) = w
        .gc(&[
            "delete",
            "--yes",
            "--cilium-namespace",
            "nope",
            "--identity-allocation-mode",
            "crd",
        ])
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

/// `--heartbeat-timeout` under 5m is a usage error; under cilium-config's
/// value a refusal; each with an explicit override.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_heartbeat_timeouts_need_an_override() {
    let w = World::start(calm("small")).await;
    let before = w.names();
    let out = w
        .bin(&["delete", "--yes", "--heartbeat-timeout", "0"])
        .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).lines().count(),
        1,
        "{}",
        text(&out.stderr)
    );
    let (r, exit) = w
        .gc(&["delete", "--yes", "--heartbeat-timeout", "10m"])
        .await;
    assert_eq!(exit, Exit::Refused, "{:?}", r.aborted);
    let hb = r
        .preflight
        .checks
        .iter()
        .find(|c| c.name == CheckName::HeartbeatTimeout)
        .unwrap();
    assert!(!hb.passed && hb.message.contains("30m"), "{}", hb.message);
    assert_eq!(w.names(), before);
    let (r, exit) = w
        .gc(&[
            "delete",
            "--yes",
            "--heartbeat-timeout",
            "10m",
            "--allow-short-heartbeat-timeout",
        ])
        .await;
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
        let (r, exit) = w.gc(&["delete", "--yes"]).await;
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
    let (_, exit) = w.gc(&["scan"]).await;
    assert_eq!(exit, Exit::Success);
}

/// `--dry-run=server` carries dryRun=All in the query string too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dry_run_sends_dry_run_in_the_query() {
    let w = World::start(calm("small")).await;
    let before = w.names();
    let (r, exit) = w.gc(&["delete", "--dry-run=server", "--qps", "0"]).await;
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
        let (r, exit) = w.gc(&["delete", "--yes", "--qps", "0"]).await;
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

/// Flags that used to panic end in one line and exit 2.
#[tokio::test]
async fn bad_input_is_a_one_line_usage_error() {
    for args in [
        &["delete", "--qps", "1e-300"][..],
        &["scan", "--cilium-namespace", "a b"],
        &["scan", "-n", "Bad_NS"],
        &["scan", "--token", "abc\ndef", "-s", "https://127.0.0.1:1"],
        &[
            "diagnose",
            "--token",
            "abc\ndef",
            "-s",
            "https://127.0.0.1:1",
        ],
    ] {
        let out = binary().args(args).output().await.unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("internal error"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `--insecure-skip-tls-verify` and a token over plain http are warned
/// about on stderr and in the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_connections_are_warned_about() {
    let w = World::start(calm("small")).await;
    let report = w.dir.path().join("r.json");
    let out = w
        .bin(&[
            "scan",
            "--insecure-skip-tls-verify",
            "-o",
            "json",
            "--report-file",
            report.to_str().unwrap(),
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("TLS certificate verification is disabled"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(doc["errors"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "insecure"));
    // A token over http://: the warning comes before the (failing) connection.
    let out = binary()
        .args([
            "scan",
            "-s",
            "http://127.0.0.1:1",
            "--token",
            "abcdefgh",
            "--request-timeout",
            "2s",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        text(&out.stderr).contains("bearer token is sent over plain http://"),
        "{}",
        text(&out.stderr)
    );
}

/// `--token` replaces every kubeconfig credential (basic auth, an
/// auth-provider, a client certificate and key), as kubectl's does: any of
/// them winning over the token is refused by the simulator, which takes
/// only its bearer token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_flag_replaces_every_kubeconfig_credential() {
    let w = World::start(calm("small")).await;
    let token = w
        .sim
        .kubeconfig_yaml()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: ").map(str::to_owned))
        .unwrap();
    // One kind of credential at a time, so each is shown to be in effect
    // without the flag and replaced with it.
    for user in [
        "    username: admin\n    password: hunter2\n",
        "    auth-provider:\n      name: oidc\n      config:\n        id-token: not-the-token\n        client-id: x\n",
        "    client-certificate: /nonexistent/client.crt\n    client-key: /nonexistent/client.key\n",
    ] {
        let kc = kubeconfig(&w, &w.sim.url(), "", user);
        let run = |with_token: bool| {
            let mut cmd = binary();
            cmd.arg("--kubeconfig").arg(&kc).args(["scan", "-o", "json"]);
            if with_token {
                cmd.args(["--token", &token]);
            }
            cmd.output()
        };
        let out = run(false).await.unwrap();
        assert_ne!(out.status.code(), Some(0), "{user}: refused without --token");
        let out = run(true).await.unwrap();
        assert_eq!(out.status.code(), Some(0), "{user}: {}", text(&out.stderr));
        assert!(json_scanned(&out.stdout) > 0, "{user}");
    }
}

fn json_scanned(stdout: &[u8]) -> u64 {
    let doc: serde_json::Value = serde_json::from_slice(stdout).unwrap();
    doc["summary"]["scanned"].as_u64().unwrap()
}

/// A CONNECT proxy that sends every tunnel to `target`, counting them.
async fn connect_proxy(target: std::net::SocketAddr) -> (String, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = l.accept().await {
            let c = c.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut b).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                if !head.starts_with(b"CONNECT ") {
                    return;
                }
                c.fetch_add(1, Ordering::SeqCst);
                let Ok(mut up) = tokio::net::TcpStream::connect(target).await else {
                    return;
                };
                let _ = client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut up).await;
            });
        }
    });
    (url, count)
}

/// kubeconfig `proxy-url`, `HTTPS_PROXY` and `NO_PROXY` work. The server
/// is named `sim.invalid`, which does not resolve: only the proxy can
/// reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_from_the_kubeconfig_and_the_environment() {
    let w = World::start(calm("small")).await;
    let (proxy, count) = connect_proxy(w.sim.addr()).await;
    let server = format!("https://sim.invalid:{}", w.sim.addr().port());
    let token = format!(
        "    token: {}\n",
        w.sim
            .kubeconfig_yaml()
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .unwrap()
    );
    let with_proxy = kubeconfig(
        &w,
        &server,
        &format!("    proxy-url: {proxy}\n    tls-server-name: localhost\n"),
        &token,
    );
    let plain = kubeconfig(&w, &server, "    tls-server-name: localhost\n", &token);

    let out = binary()
        .arg("--kubeconfig")
        .arg(&with_proxy)
        .args(["scan", "-o", "json"])
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "proxy-url: {}",
        text(&out.stderr)
    );
    let n = count.load(Ordering::SeqCst);
    assert!(n > 0);

    let out = binary()
        .env("HTTPS_PROXY", &proxy)
        .arg("--kubeconfig")
        .arg(&plain)
        .args(["scan", "-o", "json"])
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "HTTPS_PROXY: {}",
        text(&out.stderr)
    );
    assert!(count.load(Ordering::SeqCst) > n);

    let out = binary()
        .env("HTTPS_PROXY", &proxy)
        .env("NO_PROXY", "localhost,.invalid")
        .arg("--kubeconfig")
        .arg(&plain)
        .args(["scan", "-o", "json", "--request-timeout", "5s"])
        .output()
        .await
        .unwrap();
    assert_ne!(
        out.status.code(),
        Some(0),
        "NO_PROXY bypasses the proxy, and sim.invalid does not resolve"
    );
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

fn api_at(url: &str) -> cilium_gc::internals::ApiClient {
    let config = kube::Config::new(url.parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    cilium_gc::internals::ApiClient::new(
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
        cilium_gc::internals::list_raw(
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
    let (r, _) = w.gc(&["scan"]).await;
    assert!(
        !r.errors.iter().any(|e| e.kind == ErrorKind::Warning),
        "the simulator sends Date"
    );

    // Behind a proxy that strips `Date`, the run goes on by the local clock
    // and the report says so, for scan and for delete alike.
    let mut s = calm("small");
    s.faults.omit_date_header = true;
    let w = World::start(s).await;
    for args in [&["scan"][..], &["delete", "--yes"][..]] {
        let (r, exit) = w.gc(args).await;
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
