//! `cilium-gc-sim`: serve a simulated cluster over HTTPS until Ctrl-C, and
//! write a kubeconfig for it, so that anyone can point `kubectl` or the
//! plugin at it by hand:
//!
//! ```sh
//! cargo run -p cilium-gc-sim -- --scenario hostile --kubeconfig-out /tmp/sim.kubeconfig &
//! kubectl --kubeconfig /tmp/sim.kubeconfig get ciliumidentities --chunk-size=100
//! kubectl cilium-gc --kubeconfig /tmp/sim.kubeconfig scan
//! ```

#![cfg_attr(not(test), deny(clippy::too_many_lines))]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use cilium_gc_sim::{Scenario, Simulator};
use clap::Parser;

/// Serve a simulated Kubernetes API server with Cilium's CRDs, agents and
/// operator until interrupted.
#[derive(Debug, Parser)]
#[command(name = "cilium-gc-sim", version)]
struct Args {
    /// Scenario preset.
    #[arg(long, default_value = "small")]
    scenario: String,
    /// Where to write the kubeconfig.
    #[arg(long, value_name = "PATH")]
    kubeconfig_out: PathBuf,
    /// Override the number of identities.
    #[arg(long)]
    identities: Option<usize>,
    /// Override the number of CiliumEndpoints.
    #[arg(long)]
    endpoints: Option<usize>,
    /// Stop the cluster actors (agents, operator).
    #[arg(long)]
    no_actors: bool,
    /// Inject no faults (the preset's objects on a healthy server).
    #[arg(long)]
    no_faults: bool,
    /// Seed of every random choice (objects, actors, faults) instead of
    /// the preset's (1): the same preset, another draw.
    #[arg(long)]
    seed: Option<u64>,
    /// When the preset's first burst of 429s starts, after the server
    /// starts (`8s`), instead of at once; one every period after it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    burst_offset: Option<Duration>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let Some(mut scenario) = Scenario::preset(&args.scenario) else {
        eprintln!(
            "error: unknown scenario {:?}; choose one of: {}",
            args.scenario,
            Scenario::preset_names().join(", ")
        );
        return ExitCode::from(2);
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
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if let Some(offset) = args.burst_offset {
        scenario.faults.burst_offset = offset;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(serve(scenario, args.kubeconfig_out))
}

async fn serve(scenario: Scenario, kubeconfig: PathBuf) -> ExitCode {
    let sim = match Simulator::start(scenario).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot start the simulated cluster: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = sim.write_kubeconfig(&kubeconfig) {
        eprintln!("error: cannot write the kubeconfig: {e}");
        return ExitCode::from(1);
    }
    eprintln!(
        "cilium-gc-sim: {} (kubeconfig {})",
        sim.url(),
        kubeconfig.display()
    );
    let _ = tokio::signal::ctrl_c().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    sim.shutdown().await;
    ExitCode::SUCCESS
}
