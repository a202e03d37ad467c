//! Rendering the [`Report`]: text for humans, JSON or YAML for machines.
//!
//! Pure: [`render`] writes to any `Write` and reads no environment, clock or
//! terminal; the caller decides colour once with [`color_allowed`] and passes
//! it in a [`Style`]. That is what makes every format testable byte for byte.
//! JSON and YAML are the [`Report`] itself, one document, nothing else, so
//! `-o json | jq` works with stderr discarded. The text form is a summary; it
//! ends with the [`next_steps`] a human should take.
//!
//! [`write_report_file`] is the one function here that touches the
//! filesystem: `--report-file` must never leave half a report behind.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use owo_colors::OwoColorize;
use serde::Serialize;

use cilium_gc::humanize::{human_duration, thousands};
use cilium_gc::policy::Reason;
use cilium_gc::report::{AbortReason, Mode, Outcome, Report};

use crate::next_steps::{next_steps, plural};

/// `-o`: how the report is written to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// A summary for humans, with the next step to take.
    #[default]
    Text,
    /// The report as one pretty-printed JSON document (`schema/report-v1.json`).
    Json,
    /// The report as one YAML document, same fields as JSON.
    Yaml,
    /// GitHub-flavoured Markdown to paste into a ticket: verdict, tables, details.
    Markdown,
}

/// `--color`: when the text output may use colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    /// Always colour, even into a pipe or with `NO_COLOR` set.
    Always,
    /// Never colour.
    Never,
}

/// How text is drawn. JSON and YAML ignore it: they are never coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    /// Emit ANSI colour codes.
    pub color: bool,
}

/// Whether to colour, following <https://no-color.org>: `NO_COLOR` set to a
/// non-empty value turns colour off in `auto` only; an explicit
/// `--color=always` is the user asking, and wins.
///
/// `no_color_env` is "`NO_COLOR` is present and not empty"; see
/// [`no_color_env`] for reading it.
pub fn color_allowed(choice: ColorChoice, stdout_is_terminal: bool, no_color_env: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => stdout_is_terminal && !no_color_env,
    }
}

/// Whether `NO_COLOR` is set to a non-empty value (no-color.org: an empty
/// value counts as unset). The only function here that reads the environment.
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Writes `report` to `out` in `format`.
///
/// JSON is exactly one pretty document followed by a newline; YAML is one
/// document; text is the human summary, coloured only when `style.color`.
/// Errs only when `out` does (a closed pipe is the caller's to treat as
/// success).
pub fn render(
    report: &Report,
    format: OutputFormat,
    style: Style,
    out: &mut impl Write,
) -> io::Result<()> {
    write_document(
        report,
        format,
        || text(report, style),
        || crate::markdown::report(report),
        out,
    )
}

/// Writes any of our documents: JSON (one pretty document and a newline),
/// YAML (one document), or the text or Markdown view `text`/`markdown`
/// draw. Shared by the GC report and the diagnosis so both follow the same
/// output rules.
pub fn write_document<T: serde::Serialize>(
    doc: &T,
    format: OutputFormat,
    text: impl FnOnce() -> String,
    markdown: impl FnOnce() -> String,
    out: &mut impl Write,
) -> io::Result<()> {
    match format {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, doc).map_err(io::Error::from)?;
            out.write_all(b"\n")
        }
        OutputFormat::Yaml => {
            let yaml = serde_saphyr::to_string(doc).map_err(io::Error::other)?;
            out.write_all(yaml.as_bytes())
        }
        OutputFormat::Text => out.write_all(text().as_bytes()),
        OutputFormat::Markdown => out.write_all(markdown().as_bytes()),
    }
}

