//! Command-line flags: clap derive, turned into the engine's plain
//! settings values ([`cilium_gc::ScanSettings`], [`cilium_gc::WriteSettings`]), which validate them before any network
//! call (ripgrep's low/high split).
//!
//! kubectl passes none of its own flags to plugins, so the connection flags
//! kubectl users expect (`--kubeconfig`, `--context`, `--as`, ...) are parsed
//! here and applied the way kubectl applies them.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use cilium_gc::parse_duration;
use cilium_gc::Exit;
use cilium_gc::{Pacing, ScanSettings, WriteSettings};
use cilium_gc_documents::report::ItemsMode;

pub use crate::views::format::{ColorChoice, OutputFormat};
pub use kube::{is_dns_label, parse_regex, validate_kube_args, KubeArgs, KubeArgsError};

pub mod heading;
pub mod help;
mod kube;

/// A `--labels` filter whose patterns all compile: one that does not would
/// make cilium-agent refuse to start, so it is refused here as a flag.
fn parse_labels_filter(v: &str) -> Result<String, String> {
    let parsed = cilium_gc_diagnose::LabelFilter::parse(v);
    match parsed.problems.first() {
        Some(problem) => Err(format!(
            "{problem} (cilium-agent would refuse to start on it)"
        )),
        None => Ok(v.to_string()),
    }
}

/// Parse a namespace name: an RFC 1123 label, as Kubernetes requires.
pub fn parse_namespace(s: &str) -> Result<String, String> {
    if is_dns_label(s) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"
        ))
    }
}

/// Parse a `--cluster-label CONTEXT=LABEL`.
pub fn parse_cluster_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((c, l)) if !c.is_empty() && !l.is_empty() && !l.chars().any(char::is_control) => {
            Ok((c.to_owned(), l.to_owned()))
        }
        _ => Err(format!(
            "{s:?}: expected CONTEXT=LABEL, e.g. arn:aws:eks:eu-west-1:1:cluster/prod=prod-eu"
        )),
    }
}

/// Find and safely delete stale Cilium identities.
///
/// Lists CiliumIdentity objects, decides which are stale (unused by any
/// CiliumEndpoint or CiliumEndpointSlice and marked by cilium-operator longer
/// ago than the heartbeat timeout), deletes them at a controlled rate with
/// per-item conflict handling, and writes a machine-readable report.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-cilium_gc",
    version,
    propagate_version = true,
    help_template = help::ROOT_TEMPLATE,
    after_help = Exit::HELP,
    max_term_width = 100
)]
pub struct Cli {
    /// Increase log detail on stderr (-v: info, -vv: debug, -vvv: trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true, help_heading = heading::OUTPUT)]
    pub verbose: u8,
    /// When to colour the text output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true, help_heading = heading::OUTPUT)]
    pub color: ColorChoice,
    /// Connection flags, as kubectl's.
    #[command(flatten, next_help_heading = heading::CONNECTION)]
    pub kube: KubeArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Exit codes of `diagnose`: findings never change them.
pub const DIAGNOSE_EXIT_HELP: &str = "\
Exit codes (findings never change them):
  0    the diagnosis was written
  2    usage or configuration error (flags, kubeconfig, unreachable server, permission)
  3    the CiliumIdentity CRD is not installed
  130  interrupted by SIGINT
  143  terminated by SIGTERM";

/// Subcommands. Each one's help ends with its examples (kubectl's layout).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Decide which identities are stale and why; never writes.
    #[command(after_help = help::after(Exit::HELP, help::SCAN))]
    Scan(ScanArgs),
    /// Delete stale identities (asks first on a terminal; requires --yes otherwise).
    #[command(after_help = help::after(Exit::HELP, help::DELETE))]
    Delete(DeleteArgs),
    /// Start a simulated cluster and run the real code path against it.
    #[cfg(feature = "sim")]
    #[command(after_help = help::after(Exit::HELP, help::DEMO))]
    Demo(DemoArgs),
    /// Report on the health of the identity space (read-only).
    #[command(after_help = help::after(DIAGNOSE_EXIT_HELP, help::DIAGNOSE))]
    Diagnose(DiagnoseArgs),
    /// Print the JSON Schema of the report.
    #[command(after_help = help::after("", help::SCHEMA))]
    Schema(SchemaArgs),
    /// Print the version and git commit.
    #[command(after_help = help::after("", help::VERSION))]
    Version,
    /// Print a shell completion script.
    #[command(after_help = help::after("", help::COMPLETION))]
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    #[command(hide = true)]
    Man,
}

/// `--dry-run` values, as kubectl's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum DryRun {
    /// Really delete.
    #[default]
    None,
    /// Send the deletes with dryRun=All: the server validates, nothing is deleted.
    Server,
}

