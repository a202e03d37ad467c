//! `demo`: start the simulated cluster and run the real code path against it,
//! through a kubeconfig and real HTTPS, exactly as against a real cluster.
//! Only with the `sim` feature (on by default).

use std::path::Path;

use cilium_gc::Exit;
use cilium_gc::GcSettings;
use cilium_gc::Stop;
use cilium_gc_sim::{Scenario, Simulator};

use super::gc_run::{fleet_and_emit, gc_and_emit, gc_report_and_emit};
use super::sim::{scenario, start};
use crate::cli::DemoArgs;
use crate::views::format::ColorChoice;

/// The demo's delete flags (it implies `--yes`) and the engine's settings.
fn demo_settings(
    mut delete: crate::cli::DeleteArgs,
    scan_only: bool,
) -> (
    crate::cli::DeleteArgs,
    Result<GcSettings, cilium_gc::SettingsError>,
) {
    delete.yes = true;
    let settings = if scan_only {
        GcSettings::for_scan(delete.scan.settings())
    } else {
        GcSettings::for_delete(delete.scan.settings(), delete.writes())
    };
    (delete, settings)
}

/// The clusters of `demo --fleet`: context name and preset.
pub(crate) const FLEET: [(&str, &str); 4] = [
    ("prod-eu", "demo"),
    ("prod-us", "small"),
    ("staging-forbidden", "forbidden"),
    ("legacy-kvstore", "kvstore"),
];
/// The context of `demo --fleet` that nobody answers.
pub(crate) const FLEET_UNREACHABLE: &str = "dr-unreachable";

/// `demo --fleet`: the [`FLEET`] simulators and an unreachable context in
/// one kubeconfig, and the fleet run over all of them.
async fn run_fleet(args: DemoArgs, stop: &Stop, color: ColorChoice) -> Exit {
    let (delete, settings) = demo_settings(args.delete, args.scan_only);
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a temporary directory: {e}");
            return Exit::Unexpected;
        }
    };
    let mut sims = Vec::new();
    for (name, preset) in FLEET {
        let mut scenario = scenario(preset).unwrap_or_default();
        if name == "prod-eu" {
            // The operator version of the outage this tool exists for.
            if let Some(install) = scenario.cilium_install.as_mut() {
                install.operator_image = "quay.io/cilium/operator-generic:v1.15.3".into();
            }
        }
        match Simulator::start(scenario).await {
            Ok(sim) => sims.push((name, sim)),
            Err(e) => {
                eprintln!("error: cannot start the simulated cluster {name}: {e}");
                for (_, s) in sims {
                    s.shutdown().await;
                }
                return Exit::Unexpected;
            }
        }
    }
    // A port that was free a moment ago: connections to it are refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| format!("https://{a}"))
        .unwrap_or_else(|_| "https://127.0.0.1:1".into());
    let named: Vec<(&str, &Simulator)> = sims.iter().map(|(n, s)| (*n, s)).collect();
    let yaml = Simulator::fleet_kubeconfig(&named, &[(FLEET_UNREACHABLE, &closed)]);
    let kubeconfig = dir.path().join("kubeconfig");
    let exit = match std::fs::write(&kubeconfig, yaml) {
        Ok(()) => {
            eprintln!(
                "demo: {} simulated clusters and one unreachable context in {}",
                sims.len(),
                kubeconfig.display()
            );
            let kube = crate::cli::KubeArgs {
                kubeconfig: Some(kubeconfig),
                all_contexts: true,
                ..crate::cli::KubeArgs::default()
            };
            fleet_and_emit(&kube, settings, &delete.scan, stop, color).await
        }
        Err(e) => {
            eprintln!("error: cannot write the kubeconfig: {e}");
            Exit::Unexpected
        }
    };
    for (_, s) in sims {
        s.shutdown().await;
    }
    if exit != Exit::Success {
        eprintln!(
            "demo: exit code {} is the most severe cluster's (143, 130, 1, 4, 5, 3, 2): the failing clusters are part of the demo",
            exit.code()
        );
    }
    exit
}

