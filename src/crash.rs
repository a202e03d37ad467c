//! A bug must still end the run in a report (docs/safety.md, "Bugs").
//!
//! The panic hook prints one line on stderr (how to get a backtrace) and
//! stops every registered run with [`Stop::fail`]; the panicking task
//! unwinds. A panic in the run's own task is caught by `gc::run`; one in
//! another task (a watcher, a worker) reaches the run through the stop. The
//! run then ends as any stop does: `aborted: internal-error`, the report
//! written with what was known, exit 1.

use std::sync::Mutex;

use cilium_gc::Stop;

/// The runs a panic must stop.
static STOPS: Mutex<Vec<Stop>> = Mutex::new(Vec::new());

/// Stop `stop` with [`cilium_gc::StopReason::InternalError`] on any panic
/// in the process.
pub fn stop_on_panic(stop: &Stop) {
    STOPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(stop.clone());
}

/// Install the hook. With `RUST_BACKTRACE` set (and not `0`), the standard
/// hook prints the message and the backtrace first.
pub fn install_panic_hook() {
    let standard = std::panic::take_hook();
    let backtrace = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
    std::panic::set_hook(Box::new(move |info| {
        let what = cilium_gc::panic_text(info.payload());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = format!("{what}{at}");
        if backtrace {
            standard(info);
        } else {
            eprintln!(
                "error: internal error: {message} (a bug: please report it; run with RUST_BACKTRACE=1 for a backtrace)"
            );
        }
        let stops = STOPS.lock().unwrap_or_else(|e| e.into_inner());
        for s in stops.iter() {
            s.fail(message.clone());
        }
    }));
}
