//! `-o markdown`, what every document's Markdown view shares: the report,
//! the diagnosis and the fleet documents as GitHub-flavoured Markdown, to
//! paste into a GitHub issue or a Jira/Linear ticket. Each document's own
//! Markdown is in its view (`report`, `diagnosis`, `fleet`).
//!
//! Layout, for both documents: a headline verdict, a small table saying
//! which tool, cluster, Kubernetes version and time, then one section per
//! part of the document, each a table; lists longer than a few rows go in
//! collapsible `<details>` blocks so the ticket stays readable.
//!
//! Pure like [`crate::views`]: a document in, a `String` out. Every value
//! that came from the cluster goes through [`cell`] (pipes, angle brackets
//! and newlines escaped), so a label value cannot break a table or inject
//! HTML. `--redact` needs nothing here: the diagnosis is redacted before it
//! is analysed, so this view only ever sees the tokens.

use std::fmt::Write as _;

use cilium_gc::thousands;
use cilium_gc_documents::diagnosis::Severity;
use cilium_gc_documents::report::Tool;

/// Rows shown before the rest of a list is folded into `<details>`.
pub(super) const VISIBLE_ROWS: usize = 10;
/// Most report items listed; the JSON report has them all.
pub(super) const MAX_ITEMS: usize = 500;

/// Escapes `s` for a table cell (or any inline text): `|` would end the
/// cell, `<`/`>`/`&` could open HTML, a newline would end the row.
pub fn cell(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => o.push_str("\\|"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '\n' | '\r' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// A table: header and rows, already escaped. Rows shorter than the header
/// are padded so every row has the header's column count.
pub(super) fn table(o: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(o, "| {} |", header.join(" | "));
    let _ = writeln!(o, "|{}|", vec!["---"; header.len()].join("|"));
    for r in rows {
        let mut r = r.clone();
        r.resize(header.len(), String::new());
        let _ = writeln!(o, "| {} |", r.join(" | "));
    }
    o.push('\n');
}

/// A table whose rows beyond [`VISIBLE_ROWS`] are folded into `<details>`.
pub(super) fn long_table(o: &mut String, what: &str, header: &[&str], rows: &[Vec<String>]) {
    if rows.len() <= VISIBLE_ROWS {
        table(o, header, rows);
        return;
    }
    table(o, header, &rows[..VISIBLE_ROWS]);
    let rest = &rows[VISIBLE_ROWS..];
    let _ = writeln!(
        o,
        "<details><summary>{} more {what}</summary>\n",
        thousands(rest.len() as u64)
    );
    table(o, header, rest);
    let _ = writeln!(o, "</details>\n");
}

/// Everything in `<details>` with a summary line.
pub(super) fn details(o: &mut String, summary: &str, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(o, "<details><summary>{}</summary>\n", cell(summary));
    table(o, header, rows);
    let _ = writeln!(o, "</details>\n");
}

pub(super) fn tool_line(t: &Tool) -> String {
    match &t.commit {
        Some(c) => format!("{} {} (commit {})", t.name, t.version, cell(c)),
        None => format!("{} {}", t.name, t.version),
    }
}

pub(super) fn opt(s: Option<&str>) -> String {
    s.map(cell).unwrap_or_else(|| "unknown".into())
}

pub(super) fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "🔴 critical",
        Severity::Warning => "🟠 warning",
        Severity::Info => "🔵 info",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Column count of a table row: unescaped pipes minus one.
    pub(crate) fn columns(row: &str) -> usize {
        let mut prev = ' ';
        let mut pipes = 0;
        for c in row.chars() {
            if c == '|' && prev != '\\' {
                pipes += 1;
            }
            prev = c;
        }
        pipes - 1
    }

    #[test]
    fn cells_cannot_break_tables_or_inject_html() {
        let s = cell("a|b<script>\nx&y");
        assert_eq!(s, "a\\|b&lt;script&gt; x&amp;y");
        let mut o = String::new();
        table(
            &mut o,
            &["A", "B"],
            &[vec![s.clone(), "1".into()], vec!["x".into()]],
        );
        for line in o.lines().filter(|l| l.starts_with('|')) {
            assert_eq!(columns(line), 2, "{line}");
        }
    }

    #[test]
    fn report_has_verdict_tables_and_items() {
        let r = cilium_gc_testkit::samples::report();
        let md = crate::views::report::markdown(&r);
        assert!(md.starts_with("# kubectl cilium-gc delete\n"), "{md}");
        assert!(md.contains("**Verdict: 🟠 1 deleted, 1 failed"), "{md}");
        assert!(md.contains("| Kubernetes | v1.33.1 |"), "{md}");
        assert!(
            md.contains("<details><summary>Identities (2)</summary>"),
            "{md}"
        );
        assert!(md.contains("503 Service Unavailable"), "{md}");
        assert!(md.contains("## Next steps"), "{md}");
    }
}
