//! Safety under chaos (issue 8), through the binary: signals at random
//! points. The engine's chaos tests (random schedules, malformed objects,
//! spoiled pages, restarts, clock skew) are `crates/cilium-gc/tests/it/chaos/`.
//! Every test judges the run by the simulator's ledger: what the server saw,
//! not what the tool says it did.
//!
//! `CHAOS_CASES=N` runs more random points than the default few.

use std::time::Duration;

use cilium_gc_sim::Scenario;
use jiff::SignedDuration;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::support::calm;
use crate::support::world::{assert_valid, binary, deletes_after, World};

mod signals;

fn calm_sized(identities: usize) -> Scenario {
    Scenario {
        identities,
        endpoints: identities,
        ..calm("small")
    }
}

// Random cases per property: `CHAOS_CASES`, else 6.
use cilium_gc_testkit::chaos_cases as cases;
