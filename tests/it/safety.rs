//! Issue 12, "Fail closed, leak nothing": each safety and security promise
//! that goes through the binary, pinned against the simulator as a user
//! meets it. The promises the engine keeps on its own (refusals, dry-run,
//! misbehaving servers, the Date header) are `crates/cilium-gc/tests/it/safety.rs`.
//! https://github.com/kubectl-cilium-gc/kubectl-cilium-gc/issues/12

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::calm;
use crate::support::world::{binary, Binary, World};

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

/// `--heartbeat-timeout` under 5m is a usage error: one line, exit 2,
/// nothing deleted. (Under cilium-config's value it is a refusal: the
/// engine's `safety::short_heartbeat_timeouts_need_an_override`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_timeout_under_5m_is_a_one_line_usage_error() {
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
    assert_eq!(w.names(), before);
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
