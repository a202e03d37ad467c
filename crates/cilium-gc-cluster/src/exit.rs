//! Exit codes: one documented enum, so scripts and CronJobs can tell a partial
//! sweep from a refused preflight from a crash.

/// How a run ended, as the process exit status.
///
/// The numbers are part of the CLI contract and are listed in `--help` and the
/// README; never renumber them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Exit {
    /// Everything asked for was done.
    Success,
    /// An unexpected error: a bug, or a failure we could not classify.
    Unexpected,
    /// Bad flags, kubeconfig or configuration: nothing was sent that writes.
    Usage,
    /// Preflight refused the run for safety (CRD missing, allocation mode,
    /// permission, no endpoints): nothing was written.
    Refused,
    /// The run finished but some items failed; the report lists them.
    PartialFailure,
    /// `--max-deletions` or `--max-percent` was exceeded: nothing was deleted.
    BlastRadius,
    /// SIGINT: no delete was started after the signal; the report is written.
    Interrupted,
    /// SIGTERM: as [`Exit::Interrupted`].
    Terminated,
}

impl Exit {
    /// Every exit, in code order.
    pub(crate) const ALL: [Exit; 8] = [
        Exit::Success,
        Exit::Unexpected,
        Exit::Usage,
        Exit::Refused,
        Exit::PartialFailure,
        Exit::BlastRadius,
        Exit::Interrupted,
        Exit::Terminated,
    ];

    /// The exit with this numeric code, if there is one.
    pub fn from_code(code: u8) -> Option<Exit> {
        Exit::ALL.into_iter().find(|e| e.code() == code)
    }

    /// The numeric process status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Unexpected => 1,
            Exit::Usage => 2,
            Exit::Refused => 3,
            Exit::PartialFailure => 4,
            Exit::BlastRadius => 5,
            Exit::Interrupted => 130,
            Exit::Terminated => 143,
        }
    }

    /// Help text listing every exit code, shared by `--help` and the README.
    pub const HELP: &'static str = "\
Exit codes:
  0    success
  1    unexpected error (a bug ends with `aborted: internal-error` in the report)
  2    usage or configuration error (flags, kubeconfig, unreachable server)
  3    preflight refused (safety check, CRD missing, allocation mode, permission)
  4    finished, but some items failed (see the report)
  5    blast-radius limit hit (--max-deletions / --max-percent): nothing deleted
  130  interrupted by SIGINT (report written)
  143  terminated by SIGTERM (report written)

With several contexts (a fleet run): 0 only if every cluster succeeded, else the
most severe cluster's code, in this order: 143, 130, 1, 4, 5, 3, 2.

Ctrl-C (SIGINT) or SIGTERM stops the run within a second or two, at any phase,
and still writes the report; a second Ctrl-C exits at once, without a report.";
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_listed_in_help() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, vec![0, 1, 2, 3, 4, 5, 130, 143]);
        for (e, c) in Exit::ALL.into_iter().zip(codes.clone()) {
            assert_eq!(Exit::from_code(c), Some(e));
        }
        assert_eq!(Exit::from_code(6), None);
        for c in codes {
            assert!(
                Exit::HELP.contains(&format!("  {c} ")),
                "{c} missing from help"
            );
        }
    }
}
