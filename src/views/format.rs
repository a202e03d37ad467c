//! What every view shares: the output formats (`-o`), colour (`--color`,
//! [`Style`], [`Paint`]), [`write_document`] (JSON, YAML, text or Markdown
//! of any document) and the atomic `--report-file` and metrics textfile.
//!
//! Pure but for [`write_report_file`]/[`write_atomically`] (the one place
//! that touches the filesystem: `--report-file` must never leave half a
//! report behind) and [`stdout_style`]/[`no_color_env`], which read the
//! terminal and the environment so that nothing else does.

use std::io::{self, Write};
use std::path::Path;

use owo_colors::OwoColorize;
use serde::Serialize;

use cilium_gc::human_duration;

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

/// The style of stdout for `--color`: colour only on a terminal, never with
/// `NO_COLOR` in `auto` (shared by every command that writes a document).
pub fn stdout_style(color: ColorChoice) -> Style {
    use std::io::IsTerminal;
    Style {
        color: color_allowed(color, std::io::stdout().is_terminal(), no_color_env()),
    }
}

/// Whether `NO_COLOR` is set to a non-empty value (no-color.org: an empty
/// value counts as unset). The only function here that reads the environment.
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
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
/// Any of our documents (the report, the fleet report) goes through here.
/// The JSON is streamed to the file: a fleet report is never whole in
/// memory (its clusters are read back from disk one at a time).
pub fn write_report_file<T: Serialize>(path: &Path, report: &T) -> io::Result<()> {
    write_atomically_with(path, |file| {
        let mut w = io::BufWriter::new(file);
        serde_json::to_writer_pretty(&mut w, report).map_err(io::Error::from)?;
        w.write_all(b"\n")?;
        w.flush()
    })
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory (so the rename cannot cross filesystems), synced, then renamed
/// over `path` by `tempfile`'s `persist`. The temporary file is removed on
/// any failure.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, |file| file.write_all(bytes))
}

/// [`write_atomically`], the content written by `write` to the file.
fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> io::Result<()>,
) -> io::Result<()> {
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
    write(file.as_file_mut())?;
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

/// The colour of a value in the counts table.
#[derive(Clone, Copy)]
pub(crate) enum Tone {
    Plain,
    Bold,
    Good,
    Warn,
    Bad,
}

/// Yellow when something happened that deserves a look.
pub(crate) fn warn_if(n: u64) -> Tone {
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
    pub(crate) fn tone(&self, s: &str, tone: Tone) -> String {
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

/// A run's wall time: `850ms`, `12.4s`, then [`human_duration`].
pub(crate) fn run_duration(seconds: f64) -> String {
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
pub(crate) fn kebab<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_string(),
    }
}
