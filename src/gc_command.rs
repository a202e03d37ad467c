//! `scan` and `delete`: run the engine with signals and the terminal, then
//! write the report.

use cilium_gc::exit::Exit;
use cilium_gc::gc::{self, Ui};
use cilium_gc::settings::{ConnectOptions, GcSettings, SettingsError};
use cilium_gc::stop::Stop;

use crate::cli::ScanArgs;
use crate::output::{emit, usage_error};
use crate::progress::Terminal;
use crate::render::ColorChoice;

/// Run scan/delete with signal handling and write the report; settings that
/// did not validate are a usage error (exit 2) before any network call.
pub async fn gc_and_emit(
    kube: &ConnectOptions,
    settings: Result<GcSettings, SettingsError>,
    args: &ScanArgs,
    stop: &Stop,
    color: ColorChoice,
) -> Exit {
    let settings = match settings {
        Ok(s) => s,
        Err(e) => return usage_error(&e.to_string()),
    };
    crate::signals::listen(stop);
    let ui = Ui::new(Terminal::detect());
    let (report, exit) = gc::run(kube, &settings, stop, &ui).await;
    emit(&report, args, exit, color)
}