/// Writes `report` as JSON to `path` atomically: to a temporary file in the
/// same directory, flushed to disk, then renamed over `path`. A crash or a
/// full disk leaves either the old file or the new one, never half a report.
///
/// Errs when the directory is not writable or the disk is full; the
/// temporary file is removed then. Not worth retrying.
pub fn write_report_file(path: &Path, report: &Report) -> io::Result<()> {
    let mut json = serde_json::to_vec_pretty(report).map_err(io::Error::from)?;
    json.push(b'\n');
    write_atomically(path, &json)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory (so the rename cannot cross filesystems), synced, then renamed
/// over `path` by `tempfile`'s `persist`. The temporary file is removed on
/// any failure.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path has no file name",
        ));
    }
    let mut file = tempfile::Builder::new()
        .prefix(".report")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    // Make the rename itself durable. Directories cannot be opened for this
    // on every platform, so this is best effort.
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Whether the run stopped before it read a single identity (no
/// kubeconfig, server unreachable, credentials rejected, preflight refused,
/// interrupted while connecting). Its text output is then the error and
/// what to try next, on stderr, and nothing else: a table of zeros says
/// nothing. JSON and YAML still carry the whole report.
pub fn is_early_abort(report: &Report) -> bool {
    let s = &report.summary;
    report.aborted.is_some()
        && s.scanned == 0
        && s.malformed == 0
        && s.list_pages == 0
        && report.items.is_empty()
}

/// The stderr lines of an early abort in text mode: the error, then what to
/// try next. `None` when the run got further (see [`is_early_abort`]).
pub fn early_abort_text(report: &Report) -> Option<String> {
    if !is_early_abort(report) {
        return None;
    }
    let a = report.aborted.as_ref()?;
    let mut o = String::new();
    // An internal error printed its own line in the panic hook.
    if a.reason != AbortReason::InternalError {
        let _ = writeln!(o, "error: {}", a.message);
    }
    let _ = writeln!(o, "{}", early_abort_hint(report));
    Some(o)
}

/// What to try after an early abort, chosen from why it stopped.
fn early_abort_hint(report: &Report) -> String {
    let Some(a) = &report.aborted else {
        return String::new();
    };
    let message = a.message.to_ascii_lowercase();
    let server = report.cluster.server.as_deref();
    let hint = match a.reason {
        AbortReason::Interrupted => {
            "interrupted before anything was read: nothing was changed".to_string()
        }
        AbortReason::InternalError => {
            "this is a bug: please report it, with the output of the same run with RUST_BACKTRACE=1 and -o json"
                .to_string()
        }
        AbortReason::PreflightRefused if message.contains("401") => {
            "refresh the credentials (log in again, or pass --token) and check them with `kubectl auth whoami`".to_string()
        }
        AbortReason::PreflightRefused | AbortReason::PermissionLost => {
            "fix what the error says and rerun; `-o json` lists every preflight check, examples/cronjob.yaml the permissions needed"
                .to_string()
        }
        _ if message.contains("no kubeconfig") || message.starts_with("kubeconfig") => {
            "point at a cluster: --kubeconfig PATH (or $KUBECONFIG), --context NAME, or --server URL --token TOKEN; `kubectl config get-contexts` lists the contexts"
                .to_string()
        }
        _ if server.is_some() => format!(
            "check that the cluster is up and that this is its address: `kubectl cluster-info{}`; --context or --server pick another, --request-timeout waits longer",
            report
                .cluster
                .context
                .as_deref()
                .map(|c| format!(" --context {c}"))
                .unwrap_or_default()
        ),
        _ => "fix what the error says and rerun (-v shows more)".to_string(),
    };
    format!("hint: {hint}")
}

/// A run's wall time: `850ms`, `12.4s`, then [`human_duration`].
fn run_duration(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        "?".to_string()
    } else if seconds < 1.0 {
        format!("{}ms", (seconds * 1000.0).round() as u64)
    } else if seconds < 60.0 {
        format!("{seconds:.1}s")
    } else {
        human_duration(seconds)
    }
}

/// The lower-kebab name serde gives a unit enum variant.
fn kebab<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_string(),
    }
}

/// The colour of a value in the counts table.
#[derive(Clone, Copy)]
enum Tone {
    Plain,
    Bold,
    Good,
    Warn,
    Bad,
}

/// Yellow when something happened that deserves a look.
fn warn_if(n: u64) -> Tone {
    if n > 0 {
        Tone::Warn
    } else {
        Tone::Plain
    }
}

