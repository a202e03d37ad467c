//! `model::decode_identity` on arbitrary JSON: never panics, and an
//! identity it accepts always has what a safe delete needs.
#![no_main]

use cilium_gc_cluster::model::decode_identity;
use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(raw) = serde_json::from_str::<Box<RawValue>>(text) else {
        return;
    };
    match decode_identity(&raw) {
        Ok(i) => {
            assert!(!i.name.is_empty() && !i.uid.is_empty() && !i.resource_version.is_empty());
        }
        Err(bad) => assert!(!bad.problem.is_empty()),
    }
});
