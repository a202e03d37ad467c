//! A simulated cluster behind a kubeconfig of its own, for `demo` and
//! `diagnose --demo-scenario`. Only with the `sim` feature.

use std::path::Path;

use cilium_gc::ConnectSettings;
use cilium_gc_sim::{Scenario, Simulator};

/// Why the simulated cluster of `demo` or `diagnose --demo-scenario` is
/// not there. Each message carries its cause (printed as one line).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// No preset has that name (a usage error).
    #[error("unknown scenario {0:?}; choose one of: {list}", list = Scenario::preset_names().join(", "))]
    UnknownScenario(String),
    /// The temporary directory of the kubeconfig could not be created.
    #[error("cannot create a temporary directory: {0}")]
    TempDir(std::io::Error),
    /// The simulator did not start.
    #[error("cannot start the simulated cluster: {0}")]
    Start(cilium_gc_sim::SimError),
    /// The kubeconfig could not be written.
    #[error("cannot write the kubeconfig: {0}")]
    Kubeconfig(std::io::Error),
}

/// The preset called `name`, or a usage error naming the presets.
pub(super) fn scenario(name: &str) -> Result<Scenario, DemoError> {
    Scenario::preset(name).ok_or_else(|| DemoError::UnknownScenario(name.to_owned()))
}

/// A running simulated cluster and the kubeconfig that reaches it.
pub(super) struct Started {
    /// The cluster.
    pub(super) sim: Simulator,
    /// Connection options naming its kubeconfig.
    pub(super) kube: ConnectSettings,
    _dir: tempfile::TempDir,
}

/// Start `scenario` and write its kubeconfig to a temporary directory.
pub(super) async fn start(scenario: Scenario) -> Result<Started, DemoError> {
    let dir = tempfile::tempdir().map_err(DemoError::TempDir)?;
    let sim = Simulator::start(scenario).await.map_err(DemoError::Start)?;
    let kubeconfig = dir.path().join("kubeconfig");
    if let Err(e) = sim.write_kubeconfig(&kubeconfig) {
        sim.shutdown().await;
        return Err(DemoError::Kubeconfig(e));
    }
    Ok(Started {
        sim,
        kube: kube_options(&kubeconfig),
        _dir: dir,
    })
}

fn kube_options(kubeconfig: &Path) -> ConnectSettings {
    ConnectSettings {
        kubeconfig: Some(kubeconfig.to_owned()),
        ..ConnectSettings::default()
    }
}
