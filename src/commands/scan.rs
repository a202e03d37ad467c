//! `scan` and `delete`: the engine's settings from the flags (validated by
//! the engine before any network call), run on the one cluster the flags
//! name, or on every context of a fleet selection.

use cilium_gc::Exit;
use cilium_gc::Stop;
use cilium_gc::{GcSettings, SettingsError};

use super::gc_run::{fleet_and_emit, gc_and_emit};
use crate::cli::{KubeArgs, ScanArgs};
use crate::views::format::ColorChoice;

/// Run scan or delete (`settings`) on one cluster, or on each context of
/// the selection when `fleet`, and write the report.
pub(super) async fn run(
    kube: &KubeArgs,
    fleet: bool,
    settings: Result<GcSettings, SettingsError>,
    args: &ScanArgs,
    (stop, color): (&Stop, ColorChoice),
) -> Exit {
    if fleet {
        return fleet_and_emit(kube, settings, args, stop, color).await;
    }
    gc_and_emit(&kube.settings(), settings, args, stop, color).await
}
