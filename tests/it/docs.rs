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

/// One citation of a stored output in a document: the file it names and the
/// strings that must appear in it verbatim, with the line of the marker.
#[derive(Debug, PartialEq)]
struct Figure {
    line: usize,
    file: String,
    quotes: Vec<String>,
}

/// The figures a Markdown text cites (the syntax is docs/development.md's
/// "Figures in the docs"):
///
/// - `"QUOTE" <!-- figure: PATH -->`: the double-quoted string (or the
///   code span, for a quote with double quotes in it, such as a JSON key
///   and its value) right before the marker is held by PATH; it may wrap
///   onto the next line, and the wrap reads as one space;
/// - `<!-- figures: PATH -->` on the line before a fenced block: every
///   non-empty line of the block is held by PATH.
///
/// A PATH with a placeholder (`<file>`) is an example, not a citation.
fn figures(text: &str) -> Vec<Figure> {
    let inline =
        regex::Regex::new(r#"(?:"([^"]+)"|`([^`]+)`)[ \t]*\n?[ \t]*<!-- figure: (\S+) -->"#)
            .unwrap();
    let line_of = |at: usize| text[..at].lines().count().max(1);
    let mut out: Vec<Figure> = inline
        .captures_iter(text)
        .filter(|c| !c[3].contains(['*', '<', '>', '{', '}']))
        .map(|c| {
            let quote = c.get(1).or(c.get(2)).unwrap().as_str();
            let wrap = regex::Regex::new(r"[ \t]*\n[ \t]*").unwrap();
            Figure {
                line: line_of(c.get(3).unwrap().start()),
                file: c[3].to_owned(),
                quotes: vec![wrap.replace_all(quote, " ").into_owned()],
            }
        })
        .collect();
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let Some(file) = l
            .trim()
            .strip_prefix("<!-- figures: ")
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        if file.contains(['*', '<', '>', '{', '}']) {
            continue;
        }
        let mut quotes = Vec::new();
        let fenced = lines.get(i + 1).is_some_and(|f| f.starts_with("```"));
        if fenced {
            for b in &lines[i + 2..] {
                if b.starts_with("```") {
                    break;
                }
                if !b.trim().is_empty() {
                    quotes.push((*b).to_owned());
                }
            }
        }
        out.push(Figure {
            line: i + 1,
            file: file.to_owned(),
            quotes,
        });
    }
    out.sort_by_key(|f| f.line);
    out
}

/// What a stored output holds, as text to search: the file as it is and,
/// for JSON, each string value unescaped (a printed line stored in JSON has
/// its quotes escaped in the file).
fn held_texts(path: &str, raw: &str) -> Vec<String> {
    fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
            serde_json::Value::Object(o) => o.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut texts = vec![raw.to_owned()];
    if path.ends_with(".json") {
        let value: serde_json::Value =
            serde_json::from_str(raw).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
        strings(&value, &mut texts);
    }
    texts
}

/// What is wrong with one figure, or nothing: its file is not under
/// `benches/results/` or is missing, the block it marks is empty, a quote is
/// not held verbatim.
fn figure_problems(figure: &Figure) -> Vec<String> {
    let file = &figure.file;
    if !file.starts_with("benches/results/") {
        return vec![format!(
            "{file}: not a stored output under benches/results/"
        )];
    }
    let Ok(raw) = std::fs::read_to_string(repo_path(file)) else {
        return vec![format!("{file}: no such file")];
    };
    if figure.quotes.is_empty() {
        return vec![format!(
            "{file}: the marker quotes nothing (no fenced block after it?)"
        )];
    }
    let held = held_texts(file, &raw);
    figure
        .quotes
        .iter()
        .filter(|q| !held.iter().any(|t| t.contains(q.as_str())))
        .map(|q| format!("{file} does not hold {q:?}"))
        .collect()
}

/// One marked table: the files it names and the numbers its body cells
/// show, with the line of the marker.
#[derive(Debug, PartialEq)]
struct Table {
    line: usize,
    files: Vec<String>,
    numbers: Vec<String>,
}

/// The numbers in a piece of text, each stripped of a unit written onto it
/// (`923.931/s`, `1.9x`, `12 %`, `3.2s`, `48 MiB` read as `923.931`, `1.9`,
/// `12`, `3.2`, `48`). A word with a number inside that is not one (`v1.15.6`,
/// `3h25m`, `1.15`-style versions with a second dot) is no number.
fn numbers(text: &str) -> Vec<String> {
    let word = regex::Regex::new(r"[\w.]+").unwrap();
    let number = regex::Regex::new(r"^(\d+(?:\.\d+)?)(?:x|×|s|ms|MiB)?$").unwrap();
    word.find_iter(text)
        .filter_map(|w| {
            let w = w.as_str().trim_end_matches('.');
            number.captures(w).map(|c| c[1].to_owned())
        })
        .collect()
}

/// The tables a Markdown text marks (docs/development.md's "Figures in the
/// docs"): `<!-- table: PATH [PATH ...] -->` on the line before a table;
/// every number in the table's body cells (not its header, not a code span:
/// that is a command the run was given) is one of the numbers the named
/// files hold.
fn tables(text: &str) -> Vec<Table> {
    // A code span is a command or a flag (`--qps 0 -c 32`), a setting the
    // run was given, not a figure it measured.
    let code = regex::Regex::new(r"`[^`]*`").unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(files) = l
            .trim()
            .strip_prefix("<!-- table: ")
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        let files: Vec<String> = files.split_whitespace().map(str::to_owned).collect();
        if files.iter().any(|f| f.contains(['*', '<', '>', '{', '}'])) {
            continue;
        }
        let rows: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|r| r.trim_start().starts_with('|'))
            .copied()
            .collect();
        // Header and separator first; a "table" of fewer rows has no body.
        let numbers = rows
            .iter()
            .skip(2)
            .flat_map(|r| numbers(&code.replace_all(r, " ")))
            .collect();
        out.push(Table {
            line: i + 1,
            files,
            numbers,
        });
    }
    out
}

