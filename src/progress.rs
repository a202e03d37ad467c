//! Progress on stderr: pages listed, then deletes done/total with rate and
//! ETA. Drawn only when stderr is a terminal; silent otherwise, so CronJob
//! logs and pipes stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// A style with a `{rate}` key: items per second with one decimal.
fn with_rate(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("valid template")
        .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.1}/s", s.per_sec());
        })
}

/// A progress display that may be disabled.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Drawn only when `enabled` (the caller checks that stderr is a terminal).
    pub fn new(enabled: bool) -> Self {
        let bar = enabled.then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            b.set_style(with_rate("{spinner} {msg}: {pos} ({rate})"));
            b.set_message("connecting");
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
            b.set_position(0);
            b.set_message(what.to_owned());
            b.tick();
        }
    }

    /// One more object listed.
    pub fn listed(&self) {
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
                with_rate("{msg:>8} [{bar:30}] {pos}/{len} {rate} ETA {eta}").progress_chars("=> "),
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
