//! The endpoint decoder the usage watchers use: never panics, and never
//! fails on a JSON value (an error would fail a whole list page).
#![no_main]

use cilium_gc_cluster::usage::UsageObject;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoded = serde_json::from_slice::<UsageObject>(data);
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        // Duplicate keys are valid for Value (last wins) but not for the
        // typed decoder; the API server never sends them.
        let text = v.to_string();
        assert!(
            serde_json::from_str::<UsageObject>(&text).is_ok(),
            "a JSON value failed to decode: {text}"
        );
    }
    drop(decoded);
});
