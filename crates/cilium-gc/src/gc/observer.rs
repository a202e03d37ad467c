//! Who watches a run: progress and the confirmation before the first write
//! go through an [`Observer`] the caller provides (the plugin's terminal,
//! or nobody).

/// What a run reports to the person watching, and asks them: progress and
/// the confirmation before the first write. The engine has no terminal;
/// the plugin implements this on stderr and stdin.
pub trait Observer: Send + Sync {
    /// A list starts (`what`: "listing identities", ...).
    fn listing(&self, _what: &str) {}
    /// One more object listed.
    fn listed(&self) {}
    /// A write phase starts with `total` items.
    fn start_phase(&self, _label: &str, _total: u64) {}
    /// One more item of the phase done.
    fn inc(&self) {}
    /// The run is over: clear any display.
    fn finish(&self) {}
    /// Ask to go ahead with `question`; `None` when nobody can be asked.
    fn confirm(&self, _question: &str) -> Option<bool> {
        None
    }
    /// Ask to go ahead with the writes a plan holds. Called from a thread
    /// of its own, so it may block. By default asks [`Observer::confirm`]
    /// with the one-cluster question ("About to delete 12 stale identities
    /// on …"); a fleet run gathers every
    /// cluster's before asking once.
    fn confirm_writes(&self, pending: &PendingWrites) -> Option<bool> {
        self.confirm(&pending.question())
    }
}

/// What a delete run is about to write, asked about before its first write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingWrites {
    /// The API server.
    pub server: String,
    /// The kubeconfig context, when one was used.
    pub context: Option<String>,
    /// Identities listed.
    pub scanned: u64,
    /// Stale identities to delete.
    pub deletes: u64,
    /// Unmarked identities to mark (`--mark`), else 0.
    pub marks: u64,
}

impl PendingWrites {
    /// The one-cluster question: "About to delete 12 stale identities on
    /// https://… (context prod)."
    pub(crate) fn question(&self) -> String {
        format!(
            "About to delete {} stale identities{} on {}{}.",
            self.deletes,
            if self.marks > 0 {
                format!(" and mark {} unmarked ones", self.marks)
            } else {
                String::new()
            },
            self.server,
            self.context
                .as_deref()
                .map(|c| format!(" (context {c})"))
                .unwrap_or_default(),
        )
    }
}

/// Nobody watching: no progress, no one to ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct Headless;

impl Observer for Headless {}

/// How the run talks to the person at the terminal, if any: a shared
/// handle on their [`Observer`] (one name for one concept: the observer is
/// who watches; `Ui` is only how a run holds it).
#[derive(Clone)]
pub struct Ui {
    /// Progress display and the confirmation prompt.
    pub observer: std::sync::Arc<dyn Observer>,
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ui").finish_non_exhaustive()
    }
}

impl Ui {
    /// Report to and ask `observer`.
    pub fn new(observer: impl Observer + 'static) -> Self {
        Ui {
            observer: std::sync::Arc::new(observer),
        }
    }
    /// No terminal at all (tests, demo in CI).
    pub fn headless() -> Self {
        Ui::new(Headless)
    }
}
