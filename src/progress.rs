//! Progress on stderr: pages listed, then deletes done/total with rate and
//! ETA. Drawn only when stderr is a terminal; silent otherwise, so CronJob
//! logs and pipes stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress display that may be disabled.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Enabled only when `enabled` (stderr is a terminal and not `-o json` piped...).
    pub fn new(enabled: bool) -> Self {
        let bar = enabled.then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{spinner} {msg} {pos} pages")
                    .expect("valid template"),
            );
            b
        });
        Progress { bar }
    }

    /// A disabled display.
    pub fn hidden() -> Self {
        Progress { bar: None }
    }

    /// Phase message while listing.
    pub fn listing(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_owned());
            b.tick();
        }
    }

    /// Something happened while listing (keeps the spinner moving).
    pub fn page_tick(&self) {
        if let Some(b) = &self.bar {
            b.tick();
        }
    }

    /// One list page done.
    pub fn page(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// Switch to a bounded phase (deletes or marks).
    pub fn start_phase(&self, label: &str, total: u64) {
        if let Some(b) = &self.bar {
            b.set_position(0);
            b.set_length(total);
            b.set_style(
                ProgressStyle::with_template("{msg:>8} [{bar:30}] {pos}/{len} {per_sec} ETA {eta}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            b.set_message(label.to_owned());
        }
    }

    /// One item done.
    pub fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
