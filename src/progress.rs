//! Progress on stderr: pages listed, then deletes done/total with rate and
//! ETA. Drawn only when stderr is a terminal; silent otherwise, so CronJob
//! logs and pipes stay clean.

use std::io::{BufRead, IsTerminal, Write};

use cilium_gc::gc::Observer;
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
        let mut err = std::io::stderr();
        let _ = write!(err, "{question}\nProceed? [y/N] ");
        let _ = err.flush();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err() {
            return Some(false);
        }
        Some(matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
    }
}
