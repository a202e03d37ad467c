//! The documentation cannot drift from the repository: every path README.md
//! and docs/*.md name exists, every relative link in them resolves, and every
//! `kubectl cilium-gc` command the README shows in a ```sh block is accepted
//! by the CLI (flags, values, subcommands), as are the examples each
//! `--help` ends with (`cli::every_subcommand_help_ends_with_examples_that_parse`).

use std::path::{Path, PathBuf};

use clap::FromArgMatches;

use crate::support::repo_path;

/// README.md and every docs/*.md, with their text.
fn documents() -> Vec<(PathBuf, String)> {
    let mut docs = vec![PathBuf::from("README.md")];
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(repo_path("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| Path::new("docs").join(p.file_name().unwrap()))
        .collect();
    in_docs.sort();
    docs.extend(in_docs);
    docs.into_iter()
        .map(|d| {
            let text = std::fs::read_to_string(repo_path(&d.to_string_lossy())).unwrap();
            (d, text)
        })
        .collect()
}

/// Repository paths a document names, written from the repository's root
/// (the rule of the project's before-stop check): a word starting with one
/// of the top-level directories, not inside a longer path or word, with no
/// placeholder (`*`, `<`, `{`) in it.
fn named_paths(text: &str) -> Vec<&str> {
    let re = regex::Regex::new(
        r"(?:src|crates|tests|docs|examples|schema|krew|benches|bench|\.ci)/[\w./-]*\w",
    )
    .unwrap();
    re.find_iter(text)
        .filter(|m| {
            let before = text[..m.start()].chars().next_back();
            !before.is_some_and(|c| c.is_alphanumeric() || "_./-".contains(c))
        })
        .map(|m| m.as_str())
        .filter(|p| !p.contains(['*', '<', '>', '{', '}']))
        .collect()
}

/// Every repository path README.md and docs/*.md name exists.
#[test]
fn every_path_the_docs_name_exists() {
    let mut named = 0;
    let mut missing = Vec::new();
    for (doc, text) in documents() {
        for p in named_paths(&text) {
            named += 1;
            if !repo_path(p).exists() {
                missing.push(format!("{}: {p}", doc.display()));
            }
        }
    }
    // The premise: the documents do name paths (the regex finds them).
    assert!(named > 100, "only {named} paths found");
    assert!(
        missing.is_empty(),
        "named but missing:\n{}",
        missing.join("\n")
    );
}

/// The rule can fail: a path that is not there is caught, one inside a
/// longer path or a placeholder is not taken for one.
#[test]
fn the_path_rule_catches_a_missing_path_and_skips_placeholders() {
    let text = "see `src/pace.rs`, crates/x/src/lib.rs, `tests/<name>.rs` and a/docs/b";
    assert_eq!(named_paths(text), ["src/pace.rs", "crates/x/src/lib.rs"]);
    assert!(!repo_path("src/pace.rs").exists());
}

/// Every relative Markdown link in README.md and docs/*.md resolves (the
/// `#anchor` part aside).
#[test]
fn every_relative_link_resolves() {
    let link = regex::Regex::new(r"\]\(([^)#\s]+)(?:#[^)]*)?\)").unwrap();
    let mut checked = 0;
    let mut broken = Vec::new();
    for (doc, text) in documents() {
        let dir = doc.parent().unwrap_or(Path::new(""));
        for c in link.captures_iter(&text) {
            let target = &c[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            if !repo_path(&dir.join(target).to_string_lossy()).exists() {
                broken.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    assert!(checked > 20, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The arguments of a `kubectl cilium-gc ...` command line as a shell would
/// split them, up to a comment, a redirection, a pipe or the end of a
/// command substitution: `None` if the line has no such command.
pub(crate) fn command_args(line: &str) -> Option<Vec<String>> {
    let start = line.find("kubectl cilium-gc")?;
    let rest = &line[start + "kubectl cilium-gc".len()..];
    let mut args = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in rest.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    in_word = true;
                }
                c if c.is_whitespace() => {
                    if in_word {
                        args.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                '#' if !in_word => break,
                '>' | '|' | ')' | ';' | '&' => break,
                c => {
                    word.push(c);
                    in_word = true;
                }
            },
        }
    }
    assert!(quote.is_none(), "unclosed quote in {line:?}");
    if in_word {
        args.push(word);
    }
    Some(args)
}

/// Whether the CLI accepts `args` (what `kubectl cilium-gc ARGS` parses to).
pub(crate) fn parses(args: &[String]) -> Result<(), String> {
    let argv = std::iter::once("kubectl-cilium_gc".to_owned()).chain(args.iter().cloned());
    let m = match kubectl_cilium_gc::cli::command("kubectl-cilium_gc").try_get_matches_from(argv) {
        Ok(m) => m,
        // `--help` and `--version` are accepted: clap answers them itself.
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            return Ok(())
        }
        Err(e) => return Err(e.to_string()),
    };
    kubectl_cilium_gc::cli::Cli::from_arg_matches(&m)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The runnable commands of a Markdown text: the lines of its ```sh blocks
/// that start with `kubectl cilium-gc`.
fn runnable_commands(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if in_sh && line.starts_with("kubectl cilium-gc") {
            out.push(line);
        }
    }
    out
}

/// Every `kubectl cilium-gc` command of the README's ```sh blocks (and of
/// docs/*.md's) parses against the CLI: its subcommand exists, its flags
/// are accepted, its values parse.
#[test]
fn every_command_the_docs_show_parses() {
    let mut failed = Vec::new();
    let mut in_readme = 0;
    for (doc, text) in documents() {
        for line in runnable_commands(&text) {
            if doc == Path::new("README.md") {
                in_readme += 1;
            }
            let args = command_args(line).unwrap();
            if let Err(e) = parses(&args) {
                failed.push(format!("{}: {line}\n{e}", doc.display()));
            }
        }
    }
    assert!(in_readme >= 10, "only {in_readme} commands in the README");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The check can fail: a flag the CLI lacks, a bad value, a subcommand that
/// does not exist are refused; a comment, a pipe and quotes are read as a
/// shell would.
#[test]
fn the_command_rule_refuses_what_the_cli_refuses() {
    let args = |l: &str| command_args(l).unwrap();
    assert_eq!(
        args("kubectl cilium-gc scan --context 'prod-*' -o json | jq . # c"),
        ["scan", "--context", "prod-*", "-o", "json"]
    );
    assert_eq!(
        args("source <(kubectl cilium-gc completion bash)"),
        ["completion", "bash"]
    );
    assert!(parses(&args("kubectl cilium-gc scan --context 'prod-*'")).is_ok());
    for bad in [
        "kubectl cilium-gc scan --no-such-flag",
        "kubectl cilium-gc delete --qps fast",
        "kubectl cilium-gc sweep",
        "kubectl cilium-gc scan -n a -A",
    ] {
        assert!(parses(&args(bad)).is_err(), "{bad} parsed");
    }
}
