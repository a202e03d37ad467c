//! `diagnose --from` on a sysdump-shaped directory (issue 36, 2): items
//! without `kind` named by cilium-cli's file names, the capture time from
//! those names, a truncated file named in a warning while the rest goes on,
//! `--redact` as live, and no kubeconfig at all (nothing is contacted).

use super::*;

const IDENTITIES: &str = r#"apiVersion: cilium.io/v2
items:
- metadata:
    name: "1000"
    uid: u1000
    resourceVersion: "5"
    creationTimestamp: "2026-06-01T10:00:00Z"
    annotations:
      io.cilium.heartbeat: "2026-06-01T11:00:00.5Z"
    managedFields:
    - manager: cilium-agent
      operation: Update
      time: "2026-06-01T10:00:00Z"
    - manager: cilium-operator-generic
      operation: Update
      time: "2026-06-01T11:00:00Z"
      fieldsType: FieldsV1
      fieldsV1: {"f:metadata": {"f:annotations": {".": {}, "f:io.cilium.heartbeat": {}}}}
    - manager: label-sync
      operation: Update
      time: "2026-06-01T11:30:00Z"
  security-labels:
    k8s:app: payments-web
    k8s:io.kubernetes.pod.namespace: payments-prod
- metadata:
    name: "1001"
    uid: u1001
    resourceVersion: "6"
    creationTimestamp: "2026-06-01T10:00:00Z"
  security-labels:
    k8s:app: payments-db
    k8s:io.kubernetes.pod.namespace: payments-prod
kind: CiliumIdentityList
"#;

const ENDPOINTS: &str = r#"items:
- metadata: {name: db-0, namespace: payments-prod}
  status: {identity: {id: 1001}}
"#;

#[tokio::test]
async fn a_sysdump_directory_is_diagnosed_without_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let sysdump = dir.path().join("cilium-sysdump-20260601-120000");
    std::fs::create_dir(&sysdump).unwrap();
    let ts = "20260601-120000";
    std::fs::write(
        sysdump.join(format!("ciliumidentities-{ts}.yaml")),
        IDENTITIES,
    )
    .unwrap();
    std::fs::write(
        sysdump.join(format!("ciliumendpoints-{ts}.yaml")),
        ENDPOINTS,
    )
    .unwrap();
    // Cut off in the middle of a document.
    std::fs::write(
        sysdump.join(format!("ciliumendpointslices-{ts}.yaml")),
        "items:\n- metadata: {name: ces-1\n  endpoints: [",
    )
    .unwrap();
    let mut cmd = binary();
    cmd.args(["diagnose", "-o", "json", "--redact", "--from"])
        .arg(dir.path());
    let out = cmd.output().await.unwrap();
    assert_ok(&out);
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = schema::errors(&schema::committed_diagnosis(), &d);
    assert!(errors.is_empty(), "{errors:#?}");
    let source = &d["source"];
    assert_eq!(source["capturedAt"], "2026-06-01T12:00:00Z", "{source}");
    assert_eq!(source["capturedAtFrom"], "sysdump-file-name");
    assert_eq!(d["generatedAt"], "2026-06-01T12:00:00Z");
    let warnings = d["warnings"].to_string();
    assert!(
        warnings.contains(&format!("ciliumendpointslices-{ts}.yaml")),
        "the truncated file is named: {warnings}"
    );
    // The rest went on: both identities, one in use, the writers.
    assert_eq!(d["identitySpace"]["total"], 2);
    assert_eq!(d["identitySpace"]["states"]["inUse"], 1);
    let sync = d["writers"]["managers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["manager"] == "label-sync")
        .cloned()
        .unwrap();
    assert_eq!(sync["writtenAfterMark"], 1, "{sync}");
    // --redact as live: no namespace or label value survives.
    let all = String::from_utf8_lossy(&out.stdout);
    for secret in ["payments-prod", "payments-web", "payments-db"] {
        assert!(!all.contains(secret), "{secret} leaked");
    }
    assert_eq!(d["redacted"], true);
}

/// Nothing to judge because the one identities file is malformed: the
/// usage error (exit 2) is one line on stderr and names that file.
#[tokio::test]
async fn a_malformed_identities_file_alone_is_named_in_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ciliumidentities.yaml"),
        "items: [\n- {a: 1\n",
    )
    .unwrap();
    let mut cmd = binary();
    cmd.args(["diagnose", "-o", "json", "--from"])
        .arg(dir.path());
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "no document on stdout");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("ciliumidentities.yaml"),
        "names the file: {err}"
    );
}

/// A `--labels` pattern Cilium would refuse is a usage error, refused as a
/// flag (exit 2, before anything is read): one `error:` line that names the
/// pattern and the regex's reason (the regex crate's own text spans three
/// lines), then clap's hint, as every flag error.
#[tokio::test]
async fn a_labels_pattern_that_is_not_a_regex_is_a_one_line_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    for (pattern, reason) in [
        ("[", "unclosed character class"),
        ("k8s:(", "unclosed group"),
    ] {
        let out = binary()
            .args(["diagnose", "--labels", pattern, "--from"])
            .arg(dir.path())
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty(), "no document on stdout");
        let err = String::from_utf8_lossy(&out.stderr);
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "one error line: {err}");
        assert!(errors[0].contains("--labels"), "names the flag: {err}");
        assert!(
            errors[0].contains(&format!("{pattern:?}")),
            "names it: {err}"
        );
        assert!(errors[0].contains(reason), "says why: {err}");
    }
}
