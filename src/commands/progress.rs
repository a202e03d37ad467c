//! Progress on stderr: pages listed, then deletes done/total with rate and
//! ETA. Drawn only when stderr is a terminal; silent otherwise, so CronJob
//! logs and pipes stay clean.

use std::io::{BufRead, IsTerminal, Write};

use cilium_gc::Observer;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// A style with a `{rate}` key: items per second with one decimal.
fn with_rate(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("valid template")
        .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.1}/s", s.per_sec());
        })
}

/// The person at the terminal: a progress display on stderr, drawn only when
/// stderr is a terminal, and the confirmation prompt, asked only when stdin
/// is one too.
#[derive(Debug, Clone)]
pub struct Terminal {
    bar: Option<ProgressBar>,
    interactive: bool,
}

impl Terminal {
    /// Detect from the process's terminals.
    pub fn detect() -> Self {
        let tty = std::io::stderr().is_terminal();
        let bar = tty.then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            b.set_style(with_rate("{spinner} {msg}: {pos} ({rate})"));
            b.set_message("connecting");
            b
        });
        Terminal {
            bar,
            interactive: tty && std::io::stdin().is_terminal(),
        }
    }
}

impl Observer for Terminal {
    fn listing(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_position(0);
            b.set_message(what.to_owned());
            b.tick();
        }
    }

    fn listed(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    fn start_phase(&self, label: &str, total: u64) {
        if let Some(b) = &self.bar {
            b.set_position(0);
            b.set_length(total);
            b.set_style(
                with_rate("{msg:>8} [{bar:30}] {pos}/{len} {rate} ETA {eta}").progress_chars("=> "),
            );
            b.set_message(label.to_owned());
        }
    }

    fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }

    /// `question`, then "Proceed? [y/N]" on stderr; only "y" or "yes" is yes.
    fn confirm(&self, question: &str) -> Option<bool> {
        if !self.interactive {
            return None;
        }
        if let Some(b) = &self.bar {
            b.suspend(|| ());
        }
        Some(ask_yes_no(&format!("{question}\n")))
    }
}

/// `question`, then "Proceed? [y/N] " on stderr, and the answer on stdin:
/// only "y" or "yes" is yes; an unreadable stdin is no.
fn ask_yes_no(question: &str) -> bool {
    let mut err = std::io::stderr();
    let _ = write!(err, "{question}Proceed? [y/N] ");
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

/// A fleet run at the terminal: one progress line per cluster (indicatif's
/// `MultiProgress`) on stderr when it is a terminal, nothing otherwise,
/// and one confirmation for every cluster's writes, asked only when stdin
/// is a terminal too.
pub struct FleetTerminal {
    multi: Option<indicatif::MultiProgress>,
    bars: std::sync::Mutex<Vec<(String, ProgressBar)>>,
    width: usize,
    interactive: bool,
}

impl FleetTerminal {
    /// Detect from the process's terminals; `contexts` sets the name column.
    pub fn detect(contexts: &[String]) -> Self {
        let tty = std::io::stderr().is_terminal();
        FleetTerminal {
            multi: tty
                .then(|| indicatif::MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            bars: std::sync::Mutex::new(Vec::new()),
            width: contexts
                .iter()
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
                .min(40),
            interactive: tty && std::io::stdin().is_terminal(),
        }
    }

    /// Clear every line.
    pub fn finish(&self) {
        if let Some(m) = &self.multi {
            let _ = m.clear();
        }
    }

    fn bar_of(&self, context: &str) -> Option<ProgressBar> {
        let bars = self.bars.lock().unwrap_or_else(|e| e.into_inner());
        bars.iter()
            .find(|(c, _)| c == context)
            .map(|(_, b)| b.clone())
    }
}

/// One cluster's line of a [`FleetTerminal`].
struct ClusterLine {
    bar: ProgressBar,
}

impl Observer for ClusterLine {
    fn listing(&self, what: &str) {
        self.bar.set_position(0);
        self.bar.set_message(what.to_owned());
    }
    fn listed(&self) {
        self.bar.inc(1);
    }
    fn start_phase(&self, label: &str, total: u64) {
        self.bar.set_position(0);
        self.bar.set_length(total);
        let prefix_style = "{prefix} {msg:>8} [{bar:30}] {pos}/{len} {rate} ETA {eta}";
        self.bar
            .set_style(with_rate(prefix_style).progress_chars("=> "));
        self.bar.set_message(label.to_owned());
    }
    fn inc(&self) {
        self.bar.inc(1);
    }
}

impl cilium_gc_fleet::FleetObserver for FleetTerminal {
    fn cluster(&self, context: &str) -> std::sync::Arc<dyn Observer> {
        let Some(multi) = &self.multi else {
            return std::sync::Arc::new(cilium_gc::Headless);
        };
        let bar = multi.add(ProgressBar::no_length());
        bar.set_style(with_rate("{prefix} {spinner} {msg}: {pos} ({rate})"));
        bar.set_prefix(format!("{context:<w$}", w = self.width));
        bar.set_message("connecting");
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        self.bars
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((context.to_owned(), bar.clone()));
        std::sync::Arc::new(ClusterLine { bar })
    }

    fn cluster_done(&self, entry: &cilium_gc_documents::fleet::ClusterEntry) {
        let Some(bar) = self.bar_of(&entry.context) else {
            return;
        };
        let how = match &entry.error {
            None => "done".to_owned(),
            Some(e) => format!("exit {}: {}", entry.exit_code, e.message),
        };
        bar.set_style(ProgressStyle::with_template("{prefix} {msg}").expect("valid template"));
        bar.finish_with_message(how);
    }

    /// The table of what will be written where, then "Proceed? [y/N]".
    fn confirm_all(&self, pending: &[cilium_gc::PendingWrites]) -> Option<bool> {
        if !self.interactive {
            return None;
        }
        let question = crate::views::fleet::fleet_confirmation(pending);
        let ask = || Some(ask_yes_no(&question));
        match &self.multi {
            Some(m) => m.suspend(ask),
            None => ask(),
        }
    }
}