/// Colours that vanish when colour is off.
/// Colour for text views, or none: every method returns the text unchanged
/// when colour is off. Shared by the report and the diagnosis views.
#[derive(Debug, Clone, Copy)]
pub struct Paint {
    on: bool,
}

impl Paint {
    /// Paint as `style` says.
    pub fn new(style: Style) -> Self {
        Paint { on: style.color }
    }
    fn apply(&self, s: &str, f: impl Fn(&str) -> String) -> String {
        if self.on {
            f(s)
        } else {
            s.to_string()
        }
    }
    fn tone(&self, s: &str, tone: Tone) -> String {
        match tone {
            Tone::Plain => s.to_string(),
            Tone::Bold => self.bold(s),
            Tone::Good => self.green(s),
            Tone::Warn => self.yellow(s),
            Tone::Bad => self.red(s),
        }
    }
    pub fn bold(&self, s: &str) -> String {
        self.apply(s, |s| s.bold().to_string())
    }
    pub fn dim(&self, s: &str) -> String {
        self.apply(s, |s| s.dimmed().to_string())
    }
    pub fn red(&self, s: &str) -> String {
        self.apply(s, |s| s.red().bold().to_string())
    }
    pub fn yellow(&self, s: &str) -> String {
        self.apply(s, |s| s.yellow().to_string())
    }
    pub fn green(&self, s: &str) -> String {
        self.apply(s, |s| s.green().to_string())
    }
    pub fn cyan(&self, s: &str) -> String {
        self.apply(s, |s| s.cyan().to_string())
    }
}

/// Most failed items listed in the text output; the rest are in `-o json`.
const MAX_FAILED_SHOWN: usize = 20;
/// Most conflict managers listed in the text output.
const MAX_MANAGERS_SHOWN: usize = 5;
/// Width of the label column of the counts table.
const LABEL_WIDTH: usize = 22;

/// The human summary. Returns a `String` so colour codes never split a write.
fn text(report: &Report, style: Style) -> String {
    let p = Paint::new(style);
    let mut o = String::new();
    for section in [
        header,
        banners,
        counts,
        failed_items,
        conflicts_by_manager,
        run_errors,
        what_now,
    ] {
        section(&mut o, report, &p);
    }
    o
}

/// Header: what ran, where, and how long.
fn header(o: &mut String, report: &Report, p: &Paint) {
    let mode = match report.mode {
        Mode::Scan => "scan",
        Mode::Delete => "delete",
        Mode::DryRunServer => "delete --dry-run=server",
    };
    let mut cluster = report
        .cluster
        .server
        .clone()
        .unwrap_or_else(|| "unknown server".to_string());
    if let Some(ctx) = &report.cluster.context {
        let _ = write!(cluster, " (context {ctx})");
    }
    let _ = writeln!(
        o,
        "{} {} on {} in {}",
        p.bold("cilium-gc"),
        p.bold(mode),
        cluster,
        run_duration(report.duration_seconds),
    );
    if report.mode == Mode::DryRunServer {
        let _ = writeln!(
            o,
            "{}",
            p.yellow("server-side dry run: nothing was deleted")
        );
    }
}

/// Banners: an abort, an interruption, failed preflight checks.
fn banners(o: &mut String, report: &Report, p: &Paint) {
    if let Some(a) = &report.aborted {
        let _ = writeln!(
            o,
            "{}",
            p.red(&format!("ABORTED ({}): {}", kebab(&a.reason), a.message))
        );
    }
    if report.interrupted && report.aborted.is_none() {
        let _ = writeln!(o, "{}", p.red("INTERRUPTED: the run stopped early"));
    }
    for c in report.preflight.checks.iter().filter(|c| !c.passed) {
        let _ = writeln!(
            o,
            "{} {}: {}",
            p.red("preflight failed"),
            kebab(&c.name),
            c.message
        );
    }
    o.push('\n');
}

