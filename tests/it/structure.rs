//! docs/architecture.md's rules on the shape of the code, checked rather
//! than written: every shipped source file is at most 800 lines, and no two
//! modules of a crate import each other, directly or around a circle.
//! (Functions over 80 lines are clippy's `too_many_lines`, denied in every
//! shipped crate's root with `clippy.toml`'s threshold.)
//!
//! The import graph is read from the source text: a module is a file; an
//! arrow goes from a file to the file of every `crate::`/`super::` path it
//! names (in `use` lines, grouped `{...}` included, and inline; not in a
//! `pub use`, which only hands a name on), cut at the deepest module file
//! the path reaches. Parents and children count too: a parent that calls
//! into a child by its relative path (`child::f()`) has an arrow down to
//! it, and a child that uses what its parent holds has one up, so a parent
//! both using and used by its children is a circle (an import that runs
//! back up a floor). A `mod` line and a parent's `pub use` of its children
//! are no arrows: they only declare and hand on. Code after `#[cfg(test)]`
//! is a test and is not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cilium_gc_testkit::repo_path;

/// The longest a shipped source file may be.
const MAX_FILE_LINES: usize = 800;

/// The shipped crates' source folders (tests, benches and fuzz targets are
/// not shipped).
const CRATE_SOURCES: &[&str] = &[
    "src",
    "crates/cilium-gc/src",
    "crates/cilium-gc-cluster/src",
    "crates/cilium-gc-diagnose/src",
    "crates/cilium-gc-fleet/src",
    "crates/cilium-gc-sim/src",
    "crates/cilium-gc-kinds/src",
    "crates/cilium-gc-documents/src",
];

