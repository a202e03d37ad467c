//! Help text beyond the flags: the top-level page, and each subcommand's
//! examples, which end its `--help` as kubectl's do.

/// The top-level `--help`: one screen. The connection flags are listed by
/// name only (each subcommand's `--help` describes them, as `kubectl
/// options` does for kubectl's), and the exit codes in one line (each
/// subcommand's `--help` and the man page give them in full).
pub const ROOT_TEMPLATE: &str = "\
{about-with-newline}
{usage-heading} {usage}

Commands:
{subcommands}

Options:
  -v, --verbose...    Increase log detail on stderr (-v: info, -vv: debug, -vvv: trace)
  --color <WHEN>  When to colour the text output: auto (default), always, never
  -h, --help          Print help (each command's --help lists its flags)
  -V, --version       Print version

Connection (kubectl's flags, accepted by every command):
  --kubeconfig, --context, --all-contexts, --context-regex, --cluster, --user, -s/--server,
  --token, --certificate-authority, --insecure-skip-tls-verify, --tls-server-name, --as,
  --as-group, --request-timeout

Examples:
  # What is stale, and why (read-only)
  kubectl cilium-gc scan
  # Delete the stale identities: shows the plan and asks first
  kubectl cilium-gc delete

Exit codes: 0 success, 1 bug, 2 usage, 3 refused, 4 some items failed, 5 blast radius,
130/143 interrupted; each command's --help gives them in full.";

/// `after` text of a subcommand: `before` (its exit codes, or nothing),
/// then its examples, last.
pub fn after(before: &str, examples: &str) -> String {
    if before.is_empty() {
        format!("Examples:\n{examples}")
    } else {
        format!("{before}\n\nExamples:\n{examples}")
    }
}

/// `scan`'s examples.
pub const SCAN: &str = "  # What is stale, and why (read-only)
  kubectl cilium-gc scan
  # The stale identities of two namespaces' pods, as JSON
  kubectl cilium-gc scan -n team-a,team-b -o json
  # Every cluster of the kubeconfig: one table, one fleet report
  kubectl cilium-gc scan --all-contexts";

/// `delete`'s examples.
pub const DELETE: &str = "  # Show the plan, ask, delete at 40/s
  kubectl cilium-gc delete
  # The API server validates every delete; nothing is deleted
  kubectl cilium-gc delete --dry-run=server
  # From a CronJob or CI: no question, the JSON report on stdout
  kubectl cilium-gc delete --yes -o json --max-deletions 5000
  # Also mark unused unmarked identities, so a later run can collect them
  kubectl cilium-gc delete --mark";

/// `demo`'s examples.
pub const DEMO: &str =
    "  # Agents reclaim identities during the run, beside cilium-operator 1.15's GC pass
  kubectl cilium-gc demo
  # 65,000 identities, only the scan
  kubectl cilium-gc demo --scenario seed --scan-only
  # Five simulated clusters in one fleet run
  kubectl cilium-gc demo --fleet";

/// `diagnose`'s examples.
pub const DIAGNOSE: &str = "  # How full the identity space is, and why GC is not keeping up
  kubectl cilium-gc diagnose
  # For a public ticket: Markdown, names replaced by keyed hashes
  kubectl cilium-gc diagnose -o markdown --redact
  # Read the operator's metrics twice, 20 minutes apart
  kubectl cilium-gc diagnose --operator-metrics-wait 20m
  # One document for every cluster of the kubeconfig
  kubectl cilium-gc diagnose --all-contexts";

/// `schema`'s examples.
pub const SCHEMA: &str = "  # The report's JSON Schema (scan, delete, demo)
  kubectl cilium-gc schema
  # The fleet report's
  kubectl cilium-gc schema fleet-report";

/// `version`'s examples.
pub const VERSION: &str = "  # The version and git commit
  kubectl cilium-gc version
  # The version alone
  kubectl cilium-gc --version";

/// `completion`'s examples.
pub const COMPLETION: &str = "  # Bash, for this shell
  source <(kubectl cilium-gc completion bash)
  # Zsh, installed once
  kubectl cilium-gc completion zsh > \"${fpath[1]}/_kubectl-cilium_gc\"";