/// The counts, one row each; decision reasons indented under `scanned`.
fn counts(o: &mut String, report: &Report, p: &Paint) {
    let s = &report.summary;
    let row = |o: &mut String, indent: usize, label: &str, value: String, tone: Tone| {
        let label = format!("{:indent$}{label}", "");
        let value = p.tone(&format!("{value:>12}"), tone);
        let _ = writeln!(o, "  {label:<LABEL_WIDTH$} {value}");
    };
    let n = |v: u64| thousands(v);
    row(o, 0, "scanned", n(s.scanned), Tone::Plain);
    let mut reasons: Vec<(Reason, u64)> = Reason::ALL
        .iter()
        .map(|&r| (r, s.reasons.get(r)))
        .filter(|&(_, n)| n > 0)
        .collect();
    // Largest first; ties keep report order (the sort is stable).
    reasons.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    for (r, count) in reasons {
        row(o, 2, r.as_str(), n(count), Tone::Plain);
    }
    row(o, 0, "candidates", n(s.candidates), Tone::Bold);
    if report.mode != Mode::Scan {
        let deleted = if report.mode == Mode::DryRunServer {
            "validated"
        } else {
            "deleted"
        };
        row(o, 0, deleted, n(s.deleted), Tone::Good);
        row(o, 0, "already gone", n(s.already_gone), Tone::Plain);
        row(o, 0, "reclaimed", n(s.reclaimed), Tone::Plain);
        let failed = if s.failed > 0 { Tone::Bad } else { Tone::Plain };
        row(o, 0, "failed", n(s.failed), failed);
        row(
            o,
            0,
            "not attempted",
            n(s.not_attempted),
            warn_if(s.not_attempted),
        );
    }
    if report.mode != Mode::Scan || s.marked > 0 {
        row(o, 0, "marked", n(s.marked), Tone::Plain);
    }
    row(o, 0, "conflicts", n(s.conflicts), warn_if(s.conflicts));
    row(o, 0, "retries", n(s.retries), warn_if(s.retries));
    row(o, 0, "throttled", n(s.throttled), warn_if(s.throttled));
    row(
        o,
        0,
        "server errors",
        n(s.server_errors),
        warn_if(s.server_errors),
    );
    let pages = format!("{} / {}", n(s.list_pages), n(s.list_restarts));
    row(o, 0, "list pages / restarts", pages, Tone::Plain);
    let restarts = s.watcher_restarts;
    row(o, 0, "watcher restarts", n(restarts), warn_if(restarts));
    if s.malformed > 0 {
        row(o, 0, "malformed objects", n(s.malformed), Tone::Warn);
    }
    if report.mode != Mode::Scan {
        let rate = format!("{:.1}/s", s.delete_rate_per_second);
        row(o, 0, "delete rate", rate, Tone::Plain);
        if let (Some(t), Some(low)) = (s.throttled_seconds, s.lowest_rate_per_second) {
            if t > 0.0 {
                let v = format!("{t:.1}s below --qps, lowest {low:.1}/s");
                row(o, 0, "slowed by throttling", v, Tone::Warn);
            }
        }
    }
}

/// Failed items, the first few of them.
fn failed_items(o: &mut String, report: &Report, p: &Paint) {
    let failed: Vec<_> = report
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::Failed)
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(
            o,
            "\n{}",
            p.red(&format!("Failed ({}):", thousands(failed.len() as u64)))
        );
        for i in failed.iter().take(MAX_FAILED_SHOWN) {
            let ns = i.namespace.as_deref().unwrap_or("-");
            let err = i.last_error.as_deref().unwrap_or("no error recorded");
            let _ = writeln!(
                o,
                "  {} {} {}: {err}",
                i.name,
                p.dim(&format!("[{ns}]")),
                p.dim(&format!(
                    "{} {}",
                    i.attempts,
                    plural(u64::from(i.attempts), "attempt", "attempts")
                )),
            );
        }
        if failed.len() > MAX_FAILED_SHOWN {
            let _ = writeln!(
                o,
                "  {}",
                p.dim(&format!(
                    "... and {} more (see -o json)",
                    thousands((failed.len() - MAX_FAILED_SHOWN) as u64)
                ))
            );
        }
    }
}

