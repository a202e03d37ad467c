//! SIGINT and SIGTERM become a [`Stop`] of the run: no new write starts after
//! one, in-flight ones get a short grace, and the report is still written. A
//! second signal exits the process at once (130 for SIGINT, 143 for
//! SIGTERM), without a report, as people expect of command-line tools.

use cilium_gc::{Stop, StopReason};

/// Trigger `stop` on SIGINT and SIGTERM, for the life of the process.
pub fn listen(stop: &Stop) {
    let stop = stop.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            let mut first = true;
            loop {
                let why = tokio::select! {
                    _ = int.recv() => StopReason::Interrupt,
                    _ = term.recv() => StopReason::Terminate,
                };
                on_signal(&stop, why, std::mem::take(&mut first));
            }
        }
        #[cfg(not(unix))]
        {
            let mut first = true;
            while tokio::signal::ctrl_c().await.is_ok() {
                on_signal(&stop, StopReason::Interrupt, std::mem::take(&mut first));
            }
        }
    });
}

/// The first signal stops the run; a second one exits at once.
fn on_signal(stop: &Stop, why: StopReason, first: bool) {
    if first {
        stop.trigger(why);
        tracing::warn!(
            "stopping: no new deletes, finishing those in flight and writing the report (again to exit at once)"
        );
        return;
    }
    let code = if why == StopReason::Terminate {
        143
    } else {
        130
    };
    eprintln!("error: second signal: exiting at once, without a report");
    std::process::exit(code);
}
