//! `demo`: start the simulated cluster and run the real code path against it,
//! through a kubeconfig and real HTTPS, exactly as against a real cluster.

use std::time::Duration;

use crate::cli::{DemoArgs, KubeArgs, SimServeArgs};
use crate::exit::Exit;
use crate::gc::{GcSettings, Ui};
use crate::sim::{Scenario, Simulator};
use crate::stop::Stop;

fn scenario(name: &str) -> Result<Scenario, Exit> {
    Scenario::preset(name).ok_or_else(|| {
        eprintln!(
            "error: unknown scenario {name:?}; choose one of: {}",
            Scenario::preset_names().join(", ")
        );
        Exit::Usage
    })
}

/// Run `demo`.
pub async fn run(args: DemoArgs, stop: &Stop, color: crate::render::ColorChoice) -> Exit {
    let scenario = match scenario(&args.scenario) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut delete = args.delete;
    delete.yes = true;
    let settings = if args.scan_only {
        GcSettings::for_scan(delete.scan.clone())
    } else {
        GcSettings::for_delete(delete)
    };
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Usage;
        }
    };
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a temporary directory: {e}");
            return Exit::Unexpected;
        }
    };
    let sim = match Simulator::start(scenario).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot start the simulated cluster: {e}");
            return Exit::Unexpected;
        }
    };
    let kubeconfig = dir.path().join("kubeconfig");
    if let Err(e) = sim.write_kubeconfig(&kubeconfig) {
        eprintln!("error: cannot write the kubeconfig: {e}");
        return Exit::Unexpected;
    }
    eprintln!(
        "demo: simulated cluster {:?} at {} (kubeconfig {})",
        args.scenario,
        sim.url(),
        kubeconfig.display()
    );
    let kube = KubeArgs {
        kubeconfig: Some(kubeconfig),
        ..KubeArgs::default()
    };
    let exit = crate::app::gc_and_emit(&kube, settings, stop, &Ui::detect(), color).await;
    sim.shutdown().await;
    exit
}

/// Run `sim-serve`: a simulated cluster in its own process, for benchmarks.
pub async fn serve(args: SimServeArgs) -> Exit {
    let mut scenario = match scenario(&args.scenario) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if let Some(n) = args.identities {
        scenario.identities = n;
    }
    if let Some(n) = args.endpoints {
        scenario.endpoints = n;
    }
    if args.no_actors {
        scenario.actors = Default::default();
    }
    if args.no_faults {
        scenario.faults = Default::default();
    }
    let sim = match Simulator::start(scenario).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot start the simulated cluster: {e}");
            return Exit::Unexpected;
        }
    };
    if let Err(e) = sim.write_kubeconfig(&args.kubeconfig_out) {
        eprintln!("error: cannot write the kubeconfig: {e}");
        return Exit::Unexpected;
    }
    eprintln!(
        "sim-serve: {} (kubeconfig {})",
        sim.url(),
        args.kubeconfig_out.display()
    );
    let _ = tokio::signal::ctrl_c().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    sim.shutdown().await;
    Exit::Success
}
