//! Real `kubectl` against the simulator (skipped without it, except in CI).

use crate::support::*;

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
