//! The agents' own record of refused allocations: cilium-agent's log lines
//! in which Cilium's allocator gives up one attempt because its range has
//! no free id. Pure: lines in, counts out (the files are opened by `saved`).
//!
//! Both releases log the same two texts (`pkg/allocator/allocator.go`):
//! `lockedAllocate` returns `no more available IDs in configured space`
//! when `selectAvailableID` finds none, and `Allocate` logs each failed
//! attempt as the warning `Key allocation attempt failed` with that error
//! (v1.15.6: logrus, `level=warning msg="Key allocation attempt failed" …
//! error="no more available IDs in configured space"`; v1.19.3: slog,
//! `level=WARN msg="Key allocation attempt failed" error="no more …"`), then
//! backs off and tries again (at most 16 attempts). So one line is one
//! refused attempt, not one pod.
//!
//! A sysdump names each container's log `logs-<pod>-<container>-<ts>.log`
//! and its previous run's `logs-<pod>-<container>-<ts>-prev.log`
//! (cilium-cli `sysdump/constants.go`, `ciliumLogsFileName`,
//! `ciliumPreviousLogsFileName`); cilium-cli asks for the kubelet's
//! timestamps, so a line may start with one.

use std::collections::BTreeMap;
use std::io::BufRead;

use jiff::Timestamp;

use cilium_gc_documents::diagnosis::{AllocationRefusals, PodRefusals};

/// The warning `Allocator.Allocate` logs after each failed attempt.
pub(crate) const ATTEMPT_FAILED: &str = "Key allocation attempt failed";
/// The error of an attempt refused because the range has no free id.
pub(crate) const NO_MORE_IDS: &str = "no more available IDs in configured space";
/// The longest example line kept (a key names every label of a pod).
const EXAMPLE_CHARS: usize = 400;
/// The container suffix of an agent's log file, dropped from the pod name.
const AGENT_CONTAINER: &str = "-cilium-agent";

/// One pod's refused attempts so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Tally {
    pub(crate) refusals: u64,
    pub(crate) first_at: Option<Timestamp>,
    pub(crate) last_at: Option<Timestamp>,
    pub(crate) example: Option<String>,
}

impl Tally {
    /// Count one line if it is a refused attempt.
    pub(crate) fn line(&mut self, line: &str) {
        if !(line.contains(ATTEMPT_FAILED) && line.contains(NO_MORE_IDS)) {
            return;
        }
        self.refusals += 1;
        if let Some(t) = line_time(line) {
            self.first_at = earliest(self.first_at, Some(t));
            self.last_at = self.last_at.max(Some(t));
        }
        if self.example.is_none() {
            self.example = Some(line.trim_end().chars().take(EXAMPLE_CHARS).collect());
        }
    }

    /// Every line of `reader` (invalid UTF-8 replaced, never an error: a
    /// log cut mid-line is still read).
    pub(crate) fn read(&mut self, mut reader: impl BufRead) -> std::io::Result<()> {
        let mut buf = Vec::new();
        while reader.read_until(b'\n', &mut buf)? > 0 {
            self.line(&String::from_utf8_lossy(&buf));
            buf.clear();
        }
        Ok(())
    }

    /// Add another log's tally of the same pod (its previous run's).
    pub(crate) fn merge(&mut self, o: Tally) {
        self.refusals += o.refusals;
        self.first_at = earliest(self.first_at, o.first_at);
        self.last_at = self.last_at.max(o.last_at);
        self.example = self.example.take().or(o.example);
    }
}

/// The earlier of two times, either of which may be unknown (`Option`'s
/// own `min` would take an unknown one as the earliest; its `max` is right
/// for the latest).
fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The pod a sysdump log file is of (`logs-<pod>-cilium-agent-<ts>.log`
/// gives `<pod>`; another container's log keeps `<pod>-<container>`);
/// `None` for any other file.
pub(crate) fn log_pod(name: &str) -> Option<String> {
    let stem = name.strip_prefix("logs-")?.strip_suffix(".log")?;
    let stem = stem.strip_suffix("-prev").unwrap_or(stem);
    let stem = match super::sysdump_ts::trailing_ts(stem) {
        Some((before, _)) => before.strip_suffix('-').unwrap_or(stem),
        None => stem,
    };
    let pod = stem.strip_suffix(AGENT_CONTAINER).unwrap_or(stem);
    (!pod.is_empty()).then(|| pod.to_string())
}

/// A log line's time: the kubelet's timestamp in front
/// (`kubectl logs --timestamps`), else logrus's or slog's `time=`, else a
/// JSON line's `"time":"…"`.
pub(crate) fn line_time(line: &str) -> Option<Timestamp> {
    if let Some(t) = line.split_whitespace().next().and_then(|w| w.parse().ok()) {
        return Some(t);
    }
    let value = |rest: &str| -> Option<Timestamp> {
        let v = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next()?,
            None => rest.split_whitespace().next()?,
        };
        v.parse().ok()
    };
    if let Some(i) = line.find("time=") {
        if i == 0 || line.as_bytes()[i - 1].is_ascii_whitespace() {
            return value(&line[i + 5..]);
        }
    }
    line.find("\"time\":").and_then(|i| value(&line[i + 7..]))
}

