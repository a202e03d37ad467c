//! The engine's one integration test binary: every test that runs the
//! engine with settings as plain values (no clap, no plugin) against the
//! simulated API server, one module per area. Shared code is `support`
//! (the world itself is `cilium-gc-testkit`'s).

mod support;

/// One run end to end: what the server holds afterwards.
mod run;

/// Scan and delete end to end: preconditions, conflicts, rates, refusals.
mod sweep;

/// `-l`, `-n`, `--min-age`: only what is selected is touched.
mod narrowing;

/// Fail closed: what must refuse a run, and what it must never touch.
mod safety;

/// A struggling API server: throttling, errors, usage going dark.
mod struggling;

/// The fuzz targets' properties, as ordinary tests.
mod properties;

/// Safety under chaos: random faults and actors, malformed objects.
mod chaos;
