//! `Selector::parse` and `matches` on arbitrary text and labels: never
//! panic, and a parsed selector prints back to text that parses the same.
#![no_main]

use std::collections::BTreeMap;

use cilium_gc_cluster::selector::Selector;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|inp: (String, BTreeMap<String, String>)| {
    let (text, labels) = inp;
    if let Ok(sel) = Selector::parse(&text) {
        let again = Selector::parse(&sel.to_string()).expect("printed selector parses");
        assert_eq!(again.matches(&labels), sel.matches(&labels));
    }
});