/// Flags shared by scan and delete. Field order is help order: see
/// [`heading`].
#[derive(Debug, Clone, Args)]
pub struct ScanArgs {
    /// Only identities whose labels match this selector (e.g. app=web,tier!=db).
    #[arg(short = 'l', long, help_heading = heading::SELECTION)]
    pub selector: Option<String>,
    /// Only identities of pods in these namespaces (repeatable or comma-separated).
    #[arg(short = 'n', long = "namespace", value_delimiter = ',', value_parser = parse_namespace, help_heading = heading::SELECTION)]
    pub namespaces: Vec<String>,
    /// Identities of every namespace: the default (identities are
    /// cluster-scoped; -n narrows by the pods' namespace), accepted as kubectl's -A.
    #[arg(short = 'A', long, conflicts_with = "namespaces", help_heading = heading::SELECTION)]
    pub all_namespaces: bool,
    /// Only identities created at least this long ago (e.g. 24h).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", help_heading = heading::SELECTION)]
    pub min_age: Option<Duration>,
    /// Identities per list request (kubectl's --chunk-size).
    #[arg(long, visible_alias = "chunk-size", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10000), help_heading = heading::RATE)]
    pub page_size: u32,
    /// How old a heartbeat mark must be [default: cilium-config's identity-heartbeat-timeout, else 30m].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", help_heading = heading::SAFETY)]
    pub heartbeat_timeout: Option<Duration>,
    /// Output format of the report on stdout.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text, help_heading = heading::OUTPUT)]
    pub output: OutputFormat,
    /// Also write the JSON report to this file (atomically), whatever -o says.
    #[arg(long, value_name = "PATH", help_heading = heading::OUTPUT)]
    pub report_file: Option<PathBuf>,
    /// Which identities get an item in the report.
    #[arg(long, value_enum, default_value_t = Items::Unused, help_heading = heading::OUTPUT)]
    pub items: Items,
    /// The identity allocation mode, stated when cilium-config cannot be
    /// read (delete refuses without it then). Recorded in the report.
    #[arg(long, value_enum, value_name = "MODE", help_heading = heading::SAFETY)]
    pub identity_allocation_mode: Option<AllocationMode>,
    /// Allow a --heartbeat-timeout shorter than 5m or than cilium-config's
    /// identity-heartbeat-timeout (deletes identities agents may still be
    /// about to reuse).
    #[arg(long, help_heading = heading::SAFETY)]
    pub allow_short_heartbeat_timeout: bool,
    /// Write Prometheus metrics of the run to this file (node-exporter textfile format, atomically).
    #[arg(long, value_name = "PATH", help_heading = heading::OUTPUT)]
    pub metrics_file: Option<PathBuf>,
    /// Push Prometheus metrics of the run to this Pushgateway (e.g. http://pushgateway:9091).
    #[arg(long, value_name = "URL", value_parser = crate::output::metrics::parse_pushgateway_url, help_heading = heading::OUTPUT)]
    pub pushgateway: Option<http::Uri>,
    /// The job label to push under.
    #[arg(long, value_name = "NAME", default_value = crate::output::metrics::DEFAULT_JOB, help_heading = heading::OUTPUT)]
    pub pushgateway_job: String,
    /// Namespace of the cilium-config ConfigMap.
    #[arg(long, default_value = "kube-system", value_parser = parse_namespace, help_heading = heading::CONNECTION)]
    pub cilium_namespace: String,
    /// Clusters run at the same time in a fleet run (--qps and --concurrency apply per cluster).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256), help_heading = heading::FLEET)]
    pub parallel: u32,
    /// The `cluster` label of a context's metrics in a fleet run [default: the context name] (repeatable).
    #[arg(long, value_name = "CONTEXT=LABEL", value_parser = parse_cluster_label, help_heading = heading::FLEET)]
    pub cluster_label: Vec<(String, String)>,
    /// Replace contexts and servers with keyed hashes in the fleet report (every format).
    #[arg(long, help_heading = heading::FLEET)]
    pub redact: bool,
    /// Skip the read-only diagnosis of each cluster before its run (faster;
    /// the table's GC verdict and worst finding stay empty).
    #[arg(long, help_heading = heading::FLEET)]
    pub no_diagnosis: bool,
}

/// `--items`: which identities get an item in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Items {
    /// Every identity, in-use ones included.
    All,
    /// Every identity that was not in use.
    #[default]
    Unused,
    /// Only identities something was done to or tried on.
    Actionable,
    /// None: counts only.
    None,
}

impl From<Items> for ItemsMode {
    fn from(i: Items) -> Self {
        match i {
            Items::All => ItemsMode::All,
            Items::Unused => ItemsMode::Unused,
            Items::Actionable => ItemsMode::Actionable,
            Items::None => ItemsMode::None,
        }
    }
}

