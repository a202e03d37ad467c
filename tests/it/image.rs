//! The container image (issue 15): the `Dockerfile` builds what
//! `examples/cronjob.yaml` runs. No container runtime exists on the machines
//! this suite runs on, so these tests pin the file's contract instead of
//! building it: the tag, the entrypoint, the user, the labels.

use serde_json::Value;

use crate::support::repo_path;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn dockerfile() -> String {
    std::fs::read_to_string(repo_path("Dockerfile")).expect("a Dockerfile at the top")
}

/// Instructions with line continuations joined, comments dropped.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

fn binary_name() -> String {
    std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc"))
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn cronjob_container() -> Value {
    let text = std::fs::read_to_string(repo_path("examples/cronjob.yaml")).unwrap();
    let cj = serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text)
        .unwrap()
        .into_iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("a CronJob");
    cj["spec"]["jobTemplate"]["spec"]["template"].clone()
}

#[test]
fn cronjob_image_tag_is_the_crate_version() {
    let pod = cronjob_container();
    let image = pod["spec"]["containers"][0]["image"].as_str().unwrap();
    let (_, tag) = image.rsplit_once(':').expect("a tagged image");
    assert_eq!(
        tag,
        format!("v{VERSION}"),
        "examples/cronjob.yaml runs {image}"
    );
    // The Dockerfile's default VERSION label is the same version.
    let d = instructions(&dockerfile());
    assert!(
        d.iter().any(|i| i == &format!("ARG VERSION={VERSION}")),
        "Dockerfile's ARG VERSION is not {VERSION}"
    );
    assert!(
        dockerfile().contains(&format!(":v{VERSION}")),
        "the build command in the Dockerfile tags v{VERSION}"
    );
}

#[test]
fn dockerfile_entrypoint_is_the_binary_and_runs_as_non_root() {
    let d = instructions(&dockerfile());
    let bin = binary_name();
    let entry = d
        .iter()
        .filter_map(|i| i.strip_prefix("ENTRYPOINT "))
        .next_back()
        .expect("an ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(entry).expect("exec form");
    let path = std::path::Path::new(&entry[0]);
    assert_eq!(path.file_name().unwrap().to_string_lossy(), bin);
    assert!(
        d.iter()
            .any(|i| i.starts_with("COPY --from=build") && i.ends_with(&entry[0])),
        "the entrypoint is the file copied from the build stage"
    );
    assert!(d.iter().any(|i| i.contains(&format!("--bin {bin}"))
        && i.contains("--release")
        && i.contains("--locked")));

    let froms: Vec<&String> = d.iter().filter(|i| i.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "multi-stage: build, then runtime");
    assert!(froms[1].contains("distroless"), "{}", froms[1]);
    let user = d
        .iter()
        .filter_map(|i| i.strip_prefix("USER "))
        .next_back()
        .expect("a USER");
    let uid: u32 = user
        .split(':')
        .next()
        .unwrap()
        .parse()
        .expect("a numeric uid");
    assert_ne!(uid, 0, "non-root");
    // The CronJob runs as the same uid, and its command (if any) is the binary.
    let pod = cronjob_container();
    assert_eq!(pod["spec"]["securityContext"]["runAsUser"], uid);
    if let Some(cmd) = pod["spec"]["containers"][0]["command"].as_array() {
        assert_eq!(cmd[0], Value::from(bin.clone()));
    }
}

#[test]
fn dockerfile_carries_oci_labels_with_source_and_version() {
    let labels: String = instructions(&dockerfile())
        .into_iter()
        .filter(|i| i.starts_with("LABEL "))
        .collect();
    for key in [
        "org.opencontainers.image.source=\"https://github.com/kubectl-cilium-gc/kubectl-cilium-gc\"",
        "org.opencontainers.image.version=\"${VERSION}\"",
        "org.opencontainers.image.revision=",
        "org.opencontainers.image.licenses=\"Apache-2.0\"",
    ] {
        assert!(labels.contains(key), "{key} missing from {labels}");
    }
    let cargo = std::fs::read_to_string(repo_path("Cargo.toml")).unwrap();
    assert!(
        cargo.contains("repository = \"https://github.com/kubectl-cilium-gc/kubectl-cilium-gc\"")
    );
    let ignore = std::fs::read_to_string(repo_path(".dockerignore")).unwrap();
    assert!(
        ignore.lines().any(|l| l == "target"),
        "target/ stays out of the build context"
    );
}
