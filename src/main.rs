//! `kubectl-cilium_gc`: parse, run, map to an exit code. Nothing else.

#![cfg_attr(not(test), deny(clippy::too_many_lines))]

use std::io::IsTerminal;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;

use cilium_gc::Exit;
use clap::FromArgMatches;
use kubectl_cilium_gc::{cli, commands, crash};

fn main() -> ExitCode {
    fix_malloc_mmap_threshold();
    crash::install_panic_hook();
    let argv0 = std::env::args().next().unwrap_or_default();
    let matches = match cli::command(&argv0).try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    let cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return Exit::Usage.into();
        }
    };
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Unexpected.into();
        }
    };
    // A panic the run did not catch (outside scan and delete) has printed
    // its line in the hook: exit 1.
    let exit = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(commands::run(cli))))
        .unwrap_or(Exit::Unexpected);
    // Do not wait for what a stop left behind (a prompt's reader blocked on
    // stdin, a task the stop abandoned): the report is written.
    runtime.shutdown_background();
    exit.into()
}

/// glibc's malloc raises its mmap threshold each time a large block is
/// freed, so after the first list page every later page, response body and
/// report buffer is carved from the heap, and the small long-lived strings
/// allocated between them keep those pages resident once the buffers are
/// freed. A fixed threshold keeps blocks of 128 KiB and more in mappings of
/// their own, returned when freed: that is most of what separated the peak
/// RSS of a 65k-identity run from its peak heap (docs/benchmark.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fix_malloc_mmap_threshold() {
    // SAFETY: mallopt only sets one of malloc's parameters; called first
    // thing in main, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn fix_malloc_mmap_threshold() {}

/// Logs go to stderr; stdout is the report's alone.
fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // kube's own logs only from -vv: its errors are ours to report, once.
    let kube = if verbose >= 2 { level } else { "off" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("KUBECTL_CILIUM_GC_LOG")
        .unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new(format!(
                "kubectl_cilium_gc={level},cilium_gc={level},kube={kube},kube_runtime={kube}"
            ))
        });
    let ansi = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_env_filter(filter)
        .with_target(false)
        .init();
}
