//! `demo`: start the simulated cluster and run the real code path against it,
//! through a kubeconfig and real HTTPS, exactly as against a real cluster.
//! Only with the `sim` feature (on by default).

use std::path::Path;

use cilium_gc::exit::Exit;
use cilium_gc::settings::{ConnectOptions, GcSettings};
use cilium_gc::stop::Stop;
use cilium_gc_sim::{Scenario, Simulator};

use crate::cli::DemoArgs;
use crate::render::ColorChoice;

/// The preset called `name`, or a usage error naming the presets.
pub fn scenario(name: &str) -> Result<Scenario, String> {
    Scenario::preset(name).ok_or_else(|| {
        format!(
            "unknown scenario {name:?}; choose one of: {}",
            Scenario::preset_names().join(", ")
        )
    })
}

/// A running simulated cluster and the kubeconfig that reaches it.
pub struct Started {
    /// The cluster.
    pub sim: Simulator,
    /// Connection options naming its kubeconfig.
    pub kube: ConnectOptions,
    _dir: tempfile::TempDir,
}

/// Start `scenario` and write its kubeconfig to a temporary directory.
pub async fn start(scenario: Scenario) -> Result<Started, String> {
    let dir =
        tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let sim = Simulator::start(scenario)
        .await
        .map_err(|e| format!("cannot start the simulated cluster: {e}"))?;
    let kubeconfig = dir.path().join("kubeconfig");
    if let Err(e) = sim.write_kubeconfig(&kubeconfig) {
        sim.shutdown().await;
        return Err(format!("cannot write the kubeconfig: {e}"));
    }
    Ok(Started {
        sim,
        kube: kube_options(&kubeconfig),
        _dir: dir,
    })
}

fn kube_options(kubeconfig: &Path) -> ConnectOptions {
    ConnectOptions {
        kubeconfig: Some(kubeconfig.to_owned()),
        ..ConnectOptions::default()
    }
}

/// Run `demo`.
pub async fn run(args: DemoArgs, stop: &Stop, color: ColorChoice) -> Exit {
    let scenario = match scenario(&args.scenario) {
        Ok(s) => s,
        Err(e) => return crate::output::usage_error(&e),
    };
    let mut delete = args.delete;
    delete.yes = true;
    let settings = if args.scan_only {
        GcSettings::for_scan(delete.scan.settings())
    } else {
        GcSettings::for_delete(delete.scan.settings(), delete.writes())
    };
    if let Err(e) = &settings {
        return crate::output::usage_error(&e.to_string());
    }
    let started = match start(scenario).await {
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
    let exit =
        crate::gc_command::gc_and_emit(&started.kube, settings, &delete.scan, stop, color).await;
    started.sim.shutdown().await;
    exit
}
