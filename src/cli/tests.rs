//! The flags' own rules: parsing, validation, the name kubectl shows.

use super::*;
use clap::FromArgMatches;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    let m = command("kubectl-cilium_gc").try_get_matches_from(args)?;
    Cli::from_arg_matches(&m)
}

/// A flag left out means the engine's default: the engine's own tests
/// (`crates/cilium-gc/tests`) build settings from the defaults and the
/// flags they name.
#[test]
fn clap_defaults_are_the_engine_defaults() {
    let cli = parse(&["kubectl-cilium_gc", "delete"]).unwrap();
    let Command::Delete(d) = cli.command else {
        panic!("not delete")
    };
    assert_eq!(
        format!("{:?}", d.scan.settings()),
        format!("{:?}", cilium_gc::ScanSettings::default())
    );
    assert_eq!(
        format!("{:?}", d.writes()),
        format!("{:?}", cilium_gc::WriteSettings::default())
    );
}

/// `--concurrency` left out: 8 with a rate, 32 at `--qps 0` (a ceiling the
/// sweep reaches by slow start); typed, it is what was typed.
#[test]
fn concurrency_defaults_to_32_at_qps_0_only() {
    let concurrency = |args: &[&str]| {
        let Command::Delete(d) = parse(args).unwrap().command else {
            panic!("not delete")
        };
        d.writes().pacing.concurrency
    };
    assert_eq!(concurrency(&["x", "delete"]), DEFAULT_CONCURRENCY);
    assert_eq!(concurrency(&["x", "delete", "--qps", "100"]), 8);
    assert_eq!(concurrency(&["x", "delete", "--qps", "0"]), 32);
    assert_eq!(
        concurrency(&["x", "delete", "--qps", "0", "--concurrency", "8"]),
        8
    );
    assert_eq!(concurrency(&["x", "delete", "--concurrency", "3"]), 3);
}

/// The narrowing flags become the engine's [`ScanSettings`] as typed:
/// the engine's `narrowing` tests pass these settings for the flags
/// they name.
#[test]
fn narrowing_flags_become_scan_settings() {
    let scan_settings = |args: &[&str]| {
        let mut argv = vec!["x", "delete"];
        argv.extend_from_slice(args);
        let Command::Delete(d) = parse(&argv).unwrap().command else {
            panic!("not delete")
        };
        d.scan.settings()
    };
    let l = scan_settings(&["-l", "app,!job-name"]);
    assert_eq!(l.selector.as_deref(), Some("app,!job-name"));
    let commas = scan_settings(&["-n", "team-003,team-007"]);
    let repeated = scan_settings(&["-n", "team-003", "-n", "team-007"]);
    assert_eq!(commas.namespaces, vec!["team-003", "team-007"]);
    assert_eq!(repeated.namespaces, commas.namespaces);
    let old = scan_settings(&["--min-age", "21d"]);
    assert_eq!(old.min_age, Some(Duration::from_secs(21 * 86_400)));
}

#[test]
fn delete_flags_and_kubectl_flags_parse() {
    let cli = parse(&[
        "x",
        "delete",
        "--context",
        "prod",
        "--as",
        "sre",
        "--as-group",
        "a",
        "--as-group",
        "b",
        "-s",
        "https://h:6443",
        "--qps",
        "0",
        "--concurrency",
        "32",
        "-n",
        "a,b",
        "--dry-run=server",
        "--heartbeat-timeout",
        "1h",
        "-o",
        "json",
        "--yes",
    ])
    .unwrap();
    assert_eq!(cli.kube.context, vec!["prod"]);
    assert_eq!(cli.kube.as_group, vec!["a", "b"]);
    let Command::Delete(d) = cli.command else {
        panic!()
    };
    assert_eq!(d.qps, 0.0);
    assert_eq!(d.scan.namespaces, vec!["a", "b"]);
    assert_eq!(d.dry_run, DryRun::Server);
    assert_eq!(d.scan.output, OutputFormat::Json);
    assert!(d.yes);
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["x", "delete", "--qps", "fast"][..],
        &["x", "scan", "--min-age", "soon"],
        &["x", "scan", "--page-size", "0"],
        &["x", "delete", "--concurrency", "0"],
        &["x", "frobnicate"],
    ] {
        let e = parse(args).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{args:?}");
    }
}

/// Issue 12: validated up front, never a panic later.
#[test]
fn namespaces_and_connection_flags_are_validated() {
    for args in [
        &["x", "scan", "--cilium-namespace", "a b"][..],
        &["x", "scan", "--cilium-namespace", "-x"],
        &["x", "scan", "-n", "UPPER"],
        &["x", "diagnose", "--cilium-namespace", "a/b"],
    ] {
        assert_eq!(parse(args).unwrap_err().exit_code(), 2, "{args:?}");
    }
    let k = |token: &str| KubeArgs {
        token: Some(token.into()),
        ..KubeArgs::default()
    };
    assert!(validate_kube_args(&k("abc\n")).is_err());
    assert!(validate_kube_args(&k("a b")).is_err());
    assert!(validate_kube_args(&k("")).is_err());
    assert!(validate_kube_args(&k("eyJhbGciOi.x-y_z")).is_ok());
}

#[test]
fn plugin_name_in_usage() {
    assert_eq!(
        display_name("/usr/local/bin/kubectl-cilium_gc"),
        "kubectl cilium-gc"
    );
    assert_eq!(display_name("target/debug/other"), "kubectl-cilium_gc");
    let help = command("kubectl-cilium_gc").render_help().to_string();
    assert!(help.contains("kubectl cilium-gc"), "{help}");
}

#[test]
fn cli_is_well_formed() {
    command("x").debug_assert();
}
