//! The crates' walls, read from `cargo metadata`: each crate has one job
//! and its dependencies point one way, as docs/architecture.md draws them.
//! The plugin stands on the fleet, the fleet on the writer (`cilium-gc`)
//! and the diagnosis, both of those on the reading layer
//! (`cilium-gc-cluster`), and that on the documents and kinds. The
//! diagnosis is read-only by construction: it never depends on the writer,
//! not even for its tests, and the archive readers and the HMAC are its
//! alone.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Dependencies no crate may have, by crate: each edge would run a job's
/// wall the wrong way. The flag: its tests (dev-dependencies) count too.
const FORBIDDEN: &[(&str, bool, &[&str])] = &[
    (
        "cilium-gc-diagnose",
        true,
        &["cilium-gc", "cilium-gc-fleet"],
    ),
    (
        "cilium-gc",
        false,
        &["cilium-gc-diagnose", "cilium-gc-fleet"],
    ),
    (
        "cilium-gc-cluster",
        false,
        &[
            "cilium-gc",
            "cilium-gc-diagnose",
            "cilium-gc-fleet",
            "cilium-gc-sim",
        ],
    ),
    (
        "cilium-gc-documents",
        false,
        &["cilium-gc-cluster", "cilium-gc", "kube", "tokio"],
    ),
];

/// Heavy dependencies that belong to one crate of the workspace.
const OWNED: &[(&str, &str)] = &[
    ("zip", "cilium-gc-diagnose"),
    ("tar", "cilium-gc-diagnose"),
    ("flate2", "cilium-gc-diagnose"),
    ("ring", "cilium-gc-diagnose"),
];

/// A crate's direct dependencies: (name, a dev-dependency).
type Direct = BTreeMap<String, BTreeSet<(String, bool)>>;

/// What breaks the walls in `metadata` (cargo metadata's JSON): a forbidden
/// dependency, direct or through other workspace crates; or a heavy
/// dependency listed by another crate.
fn violations(metadata: &Value) -> Vec<String> {
    let mut direct = Direct::new();
    for p in metadata["packages"].as_array().expect("packages") {
        let deps = p["dependencies"].as_array().expect("dependencies");
        direct.insert(
            p["name"].as_str().expect("name").to_owned(),
            deps.iter()
                .map(|d| {
                    let name = d["name"].as_str().expect("dependency name").to_owned();
                    (name, d["kind"].as_str() == Some("dev"))
                })
                .collect(),
        );
    }
    let mut found = Vec::new();
    for (krate, with_tests, never) in FORBIDDEN {
        let reach = reachable(&direct, krate, *with_tests);
        for n in *never {
            if reach.contains(*n) {
                found.push(format!("{krate} depends on {n}"));
            }
        }
    }
    for (dep, owner) in OWNED {
        for (krate, deps) in &direct {
            if krate != owner && deps.iter().any(|(d, _)| d == dep) {
                found.push(format!("{krate} lists {dep}, which is {owner}'s alone"));
            }
        }
    }
    found
}

/// Every package `from` reaches through the workspace's own packages: by
/// their normal dependencies, and by `from`'s dev-dependencies too when
/// `with_tests` (a dependency's tests are never linked).
fn reachable(direct: &Direct, from: &str, with_tests: bool) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_owned()];
    while let Some(p) = todo.pop() {
        for (d, dev) in direct.get(&p).into_iter().flatten() {
            let follows = !dev || (with_tests && p == from);
            if follows && d != from && seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

/// This workspace's `cargo metadata`, its own packages only.
fn metadata() -> Value {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(cilium_gc_testkit::repo_path("."))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON")
}

#[test]
fn the_crates_depend_one_way_and_diagnose_never_on_the_writer() {
    let m = metadata();
    // The premise: the crates the walls are about are there.
    let names: BTreeSet<&str> = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for (krate, _, _) in FORBIDDEN {
        assert!(names.contains(krate), "{krate} is not in the workspace");
    }
    let v = violations(&m);
    assert!(
        v.is_empty(),
        "the crates' walls are broken:\n{}",
        v.join("\n")
    );
}

#[test]
fn the_wall_check_sees_diagnose_linking_the_writer() {
    // The control: the same metadata with diagnose depending on the
    // writer (through the fleet, to test the walk) and the writer on zip.
    let mut m = metadata();
    for p in m["packages"].as_array_mut().unwrap() {
        let added = match p["name"].as_str() {
            Some("cilium-gc-diagnose") => "cilium-gc-fleet",
            Some("cilium-gc") => "zip",
            _ => continue,
        };
        let deps = p["dependencies"].as_array_mut().unwrap();
        deps.push(serde_json::json!({ "name": added }));
    }
    let v = violations(&m);
    assert!(
        v.contains(&"cilium-gc-diagnose depends on cilium-gc".to_owned()),
        "{v:?}"
    );
    assert!(
        v.contains(&"cilium-gc lists zip, which is cilium-gc-diagnose's alone".to_owned()),
        "{v:?}"
    );
}