/// The document's section: every pod with a refusal, most first.
pub(crate) fn summarize(pods: BTreeMap<String, Tally>, logs_read: u64) -> AllocationRefusals {
    let mut by_pod: Vec<PodRefusals> = pods
        .into_iter()
        .filter(|(_, t)| t.refusals > 0)
        .map(|(pod, t)| PodRefusals {
            pod,
            refusals: t.refusals,
            first_at: t.first_at,
            last_at: t.last_at,
            example: t.example.unwrap_or_default(),
        })
        .collect();
    by_pod.sort_by(|a, b| b.refusals.cmp(&a.refusals).then(a.pod.cmp(&b.pod)));
    AllocationRefusals {
        logs_read,
        total: by_pod.iter().map(|p| p.refusals).sum(),
        by_pod,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line as v1.15.6's logrus text formatter writes it (FullTimestamp,
    /// the fields sorted), and one as v1.19.3's slog text handler writes it.
    const V115: &str = r#"time="2026-12-05T22:50:01Z" level=warning msg="Key allocation attempt failed" attempt=3 error="no more available IDs in configured space" key="k8s:app=old-1;k8s:io.kubernetes.pod.namespace=default;" subsys=allocator"#;
    const V119: &str = r#"time=2026-12-05T22:50:02.5Z level=WARN msg="Key allocation attempt failed" error="no more available IDs in configured space" key="k8s:app=job-2;" attempt=0"#;

    #[test]
    fn refused_attempts_are_counted_with_their_times() {
        let mut t = Tally::default();
        for l in [
            V115,
            V119,
            // The kubelet's timestamp in front (a sysdump's logs).
            &format!("2026-12-05T22:50:03.000000001Z {V115}"),
            // Another failure of an attempt, and the refusal elsewhere.
            r#"level=warning msg="Key allocation attempt failed" error="etcd timeout""#,
            r#"level=warning msg="Unable to allocate" error="no more available IDs in configured space""#,
            r#"{"level":"warning","msg":"Key allocation attempt failed","error":"no more available IDs in configured space","time":"2026-12-05T22:49:00Z"}"#,
        ] {
            t.line(l);
        }
        assert_eq!(t.refusals, 4);
        assert_eq!(t.first_at, Some("2026-12-05T22:49:00Z".parse().unwrap()));
        assert_eq!(
            t.last_at,
            Some("2026-12-05T22:50:03.000000001Z".parse().unwrap())
        );
        assert_eq!(t.example.as_deref(), Some(V115));
    }

    #[test]
    fn sysdump_log_names_give_the_pod() {
        let pod = |n: &str| log_pod(n);
        assert_eq!(
            pod("logs-cilium-x7k2p-cilium-agent-20261205-225000.log").as_deref(),
            Some("cilium-x7k2p")
        );
        assert_eq!(
            pod("logs-cilium-x7k2p-cilium-agent-20261205-225000-prev.log").as_deref(),
            Some("cilium-x7k2p")
        );
        assert_eq!(
            pod("logs-cilium-operator-5d-q-cilium-operator-20261205-225000.log").as_deref(),
            Some("cilium-operator-5d-q-cilium-operator")
        );
        assert_eq!(pod("ciliumidentities-20261205-225000.yaml"), None);
        assert_eq!(pod("cilium-bugtool-x-20261205-225000.tar.gz"), None);
    }

    #[test]
    fn pods_are_ordered_by_refusals_and_merged_with_their_previous_run() {
        let mut a = Tally::default();
        a.line(V115);
        let mut prev = Tally::default();
        prev.line(V119);
        prev.line(V119);
        a.merge(prev);
        let mut b = Tally::default();
        b.line(V119);
        let quiet = Tally::default();
        let s = summarize(
            BTreeMap::from([
                ("b".to_string(), b),
                ("a".to_string(), a),
                ("q".to_string(), quiet),
            ]),
            4,
        );
        assert_eq!(s.total, 4);
        assert_eq!(s.logs_read, 4);
        let pods: Vec<_> = s
            .by_pod
            .iter()
            .map(|p| (p.pod.as_str(), p.refusals))
            .collect();
        assert_eq!(pods, [("a", 3), ("b", 1)]);
        assert_eq!(
            s.by_pod[0].first_at,
            Some("2026-12-05T22:50:01Z".parse().unwrap())
        );
        assert_eq!(s.by_pod[0].example, V115);
    }
}