#[test]
fn no_shipped_file_is_over_800_lines() {
    let mut long = Vec::new();
    let mut seen = 0;
    for root in CRATE_SOURCES {
        for file in rust_files(&repo_path(root)) {
            if is_test_file(&file) {
                continue;
            }
            seen += 1;
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > MAX_FILE_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    // The premise: the walk found the sources.
    assert!(seen > 50, "only {seen} shipped files found");
    assert!(
        long.is_empty(),
        "shipped files over {MAX_FILE_LINES} lines (split them by what they do):\n{}",
        long.join("\n")
    );
}

/// The engine's crates: the reading layer, the writer, the diagnosis and
/// the fleet.
const ENGINE_SOURCES: &[&str] = &[
    "crates/cilium-gc-cluster/src",
    "crates/cilium-gc/src",
    "crates/cilium-gc-diagnose/src",
    "crates/cilium-gc-fleet/src",
];

/// The engine's public API reads in its `pub use` lines: no public glob
/// re-export (`pub use x::*`) anywhere in the engine's crates. (How many
/// items the writer and the reading layer have is `.ci/public-items`.)
#[test]
fn the_engine_re_exports_named_items_only() {
    let mut globs = Vec::new();
    let mut re_exports = 0;
    for file in ENGINE_SOURCES
        .iter()
        .flat_map(|root| rust_files(&repo_path(root)))
    {
        let source = std::fs::read_to_string(&file).unwrap();
        let code: String = source
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .map(|line| format!("{line}\n"))
            .collect();
        for statement in code.split(';') {
            // After any attribute or `mod … {` before it.
            let Some(start) = statement.find("pub use ") else {
                continue;
            };
            let statement = &statement[start..];
            re_exports += 1;
            if statement.contains('*') {
                globs.push(format!("{}: {}", file.display(), statement.trim()));
            }
        }
    }
    // The premise: the engine's re-exports were read.
    assert!(re_exports > 10, "only {re_exports} `pub use` read");
    assert!(
        globs.is_empty(),
        "glob re-exports in the engine (name the items):\n{}",
        globs.join("\n")
    );
}

#[test]
fn no_import_circle_in_any_crate() {
    let mut circles = Vec::new();
    for root in CRATE_SOURCES {
        let graph = import_graph(&repo_path(root));
        assert!(!graph.is_empty(), "no modules read under {root}");
        for circle in circles_of(&graph) {
            circles.push(format!("{root}: {}", circle.join(" <-> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles (move what both need below both):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_circle_finder_finds_a_circle() {
    // The premise of the test above: a circle is seen when there is one.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(
        dir.path().join("a.rs"),
        "#[cfg(test)]\nmod tests;\nuse crate::b::{X, Y};\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("b.rs"), "pub fn f() { crate::a::g() }\n").unwrap();
    std::fs::write(
        dir.path().join("c.rs"),
        "use crate::a;\n#[cfg(test)]\nmod tests { use crate::c; }\n",
    )
    .unwrap();
    let graph = import_graph(dir.path());
    assert_eq!(
        circles_of(&graph),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
}

#[test]
fn the_circle_finder_sees_through_pub_use() {
    // A loop hidden behind a re-export: `b` names `a::E`, which `a`'s
    // mod.rs hands on from `a::e`, and `a::e` names `b`.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    std::fs::write(dir.path().join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(
        dir.path().join("a/mod.rs"),
        "mod e;\npub use e::{\n    E,\n    F as G,\n};\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("a/e.rs"), "pub fn f() { crate::b::g() }\n").unwrap();
    std::fs::write(dir.path().join("b.rs"), "use crate::a::E;\n").unwrap();
    let graph = import_graph(dir.path());
    assert_eq!(
        circles_of(&graph),
        vec![vec!["a::e".to_string(), "b".to_string()]]
    );
}

#[test]
fn the_circle_finder_sees_a_parent_and_its_child_using_each_other() {
    // A parent that calls its child, whose child uses what the parent
    // holds: an import back up. And a module named like a function its
    // parent hands on is still the module.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    std::fs::write(dir.path().join("lib.rs"), "mod a;\npub use a::{a, X};\n").unwrap();
    std::fs::write(
        dir.path().join("a/mod.rs"),
        "mod b;\nmod c;\npub use c::X;\npub struct Y;\npub fn a() { b::f() }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("a/b.rs"), "pub fn f() { super::c::g() }\n").unwrap();
    std::fs::write(dir.path().join("a/c.rs"), "pub struct X;\npub fn g() {}\n").unwrap();
    assert!(circles_of(&import_graph(dir.path())).is_empty());
    std::fs::write(
        dir.path().join("a/c.rs"),
        "pub struct X;\npub fn g() { let _ = super::Y; }\n",
    )
    .unwrap();
    assert_eq!(
        circles_of(&import_graph(dir.path())),
        vec![vec![
            "a".to_string(),
            "a::b".to_string(),
            "a::c".to_string()
        ]]
    );
}

/// Module path (`diagnose::analyze`) → the modules it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn import_graph(root: &Path) -> Graph {
    let files: Vec<PathBuf> = rust_files(root)
        .into_iter()
        .filter(|f| !is_test_file(f) && f.file_name().is_some_and(|n| n != "main.rs"))
        .collect();
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(root, f)).collect();
    let mut handed_on = re_exports(root, &files);
    // A path that names a module means that module, even where a `pub use`
    // hands on a function of the same name (`pub use analyze::analyze`):
    // they live in different namespaces.
    handed_on.retain(|name, _| !modules.contains(name));
    let mut graph = Graph::new();
    for file in &files {
        let here = module_of(root, file);
        let source = shipped_part(&std::fs::read_to_string(file).unwrap());
        let mut to = BTreeSet::new();
        for path in crate_paths(&source, &here) {
            let target = deepest_module(&modules, &see_through(&handed_on, &path));
            if target != here && !within(&here, &target) {
                to.insert(target);
            }
        }
        // A parent's code that calls into a child by its relative path
        // (`child::f()`, `use child::X`) is an arrow down to it.
        for child in modules
            .iter()
            .filter(|m| parent_of(m) == Some(here.as_str()))
        {
            let name = child.rsplit("::").next().unwrap_or_default();
            if names_relative(&source, name) {
                to.insert(child.clone());
            }
        }
        graph.insert(here, to);
    }
    graph
}

/// What each module's `pub use` hands on: `module::Name` → the path of
/// the item it names (groups expanded; `crate::`, `self::`, `super::` and
/// a child module's path resolved from the module; `as` renames read), so
/// that a path through a re-export (`crate::cluster::ConnectError`) is
/// cut at the module that defines the item (`cluster::error`), not at the
/// one that re-exports it.
fn re_exports(root: &Path, files: &[PathBuf]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for file in files {
        let here = module_of(root, file);
        let source = std::fs::read_to_string(file).unwrap();
        let source = source.split("#[cfg(test)]").next().unwrap_or_default();
        for (i, _) in source.match_indices("use ") {
            let head = source[..i].trim_end();
            if !(head.ends_with("pub") || head.ends_with("pub(crate)")) {
                continue;
            }
            let Some(end) = source[i..].find(';') else {
                continue;
            };
            let statement = expand_groups(&source[i + 4..i + end]);
            for item in statement.split(',') {
                let item: String = item.split_whitespace().collect::<Vec<_>>().join(" ");
                let (path, name) = match item.split_once(" as ") {
                    Some((p, alias)) => (p.to_string(), alias.to_string()),
                    None => {
                        let name = item.rsplit("::").next().unwrap_or_default();
                        (item.clone(), name.to_string())
                    }
                };
                if name.is_empty() || name == "*" || name == "self" {
                    continue;
                }
                out.insert(join(&here, &name), resolve_use(&here, &path));
            }
        }
    }
    out
}

/// A `use` path as a path from the crate's root, seen from `here`.
fn resolve_use(here: &str, path: &str) -> String {
    let parent = here.rsplit_once("::").map_or("", |(p, _)| p);
    if let Some(rest) = path.strip_prefix("crate::") {
        rest.to_string()
    } else if let Some(rest) = path.strip_prefix("self::") {
        join(here, rest)
    } else if path.starts_with("super::") {
        crate_paths(&format!(" {path};"), here)
            .pop()
            .unwrap_or_else(|| parent.to_string())
    } else {
        join(here, path)
    }
}

/// `path` with every re-exported prefix replaced by what it hands on
/// (a few rounds: a re-export of a re-export).
fn see_through(handed_on: &BTreeMap<String, String>, path: &str) -> String {
    let mut path = path.to_string();
    for _ in 0..8 {
        let segments: Vec<&str> = path.split("::").collect();
        let found = (1..=segments.len()).rev().find_map(|n| {
            let prefix = segments[..n].join("::");
            handed_on
                .get(&prefix)
                .filter(|to| **to != prefix)
                .map(|to| join(to, &segments[n..].join("::")))
        });
        match found {
            Some(next) if next != path => path = next,
            _ => break,
        }
    }
    path
}

/// The shipped source: comments, re-exports and test code dropped. A
/// `pub use` hands a name on (a module's public face, as `model`
/// re-exports `usage::UsageObject`); the module's own code does not use
/// it. Test code is what follows `#[cfg(test)]`: an inline `mod tests {`
/// ends the shipped part, a `mod tests;` line is skipped.
fn shipped_part(source: &str) -> String {
    let mut out = String::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            match lines.next() {
                Some(next) if next.trim_end().ends_with('{') => break,
                _ => continue,
            }
        }
        let re_export = t.starts_with("pub use ")
            || (t.starts_with("pub(")
                && t.split_once(") ")
                    .is_some_and(|(_, r)| r.starts_with("use ")));
        if t.starts_with("//") || re_export {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `a/b/mod.rs` and `a/b.rs` → `a::b`; `lib.rs` → the root, "".
fn module_of(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

/// Every module path the source names from the crate's root, `super::`
/// resolved against `here` (a `mod.rs` is its own folder's module).
fn crate_paths(source: &str, here: &str) -> Vec<String> {
    let mut out = Vec::new();
    // A file `a/b.rs`'s `super` is `a`; `a/b/mod.rs`'s is `a` too.
    let parent = match here.rsplit_once("::") {
        Some((p, _)) => p.to_string(),
        None => String::new(),
    };
    let text = expand_groups(source);
    for prefix in ["crate::", "super::"] {
        for (i, _) in text.match_indices(prefix) {
            if i > 0 {
                let before = text.as_bytes()[i - 1];
                if before.is_ascii_alphanumeric() || before == b'_' || before == b':' {
                    continue;
                }
            }
            let rest = &text[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let mut path = rest[..end].trim_end_matches(':').to_string();
            let mut base = if prefix == "crate::" {
                String::new()
            } else {
                parent.clone()
            };
            while let Some(r) = path.strip_prefix("super::") {
                base = base
                    .rsplit_once("::")
                    .map(|(p, _)| p.to_string())
                    .unwrap_or_default();
                path = r.to_string();
            }
            out.push(join(&base, &path));
        }
    }
    out
}

/// `use crate::a::{b::X, c};` → `use crate::a::b::X; use crate::a::c;`
/// (one level of braces at a time, until none is left).
fn expand_groups(source: &str) -> String {
    let mut text = source.to_string();
    loop {
        let Some(open) = text.find("::{") else {
            return text;
        };
        // The matching brace.
        let mut depth = 0;
        let mut close = None;
        for (j, c) in text[open + 2..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(open + 2 + j);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { return text };
        let start = text[..open]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |s| s + 1);
        let prefix = text[start..open].to_string();
        let inner = &text[open + 3..close];
        let items = split_top(inner)
            .into_iter()
            .map(|item| {
                let item = item.trim();
                if item == "self" {
                    prefix.clone()
                } else {
                    format!("{prefix}::{item}")
                }
            })
            .collect::<Vec<_>>()
            .join(" , ");
        text = format!("{}{}{}", &text[..start], items, &text[close + 1..]);
    }
}

/// Split on commas outside braces.
fn split_top(inner: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

fn join(base: &str, path: &str) -> String {
    match (base.is_empty(), path.is_empty()) {
        (true, _) => path.to_string(),
        (_, true) => base.to_string(),
        _ => format!("{base}::{path}"),
    }
}

/// The deepest module that `path` (a module, or an item inside one) reaches.
fn deepest_module(modules: &BTreeSet<String>, path: &str) -> String {
    let mut candidate = path.to_string();
    loop {
        if modules.contains(&candidate) {
            return candidate;
        }
        match candidate.rsplit_once("::") {
            Some((p, _)) => candidate = p.to_string(),
            None => return String::new(),
        }
    }
}

/// Whether `inner` lies inside `outer` (a descendant, not `outer` itself):
/// a module naming its own descendants by a `crate::` path is a parent
/// using its children, drawn by the relative-path rule too.
fn within(outer: &str, inner: &str) -> bool {
    inner != outer && (outer.is_empty() || inner.starts_with(&format!("{outer}::")))
}

/// The module `m` is declared in (`None` for the root).
fn parent_of(m: &str) -> Option<&str> {
    if m.is_empty() {
        return None;
    }
    Some(m.rsplit_once("::").map_or("", |(p, _)| p))
}

/// Whether `source` names `name::…` as a relative path (not after `::`,
/// which would be another path's segment).
fn names_relative(source: &str, name: &str) -> bool {
    let needle = format!("{name}::");
    source.match_indices(&needle).any(|(i, _)| {
        i == 0 || {
            let before = source.as_bytes()[i - 1];
            !(before.is_ascii_alphanumeric() || before == b'_' || before == b':')
        }
    })
}

/// The strongly connected parts of more than one module (Tarjan's).
fn circles_of(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    part.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.found.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A test module in its own file (`tests.rs`, or under a `tests/` folder).
fn is_test_file(file: &Path) -> bool {
    file.file_name().is_some_and(|n| n == "tests.rs")
        || file.components().any(|c| c.as_os_str() == "tests")
}