/// Who kept changing our candidates: conflicts by field manager.
fn conflicts_by_manager(o: &mut String, report: &Report, p: &Paint) {
    let mut managers: BTreeMap<&str, u64> = BTreeMap::new();
    for c in report.items.iter().flat_map(|i| &i.conflicts) {
        *managers
            .entry(c.manager.as_deref().unwrap_or("(unknown)"))
            .or_insert(0) += 1;
    }
    if !managers.is_empty() {
        let mut managers: Vec<_> = managers.into_iter().collect();
        managers.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        let _ = writeln!(o, "\n{}", p.bold("Conflicts by field manager:"));
        for (m, n) in managers.iter().take(MAX_MANAGERS_SHOWN) {
            let _ = writeln!(o, "  {m:<LABEL_WIDTH$} {:>12}", thousands(*n));
        }
        if managers.len() > MAX_MANAGERS_SHOWN {
            let _ = writeln!(
                o,
                "  {}",
                p.dim(&format!(
                    "... and {} more",
                    managers.len() - MAX_MANAGERS_SHOWN
                ))
            );
        }
    }
}

/// Run-level errors and warnings.
fn run_errors(o: &mut String, report: &Report, p: &Paint) {
    if !report.errors.is_empty() {
        let _ = writeln!(
            o,
            "\n{}",
            p.yellow(&format!(
                "Errors ({}):",
                thousands(report.errors.len() as u64)
            ))
        );
        for e in &report.errors {
            let _ = writeln!(
                o,
                "  {} {}",
                p.dim(&format!("[{}]", kebab(&e.kind))),
                e.message
            );
        }
    }
}

