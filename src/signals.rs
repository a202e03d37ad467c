//! SIGINT and SIGTERM become a [`Stop`] of the run: no new write starts after
//! one, in-flight ones finish, and the report is still written.

use cilium_gc::stop::{Stop, StopReason};

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
            loop {
                tokio::select! {
                    _ = int.recv() => stop.trigger(StopReason::Interrupt),
                    _ = term.recv() => stop.trigger(StopReason::Terminate),
                }
                tracing::warn!("stopping: no new deletes; finishing those in flight");
            }
        }
        #[cfg(not(unix))]
        {
            while tokio::signal::ctrl_c().await.is_ok() {
                stop.trigger(StopReason::Interrupt);
            }
        }
    });
}