/// Cilium's `identity-allocation-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AllocationMode {
    /// CiliumIdentity objects (the only mode this tool collects in).
    Crd,
    /// Identities in etcd.
    Kvstore,
    /// Both, reading from the kvstore.
    #[value(name = "doublewrite-readkvstore")]
    DoublewriteReadkvstore,
    /// Both, reading from CRDs.
    #[value(name = "doublewrite-readcrd")]
    DoublewriteReadcrd,
}

impl AllocationMode {
    /// The value as cilium-config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            AllocationMode::Crd => "crd",
            AllocationMode::Kvstore => "kvstore",
            AllocationMode::DoublewriteReadkvstore => "doublewrite-readkvstore",
            AllocationMode::DoublewriteReadcrd => "doublewrite-readcrd",
        }
    }
}

impl ScanArgs {
    /// The engine's listing and narrowing settings.
    pub fn settings(&self) -> ScanSettings {
        ScanSettings {
            cilium_namespace: self.cilium_namespace.clone(),
            selector: self.selector.clone(),
            namespaces: self.namespaces.clone(),
            min_age: self.min_age,
            heartbeat_timeout: self.heartbeat_timeout,
            page_size: self.page_size,
            items: self.items.into(),
            identity_allocation_mode: self.identity_allocation_mode.map(|m| m.as_str().to_owned()),
            allow_short_heartbeat_timeout: self.allow_short_heartbeat_timeout,
        }
    }
}

impl DeleteArgs {
    /// The engine's write settings.
    pub fn writes(&self) -> WriteSettings {
        WriteSettings {
            pacing: Pacing {
                concurrency: self.concurrency.unwrap_or(if self.qps == 0.0 {
                    QPS_0_CONCURRENCY
                } else {
                    DEFAULT_CONCURRENCY
                }),
                qps: self.qps,
                burst: self.burst,
                max_conflict_retries: self.max_conflict_retries,
                max_retries: self.max_retries,
            },
            dry_run: self.dry_run == DryRun::Server,
            max_deletions: self.max_deletions,
            max_percent: self.max_percent,
            yes: self.yes,
            force: self.force,
            mark: self.mark,
            allow_unreadable_endpoints: self.allow_unreadable_endpoints,
        }
    }
}

/// `--concurrency` when `--qps` is set: 8 writes at 40/s leave room for a
/// slow answer without holding the pace back.
pub const DEFAULT_CONCURRENCY: u32 = 8;

/// `--concurrency` at `--qps 0`: the most writes in flight, which the sweep
/// reaches by slow start and cuts at the server's first 429 (`pace`), so
/// it is a ceiling, not what a throttling server receives. At 8, the server's
/// answer time bounded the exhaustion bench's clear (333/s where `curl
/// --parallel` with 32 HTTP/2 streams deleted 346/s on the same loaded
/// machine); at 32 it cleared at 924/s on a quiet one (docs/benchmark.md).
pub const QPS_0_CONCURRENCY: u32 = 32;

/// Flags of delete.
#[derive(Debug, Clone, Args)]
pub struct DeleteArgs {
    /// Flags shared with scan.
    #[command(flatten)]
    pub scan: ScanArgs,
    /// Parallel delete workers [default: 8; 32 at --qps 0].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024), help_heading = heading::RATE)]
    pub concurrency: Option<u32>,
    /// Deletes per second, client-side (0 = unlimited; 40 is cilium-operator's 2500/min).
    #[arg(long, default_value_t = 40.0, help_heading = heading::RATE)]
    pub qps: f64,
    /// Burst of the rate limiter [default: qps].
    #[arg(long, help_heading = heading::RATE)]
    pub burst: Option<u32>,
    /// Retries of one identity after 409 Conflict, re-deciding each time.
    #[arg(long, default_value_t = 3, help_heading = heading::RATE)]
    pub max_conflict_retries: u32,
    /// Retries of one request after 5xx, timeouts and resets.
    #[arg(long, default_value_t = 5, help_heading = heading::RATE)]
    pub max_retries: u32,
    /// `server` sends the same deletes with dryRun=All: nothing is deleted.
    #[arg(long, value_enum, default_value_t = DryRun::None, num_args = 0..=1, default_missing_value = "server", help_heading = heading::SAFETY)]
    pub dry_run: DryRun,
    /// Refuse (exit 5, nothing deleted) when there are more candidates than this.
    #[arg(long, value_name = "N", help_heading = heading::SAFETY)]
    pub max_deletions: Option<u64>,
    /// Refuse (exit 5, nothing deleted) when candidates exceed this percent of scanned identities.
    #[arg(long, value_name = "P", help_heading = heading::SAFETY)]
    pub max_percent: Option<f64>,
    /// Do not ask for confirmation (required without a terminal).
    #[arg(short = 'y', long, help_heading = heading::SAFETY)]
    pub yes: bool,
    /// Delete even when the cluster has zero endpoints (recorded in the report).
    #[arg(long, help_heading = heading::SAFETY)]
    pub force: bool,
    /// Annotate unused unmarked identities with a heartbeat mark, so a later run can collect them.
    #[arg(long, help_heading = heading::SAFETY)]
    pub mark: bool,
    /// Delete even while some endpoints' identity references cannot be read
    /// (they may protect an identity this run deletes). Recorded in the report.
    #[arg(long, help_heading = heading::SAFETY)]
    pub allow_unreadable_endpoints: bool,
}