/// What is wrong with one table, or nothing: a file is not a stored output or
/// is missing, no table follows the marker, a number of its body is held by
/// none of its files (a rounded or computed figure).
fn table_problems(table: &Table) -> Vec<String> {
    let mut held = std::collections::HashSet::new();
    for file in &table.files {
        if !file.starts_with("benches/results/") {
            return vec![format!(
                "{file}: not a stored output under benches/results/"
            )];
        }
        let Ok(raw) = std::fs::read_to_string(repo_path(file)) else {
            return vec![format!("{file}: no such file")];
        };
        held.extend(numbers(&raw));
    }
    if table.numbers.is_empty() {
        return vec!["the marker is not followed by a table with numbers".to_owned()];
    }
    let files = table.files.join(" ");
    table
        .numbers
        .iter()
        .filter(|n| !held.contains(n.as_str()))
        .map(|n| format!("{n} is held by none of {files}"))
        .collect()
}

/// Every figure README.md and docs/*.md cite is held verbatim by the stored
/// output they name, and every number of a marked table is held by one of
/// the files its marker names.
#[test]
fn every_figure_the_docs_cite_is_held_by_its_stored_output() {
    let mut cited = 0;
    let mut problems = Vec::new();
    for (doc, text) in documents() {
        for f in figures(&text) {
            cited += f.quotes.len();
            for p in figure_problems(&f) {
                problems.push(format!("{}:{}: {p}", doc.display(), f.line));
            }
        }
        for t in tables(&text) {
            cited += t.numbers.len();
            for p in table_problems(&t) {
                problems.push(format!("{}:{}: {p}", doc.display(), t.line));
            }
        }
    }
    // The premise: the documents do cite figures (the markers are found).
    assert!(cited > 100, "only {cited} figures cited");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The rule can fail: a quote the file does not hold, a block line it does
/// not hold, a file that is not there and one outside benches/results/ are
/// caught; a wrapped quote and a string inside JSON are read as held; a
/// table's rounded number is caught, its exact one held.
#[test]
fn the_figure_rule_catches_a_figure_its_file_does_not_hold() {
    let lead = "benches/results/forecast-alert-lead-time.txt";
    let text = format!(
        "fired \"3h25m\n  earlier\" <!-- figure: {lead} -->, not \"3h26m earlier\" <!-- figure: {lead} -->\n\
         <!-- figures: {lead} -->\n```text\n$ cargo test --test it alerts::lead_time -- --nocapture\nlead time, GC stopped: 9h\n```\n\
         \"1 s\" <!-- figure: benches/results/no-such.txt -->, \"x\" <!-- figure: README.md -->\n\
         \"first id freed at 79.1 s\" <!-- figure: benches/results/results-real-exhaustion-operator.json -->\n\
         `\"deleteRatePerSecond\": 923.931` <!-- figure: benches/results/results-real-exhaustion.json -->, \
         `\"deleteRatePerSecond\": 924` <!-- figure: benches/results/results-real-exhaustion.json -->\n\
         \"an example\" <!-- figure: benches/results/<file> -->\n"
    );
    let found = figures(&text);
    assert_eq!(found.len(), 8, "{found:#?}");
    assert_eq!(found[0].quotes, ["3h25m earlier"]);
    assert!(figure_problems(&found[0]).is_empty());
    assert_eq!(
        figure_problems(&found[1]),
        [format!("{lead} does not hold \"3h26m earlier\"")]
    );
    assert_eq!(found[2].quotes.len(), 2);
    assert_eq!(
        figure_problems(&found[2]),
        [format!(
            "{lead} does not hold \"lead time, GC stopped: 9h\""
        )]
    );
    assert_eq!(
        figure_problems(&found[3]),
        ["benches/results/no-such.txt: no such file"]
    );
    assert_eq!(
        figure_problems(&found[4]),
        ["README.md: not a stored output under benches/results/"]
    );
    assert!(figure_problems(&found[5]).is_empty());
    assert_eq!(found[6].quotes, ["\"deleteRatePerSecond\": 923.931"]);
    assert!(figure_problems(&found[6]).is_empty());
    assert_eq!(found[7].quotes, ["\"deleteRatePerSecond\": 924"]);
    assert_eq!(figure_problems(&found[7]).len(), 1);

    // Tables: the exact stored value is held, a rounded one is not, the
    // header's numbers are not checked, a unit is stripped.
    let exhaustion = "benches/results/results-real-exhaustion.json";
    let table = format!(
        "<!-- table: {exhaustion} -->\n| run 1 | rate |\n|---|---|\n| ours `-c 32` | 923.931/s |\n| rounded | 924/s |\n\n\
         <!-- table: benches/results/no-such.json -->\n| a |\n|---|\n| 1 |\n\n\
         <!-- table: {exhaustion} -->\nno table\n"
    );
    let found = tables(&table);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_eq!(found[0].numbers, ["923.931", "924"]);
    assert_eq!(
        table_problems(&found[0]),
        [format!("924 is held by none of {exhaustion}")]
    );
    assert_eq!(
        table_problems(&found[1]),
        ["benches/results/no-such.json: no such file"]
    );
    assert_eq!(
        table_problems(&found[2]),
        ["the marker is not followed by a table with numbers"]
    );
    assert_eq!(
        numbers("v1.15.6 3h25m 1.9x 12 % 3.2s 48 MiB 7."),
        ["1.9", "12", "3.2", "48", "7"]
    );
}