/// What to do next.
fn what_now(o: &mut String, report: &Report, p: &Paint) {
    let steps = next_steps(report);
    if !steps.is_empty() {
        o.push('\n');
        for step in steps {
            let _ = writeln!(o, "{} {step}", p.cyan("Next:"));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cilium_gc::report::*;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    fn item(name: &str, reason: Reason, outcome: Outcome) -> Item {
        Item {
            name: name.into(),
            id: name.parse().ok(),
            namespace: Some("prod".into()),
            created_at: Some(ts("2026-05-01T00:00:00Z")),
            marked_at: None,
            reason,
            outcome,
            attempts: 0,
            conflicts: vec![],
            last_error: None,
        }
    }

    pub(crate) fn sample() -> Report {
        let mut failed = item("70001", Reason::Stale, Outcome::Failed);
        failed.attempts = 4;
        failed.last_error = Some("503 Service Unavailable after 3 retries".into());
        failed.conflicts = vec![Conflict {
            expected_resource_version: "10".into(),
            observed_resource_version: Some("11".into()),
            manager: Some("cilium-agent".into()),
            operation: Some("Update".into()),
            time: Some(ts("2026-06-01T11:59:00Z")),
        }];
        let mut deleted = item("70002", Reason::Stale, Outcome::Deleted);
        deleted.attempts = 1;
        Report {
            schema: SCHEMA_ID.into(),
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            tool: Tool {
                name: "kubectl-cilium-gc".into(),
                version: "0.1.0".into(),
                commit: Some("abc123".into()),
            },
            cluster: ClusterInfo {
                server: Some("https://10.0.0.1:6443".into()),
                context: Some("prod-eu".into()),
                kubernetes_version: Some("v1.33.1".into()),
                cilium_config: vec![ConfigValue {
                    key: "identity-allocation-mode".into(),
                    value: "crd".into(),
                    source: ConfigSource::CiliumConfig,
                }],
            },
            started_at: ts("2026-06-01T12:00:00Z"),
            finished_at: ts("2026-06-01T12:00:12.5Z"),
            duration_seconds: 12.5,
            mode: Mode::Delete,
            options: Options {
                cilium_namespace: "kube-system".into(),
                selector: None,
                namespaces: vec![],
                min_age_seconds: None,
                heartbeat_timeout_seconds: 1800.0,
                local_range: IdRange {
                    min: 256,
                    max: 65535,
                },
                page_size: 500,
                concurrency: 4,
                qps: 50.0,
                burst: 10,
                max_conflict_retries: 3,
                max_retries: 5,
                max_deletions: None,
                max_percent: None,
                mark: false,
                force: false,
                items: ItemsMode::Unused,
                request_timeout_seconds: None,
                identity_allocation_mode: None,
                allow_short_heartbeat_timeout: false,
                allow_unreadable_endpoints: false,
            },
            exit_code: 4,
            interrupted: false,
            aborted: None,
            preflight: Preflight::default(),
            summary: Summary {
                scanned: 1_234_567,
                reasons: ReasonCounts {
                    in_use: 1_000,
                    unmarked: 12_403,
                    stale: 2,
                    ..Default::default()
                },
                candidates: 2,
                deleted: 1,
                failed: 1,
                conflicts: 1,
                list_pages: 2_470,
                list_restarts: 1,
                delete_rate_per_second: 8.0,
                ..Default::default()
            },
            items: vec![failed, deleted],
            errors: vec![RunError {
                kind: ErrorKind::MalformedObject,
                message: "ciliumidentities/abc: missing security-labels".into(),
            }],
        }
    }

    fn rendered(r: &Report, f: OutputFormat, color: bool) -> String {
        let mut out = Vec::new();
        render(r, f, Style { color }, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_is_one_document_that_round_trips() {
        let r = sample();
        let out = rendered(&r, OutputFormat::Json, true);
        assert!(out.ends_with("}\n") && !out.ends_with("\n\n"));
        assert!(!out.contains('\x1b'), "JSON is never coloured");
        let mut docs = serde_json::Deserializer::from_str(&out).into_iter::<serde_json::Value>();
        let doc = docs.next().unwrap().unwrap();
        assert!(docs.next().is_none(), "exactly one document");
        let back: Report = serde_json::from_value(doc.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), doc);
        assert_eq!(doc, serde_json::to_value(&r).unwrap());
        assert_eq!(doc["items"][0]["outcome"], "failed");
    }

    #[test]
    fn yaml_parses_to_the_same_report() {
        let r = sample();
        let out = rendered(&r, OutputFormat::Yaml, true);
        assert!(!out.contains('\x1b'));
        let back: Report = serde_saphyr::from_str(&out).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&r).unwrap()
        );
    }

    #[test]
    fn text_has_the_numbers_and_next_steps() {
        let out = rendered(&sample(), OutputFormat::Text, false);
        for want in [
            "delete on https://10.0.0.1:6443 (context prod-eu) in 12.5s",
            "1,234,567",
            "12,403",
            "2,470 / 1",
            "8.0/s",
            "Failed (1):",
            "70001",
            "503 Service Unavailable after 3 retries",
            "cilium-agent",
            "[malformed-object] ciliumidentities/abc",
            "Next: 1 deletion failed: see the failed items; rerun to retry them",
            "Next: 12,403 unused identities are unmarked: rerun with --mark, then again after 30m",
        ] {
            assert!(out.contains(want), "missing {want:?} in:\n{out}");
        }
        // Reasons sorted by count: unmarked (12,403) before in-use (1,000) before stale (2).
        let pos = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(pos("unmarked") < pos("in-use") && pos("in-use") < pos("stale"));
    }

    #[test]
    fn colour_only_when_asked() {
        let r = sample();
        assert!(!rendered(&r, OutputFormat::Text, false).contains('\x1b'));
        assert!(rendered(&r, OutputFormat::Text, true).contains("\x1b["));
    }

    #[test]
    fn banners_for_abort_and_interrupt() {
        let mut r = sample();
        r.aborted = Some(Abort {
            reason: AbortReason::BlastRadius,
            message: "2 candidates exceed --max-deletions 1".into(),
        });
        r.options.max_deletions = Some(1);
        let out = rendered(&r, OutputFormat::Text, false);
        assert!(out.contains("ABORTED (blast-radius): 2 candidates exceed"));
        assert!(out.contains("raise --max-deletions"));
        assert!(out.contains("-l/-n"));

        let mut r = sample();
        r.interrupted = true;
        r.summary.not_attempted = 1_500;
        let out = rendered(&r, OutputFormat::Text, false);
        assert!(out.contains("INTERRUPTED"));
        assert!(out.contains("1,500 candidates not attempted: rerun to finish"));
    }

    #[test]
    fn failed_items_are_capped() {
        let mut r = sample();
        r.items = (0..25)
            .map(|n| {
                let mut i = item(&format!("{}", 1000 + n), Reason::Stale, Outcome::Failed);
                i.last_error = Some("boom".into());
                i
            })
            .collect();
        let out = rendered(&r, OutputFormat::Text, false);
        assert!(out.contains("Failed (25):"));
        assert!(out.contains("1019") && !out.contains("1020 "));
        assert!(out.contains("... and 5 more (see -o json)"));
    }

    #[test]
    fn next_steps_per_mode() {
        let mut r = sample();
        r.mode = Mode::Scan;
        r.summary.failed = 0;
        let steps = next_steps(&r);
        assert_eq!(
            steps,
            vec![
                "2 identities are stale: run `kubectl cilium-gc delete` to remove them",
                "12,403 unused identities are unmarked: run `kubectl cilium-gc delete --mark`, \
                 then again after 30m",
            ]
        );

        r.mode = Mode::Delete;
        r.options.mark = true;
        r.options.heartbeat_timeout_seconds = 7200.0;
        r.summary.marked = 12_403;
        assert_eq!(
            next_steps(&r),
            vec!["12,403 identities were marked: rerun after 2h to delete those still unused"]
        );

        r.summary.marked = 0;
        r.summary.reasons = ReasonCounts::default();
        assert!(next_steps(&r).is_empty());

        r.mode = Mode::DryRunServer;
        r.summary.deleted = 1;
        assert_eq!(
            next_steps(&r),
            vec![
                "The server accepted 1 deletion: run `kubectl cilium-gc delete` without \
                  --dry-run=server to delete them"
            ]
        );
    }

    #[test]
    fn colour_truth_table() {
        use ColorChoice::*;
        // (choice, terminal, NO_COLOR) -> colour
        let table = [
            (Auto, true, false, true),
            (Auto, true, true, false),
            (Auto, false, false, false),
            (Auto, false, true, false),
            (Always, true, false, true),
            (Always, true, true, true),
            (Always, false, false, true),
            (Always, false, true, true),
            (Never, true, false, false),
            (Never, true, true, false),
            (Never, false, false, false),
            (Never, false, true, false),
        ];
        for (choice, tty, no_color, want) in table {
            assert_eq!(
                color_allowed(choice, tty, no_color),
                want,
                "{choice:?} tty={tty} NO_COLOR={no_color}"
            );
        }
    }

    #[test]
    fn value_enum_names() {
        use clap::ValueEnum;
        let names = |v: &[OutputFormat]| -> Vec<String> {
            v.iter()
                .map(|f| f.to_possible_value().unwrap().get_name().to_string())
                .collect()
        };
        assert_eq!(
            names(OutputFormat::value_variants()),
            ["text", "json", "yaml", "markdown"]
        );
        let colors: Vec<_> = ColorChoice::value_variants()
            .iter()
            .map(|c| c.to_possible_value().unwrap().get_name().to_string())
            .collect();
        assert_eq!(colors, ["auto", "always", "never"]);
    }

    #[test]
    fn numbers_and_durations() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_403), "12,403");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(human_duration(1800.0), "30m");
        assert_eq!(human_duration(7200.0), "2h");
        assert_eq!(human_duration(5400.0), "1h30m");
        assert_eq!(human_duration(45.0), "45s");
        assert_eq!(human_duration(172_800.0), "2d");
        assert_eq!(human_duration(0.0), "0s");
        assert_eq!(run_duration(0.25), "250ms");
        assert_eq!(run_duration(12.44), "12.4s");
        assert_eq!(run_duration(125.0), "2m5s");
    }

    #[test]
    fn report_file_is_written_whole_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "old").unwrap();
        let r = sample();
        write_report_file(&path, &r).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("}\n"));
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, serde_json::to_value(&r).unwrap());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "report.json")
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }

    #[test]
    fn report_file_error_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a directory: the rename fails after the temp file was written.
        let path = dir.path().join("taken");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("keep"), "x").unwrap();
        assert!(write_report_file(&path, &sample()).is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["taken"]);
        assert!(write_report_file(&dir.path().join("missing/report.json"), &sample()).is_err());
    }
}