/// Flags of demo.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Simulated cluster to start (demo: agents reclaim during the run; small, seed, hostile, no-endpoints, forbidden, kvstore, ...).
    #[arg(long, default_value = "demo")]
    pub scenario: String,
    /// Only scan; do not delete.
    #[arg(long)]
    pub scan_only: bool,
    /// Start five simulated clusters (two healthy, one forbidden to delete,
    /// one in kvstore mode, one unreachable) and run on all of them: a fleet report.
    #[arg(long, conflicts_with = "scenario")]
    pub fleet: bool,
    /// Delete flags (demo implies --yes).
    #[command(flatten)]
    pub delete: DeleteArgs,
}

/// Flags of diagnose.
#[derive(Debug, Clone, Args)]
pub struct DiagnoseArgs {
    /// Namespace of the cilium-config ConfigMap.
    #[arg(long, default_value = "kube-system", value_parser = parse_namespace)]
    pub cilium_namespace: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Replace namespaces, label values and the server URL with stable hashes.
    #[arg(long)]
    pub redact: bool,
    /// Identities per list request (1 to 10000).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub page_size: u32,
    /// Read cilium-operator's metrics (through the pod proxy) a second time
    /// this long after the first, to see whether its GC passes complete in
    /// between (e.g. `20m`, more than one identity-gc-interval); 0 reads once
    /// and compares its completed passes with its uptime.
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
    pub operator_metrics_wait: std::time::Duration,
    /// Watch the identities this long before the diagnosis (e.g. `5m`) and
    /// measure how many appear and disappear: the forecast's pace and the
    /// net growth with GC as it works now. 0 reads the pace from the
    /// identities' creation times only.
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION", conflicts_with = "from")]
    pub sample: std::time::Duration,
    /// Judge a proposed Cilium `labels` filter (its syntax: space-separated
    /// `[source:][!]regex` patterns): the label sets the identities would
    /// collapse to, and the network policies it would break (reads them:
    /// an optional permission).
    #[arg(long, value_name = "FILTER", value_parser = parse_labels_filter)]
    pub labels: Option<String>,
    /// Diagnose saved objects instead of a cluster: a directory, `.zip` or
    /// `.tar.gz` of `kubectl get -o yaml|json` output, or a `cilium sysdump`.
    /// Nothing is read from or written to any cluster.
    #[arg(long, value_name = "PATH")]
    pub from: Option<std::path::PathBuf>,
    /// Clusters diagnosed at the same time with several contexts.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub parallel: u32,
    /// Run against a simulated cluster of this scenario instead of a real one.
    #[cfg(feature = "sim")]
    #[arg(long, hide = true)]
    pub demo_scenario: Option<String>,
}

/// Which schema to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum SchemaKind {
    /// The GC report (scan, delete, demo).
    #[default]
    Report,
    /// The fleet report (scan, delete with several contexts).
    FleetReport,
    /// The diagnose report.
    Diagnosis,
    /// The diagnose report over several contexts.
    FleetDiagnosis,
}

/// Flags of schema.
#[derive(Debug, Clone, Args)]
pub struct SchemaArgs {
    /// Which document's schema.
    #[arg(value_enum, default_value_t = SchemaKind::Report)]
    pub kind: SchemaKind,
}

/// The name users type: `kubectl cilium-gc` when run as a kubectl plugin.
pub fn display_name(argv0: &str) -> &'static str {
    let base = std::path::Path::new(argv0)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or(argv0);
    if base.starts_with("kubectl-") {
        "kubectl cilium-gc"
    } else {
        "kubectl-cilium_gc"
    }
}

impl DiagnoseArgs {
    /// The engine's diagnose settings.
    pub fn settings(&self) -> cilium_gc_diagnose::DiagnoseSettings {
        cilium_gc_diagnose::DiagnoseSettings {
            cilium_namespace: self.cilium_namespace.clone(),
            page_size: self.page_size,
            redact: self.redact,
            operator_metrics_wait: self.operator_metrics_wait,
            sample: self.sample,
            labels: self.labels.clone(),
        }
    }
}

/// Build the clap command with the right display name.
pub fn command(argv0: &str) -> clap::Command {
    use clap::CommandFactory;
    let name = display_name(argv0);
    Cli::command().name(name).bin_name(name).display_name(name)
}

#[cfg(test)]
mod tests;
