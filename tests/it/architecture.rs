//! docs/architecture.md cannot go stale: every file, folder and crate it
//! names exists, and every module its tables describe (a name in backticks
//! followed by its description, `` `cli` (flags) `` or `` `proxy`: ``) is a
//! module of the crate the row is about.

use std::path::{Path, PathBuf};

use cilium_gc_testkit::repo_path;

/// The page's text.
fn page() -> String {
    std::fs::read_to_string(repo_path("docs/architecture.md")).expect("docs/architecture.md")
}

/// Every file and folder under the repository's code (target and .git left
/// out), as paths relative to its root with `/` separators; folders end
/// with `/`.
fn tree() -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if matches!(name.as_str(), "target" | ".git" | "node_modules") {
                continue;
            }
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if p.is_dir() {
                out.push(format!("{rel}/"));
                walk(root, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    let root = repo_path("");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out
}

/// The code spans of a Markdown text, and the words of its ```text
/// diagrams that look like files or folders.
fn named(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_diagram = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_diagram = line.trim() == "```text";
            continue;
        }
        if in_diagram {
            out.extend(
                line.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
                    .map(|w| w.trim_start_matches(['└', '├', '│', '─', '┬', '┘']))
                    .filter(|w| w.ends_with(".rs") || (w.ends_with('/') && w.len() > 1))
                    .map(str::to_string),
            );
            continue;
        }
        out.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
    }
    out
}

/// Whether `name` (a path from the root, or the tail of one) exists.
fn exists(tree: &[String], name: &str) -> bool {
    let name = name.trim_start_matches("./");
    let dir = format!("{}/", name.trim_end_matches('/'));
    tree.iter().any(|p| {
        p == name
            || p == &dir
            || p.ends_with(&format!("/{name}"))
            || p.ends_with(&format!("/{dir}"))
    })
}

/// A path-like name: a file or a folder, no placeholder, no spaces.
fn is_path(name: &str) -> bool {
    (name.ends_with(".rs") || name.ends_with('/') || name.contains('/'))
        && !name.contains([' ', '*', '<', '{', '$', ':'])
        && !name.starts_with("http")
        && !name.starts_with('-')
        && !name.starts_with('/')
        && name.len() > 1
}

#[test]
fn every_file_folder_and_crate_architecture_md_names_exists() {
    let tree = tree();
    let text = page();
    let mut missing: Vec<String> = named(&text)
        .into_iter()
        .filter(|n| is_path(n) && !exists(&tree, n))
        .collect();
    for word in text.split('`').skip(1).step_by(2) {
        let crate_name = word.split_whitespace().next().unwrap_or_default();
        if crate_name.starts_with("cilium-gc")
            && !crate_name.contains('/')
            && !repo_path("crates").join(crate_name).is_dir()
        {
            missing.push(crate_name.to_string());
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names what does not exist:\n{}",
        missing.join("\n")
    );
}

/// The modules of a source folder: every `x.rs` and `x/` under it, by
/// name; and, as a row may describe a function (`parse_id` (how a name
/// reads as a number)), every `fn x` in it.
fn modules(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p: PathBuf = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                out.push(name);
                stack.push(p);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                out.push(stem.to_string());
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                out.extend(text.split("fn ").skip(1).filter_map(|rest| {
                    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
                    Some(rest[..end].to_string())
                }));
            }
        }
    }
    out
}

/// The modules a table row describes: a code span right before ` (` or
/// `:`.
fn described(row: &str) -> Vec<String> {
    let parts: Vec<&str> = row.split('`').collect();
    let mut out = Vec::new();
    for i in (1..parts.len()).step_by(2) {
        let after = parts.get(i + 1).copied().unwrap_or_default();
        let name = parts[i];
        let is_ident = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if is_ident && (after.starts_with(" (") || after.starts_with(':')) {
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn every_module_the_crates_table_describes_exists() {
    let text = page();
    let mut missing = Vec::new();
    let mut rows = 0;
    for row in text.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap_or_default();
        let Some(dir) = first.split('`').nth(1) else {
            continue;
        };
        let src = match dir {
            "." => repo_path("src"),
            d if d.starts_with("crates/") => repo_path(d).join("src"),
            _ => continue,
        };
        if !src.is_dir() {
            continue;
        }
        rows += 1;
        let known = modules(&src);
        let rest = row.splitn(3, '|').nth(2).unwrap_or_default();
        for m in described(rest) {
            if !known.contains(&m) {
                missing.push(format!("{dir}: {m}"));
            }
        }
    }
    assert!(rows >= 5, "the crates' table was read ({rows} rows)");
    assert!(
        missing.is_empty(),
        "docs/architecture.md describes modules that do not exist:\n{}",
        missing.join("\n")
    );
}

/// The rules can fail: a stale module and a missing file are caught.
#[test]
fn the_architecture_rules_catch_a_stale_name() {
    let tree = tree();
    assert!(!exists(&tree, "src/app.rs") && exists(&tree, "commands/scan.rs"));
    assert_eq!(
        described("the plugin: `main` (parse), `app` (dispatch), `proxy`: rules, `x`, `y`"),
        ["main", "app", "proxy"]
    );
    assert!(!modules(&repo_path("src")).contains(&"app".to_string()));
}