/// Run `demo`.
pub(super) async fn run(args: DemoArgs, stop: &Stop, color: ColorChoice) -> Exit {
    if args.fleet {
        return run_fleet(args, stop, color).await;
    }
    let scenario = match scenario(&args.scenario) {
        Ok(s) => s,
        Err(e) => return crate::output::usage_error(&e.to_string()),
    };
    let (delete, settings) = demo_settings(args.delete, args.scan_only);
    if let Err(e) = &settings {
        return crate::output::usage_error(&e.to_string());
    }
    let started = match start(scenario.clone()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Unexpected;
        }
    };
    eprintln!(
        "demo: simulated cluster {:?} at {} (kubeconfig {})",
        args.scenario,
        started.sim.url(),
        started
            .kube
            .kubeconfig
            .as_deref()
            .unwrap_or(Path::new("?"))
            .display()
    );
    if args.scan_only {
        let exit = gc_and_emit(&started.kube, settings, &delete.scan, stop, color).await;
        started.sim.shutdown().await;
        return exit;
    }
    // The same cluster again, for cilium-operator 1.15 to collect at the
    // same time and the same write rate, with the same agents at work.
    let copy = match Simulator::start(scenario.clone()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot start the copy of the simulated cluster: {e}");
            started.sim.shutdown().await;
            return Exit::Unexpected;
        }
    };
    // The operator writes through client-go's default limiter (its
    // --k8s-client-qps defaults to 0, which leaves client-go's 5/s): the
    // time between its liveness check and its write is what lets an
    // agent's write turn the write into a 409 (docs/real-cilium.md).
    let (run, pass) = tokio::join!(
        gc_report_and_emit(&started.kube, settings, &delete.scan, stop, color),
        copy.run_operator_1_15_pass(heartbeat_timeout(&scenario), OPERATOR_CLIENT_QPS),
    );
    let in_use_touched = started.sim.ledger().unsafe_deletes().count() as u64;
    started.sim.shutdown().await;
    copy.shutdown().await;
    let (exit, report) = run;
    if let Some(report) = report {
        eprintln!("{}", comparison(&pass, &report.summary, in_use_touched));
    }
    exit
}

/// client-go's default QPS, which cilium-operator's API client keeps
/// unless `--k8s-client-qps` is set.
const OPERATOR_CLIENT_QPS: f64 = 5.0;

/// `identity-heartbeat-timeout` of the scenario's cilium-config (30m when unset).
fn heartbeat_timeout(s: &Scenario) -> std::time::Duration {
    s.cilium_config
        .as_ref()
        .and_then(|c| c.get("identity-heartbeat-timeout"))
        .and_then(|v| humantime::parse_duration(v).ok())
        .unwrap_or(std::time::Duration::from_secs(30 * 60))
}

/// The two runs side by side, numbers from the runs themselves.
pub(crate) fn comparison(
    pass: &cilium_gc_sim::OperatorPass,
    ours: &cilium_gc_documents::report::Summary,
    in_use_touched: u64,
) -> String {
    let operator = match &pass.stopped_at {
        Some(id) => format!(
            "cilium-operator 1.15: stopped after {} deletes at {} (identity {id}); {} of {} stale identities left for the next pass",
            pass.deleted,
            match pass.stopped_by {
                Some(404) => "a 404 (identity already gone)",
                _ => "the first conflict",
            },
            pass.candidates.saturating_sub(pass.deleted),
            pass.candidates
        ),
        None => format!(
            "cilium-operator 1.15: finished its pass with {} deletes and no conflict",
            pass.deleted
        ),
    };
    format!(
        "{operator}\nkubectl cilium-gc:    {} deleted, {} conflicts re-decided, {in_use_touched} in use touched",
        ours.deleted, ours.conflicts
    )
}
