//! `diagnose --from` on an archive the real cilium-cli wrote (issue 36, 2),
//! recorded by the e2e test `diagnose_sysdump` (cilium-cli v0.19.2 against
//! the real kube-apiserver with the real current operator; CI cannot build
//! cilium-cli: tests/tools/cilium-cli.sh). The archive is read as it is,
//! every run: the capture time from its file names, the server's counts,
//! the live diagnosis's findings, and what a quick sysdump leaves out.

use super::*;

use crate::support::repo_path;
use crate::support::sysdump::{assert_saved_matches, rfc3339};

#[tokio::test]
async fn a_real_cilium_cli_archive_gives_the_live_diagnosis() {
    let dir = repo_path("tests/fixtures/cilium-sysdump");
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    // The premise: what was recorded is cilium-cli's own archive.
    assert!(
        expected["ciliumCli"]
            .as_str()
            .unwrap()
            .starts_with("cilium-cli: v"),
        "{expected}"
    );
    let archive = expected["archive"].as_str().unwrap();
    // "Now" must be the `<ts>` cilium-cli put in the names (its start time).
    let ts = archive
        .strip_prefix("cilium-sysdump-")
        .and_then(|a| a.strip_suffix(".zip"))
        .unwrap();
    assert_eq!(expected["capturedAt"], rfc3339(ts));
    let zip = dir.join(archive);
    let mut cmd = binary();
    cmd.args(["diagnose", "-o", "json", "--from"]).arg(&zip);
    let out = cmd.output().await.unwrap();
    assert_ok(&out);
    let saved: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = schema::errors(&schema::committed_diagnosis(), &saved);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_saved_matches(&saved, &expected);
}
