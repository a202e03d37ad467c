//! The container image (issue 34): built by `.ci/image` with no container
//! daemon, pushed to a registry started here on loopback, pulled back by
//! digest and judged by what the registry serves: its config (user,
//! entrypoint, labels), every file of its layer (no shell), and the plugin
//! in it (static, the commit the labels name). The CronJob runs it for real
//! in `tests/e2e/cronjob.rs`. And the release around it: `.ci/release`
//! writes the image, an SBOM of the crates the binary links and SHA256SUMS.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

use crate::support::image::{self, Registry};
use crate::support::{repo_path, tool_or_skip};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const BIN: &str = "kubectl-cilium_gc";
const SOURCE: &str = "https://github.com/kubectl-cilium-gc/kubectl-cilium-gc";

fn cronjob_pod() -> Value {
    let text = std::fs::read_to_string(repo_path("examples/cronjob.yaml")).unwrap();
    let cj = serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text)
        .unwrap()
        .into_iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("a CronJob");
    cj["spec"]["jobTemplate"]["spec"]["template"].clone()
}

fn git_head() -> String {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo_path(""))
        .output()
        .expect("git runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The CronJob and the README name the image by the reference the release
/// produces, and that reference's tag is the crate's version.
#[test]
fn cronjob_and_readme_name_the_image_the_release_produces() {
    let reference = image::release_reference();
    assert_eq!(
        reference,
        format!("ghcr.io/kubectl-cilium-gc/kubectl-cilium-gc:v{VERSION}")
    );
    let pod = cronjob_pod();
    assert_eq!(pod["spec"]["containers"][0]["image"], reference.as_str());
    // Every mention of the image's repository in the user docs is this exact
    // reference (no other tag to drift).
    let repository = reference.rsplit_once(':').unwrap().0;
    for doc in ["README.md", "docs/install.md"] {
        let text = std::fs::read_to_string(repo_path(doc)).unwrap();
        let mentions: Vec<&str> = text
            .match_indices(repository)
            .map(|(at, _)| {
                let rest = &text[at..];
                let end = rest
                    .find(|c: char| c.is_whitespace() || "`\"')],".contains(c))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .collect();
        assert!(!mentions.is_empty(), "{doc} names the image");
        for m in mentions {
            assert_eq!(m, reference, "{doc} names the image as {m}");
        }
    }
    // The CronJob runs as the image's user.
    assert_eq!(pod["spec"]["securityContext"]["runAsUser"], 65532);
}

/// The image pushed to a loopback registry and pulled back by digest: user
/// 65532, the plugin as entrypoint, the OCI labels, exactly the files it
/// should hold (no shell in any layer), a static plugin of this commit.
#[test]
fn the_image_from_a_loopback_registry_runs_the_static_plugin_as_65532_with_no_shell() {
    let Some(built) = image::built() else { return };
    let registry = Registry::start();
    let reference = image::release_reference();
    let (pushed, digest) = registry.push(&built.layout_tar, &reference);
    // The release output names the same digest the registry holds.
    assert!(
        built.stderr.contains(&format!("image: digest {digest}\n")),
        "{}",
        built.stderr
    );
    let pinned = image::by_digest(&pushed, &digest);

    let config = image::config(&pinned);
    assert_eq!(config["os"], "linux");
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532", "{config}");
    assert_eq!(
        c["Entrypoint"],
        serde_json::json!([format!("/usr/local/bin/{BIN}")])
    );
    let labels = &c["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], VERSION);
    assert_eq!(labels["org.opencontainers.image.source"], SOURCE);
    assert_eq!(
        labels["org.opencontainers.image.revision"],
        git_head().as_str()
    );
    // The CronJob's `command` resolves through the image's PATH to the entrypoint.
    let pod = cronjob_pod();
    assert_eq!(pod["spec"]["containers"][0]["command"][0], BIN);
    let path = c["Env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str()?.strip_prefix("PATH="))
        .next()
        .expect("a PATH");
    assert!(path.split(':').any(|d| d == "/usr/local/bin"), "{path}");

    // Every layer, file by file.
    let manifest: Value =
        serde_json::from_slice(&image::crane_out(&["manifest", &pinned])).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    let mut files = BTreeSet::new();
    for layer in layers {
        let blob = format!(
            "{}@{}",
            pushed.rsplit_once(':').unwrap().0,
            layer["digest"].as_str().unwrap()
        );
        let tgz = image::crane_out(&["blob", &blob]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("layer.tar.gz");
        std::fs::write(&path, tgz).unwrap();
        let list = Command::new("tar").arg("-tzf").arg(&path).output().unwrap();
        assert!(list.status.success());
        files.extend(
            String::from_utf8(list.stdout)
                .unwrap()
                .lines()
                .map(|l| l.trim_end_matches('/').to_owned()),
        );
    }
    let expected: BTreeSet<String> = [
        "etc",
        "etc/group",
        "etc/nsswitch.conf",
        "etc/passwd",
        "etc/ssl",
        "etc/ssl/certs",
        "etc/ssl/certs/ca-certificates.crt",
        "tmp",
        "usr",
        "usr/local",
        "usr/local/bin",
        &format!("usr/local/bin/{BIN}"),
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(files, expected, "the layer's files");
    for shell in ["bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh"] {
        assert!(!files.contains(shell), "{shell} in the image");
    }

    // The plugin in the pulled image: static, and built from this commit.
    let rootfs = tempfile::tempdir().unwrap();
    image::unpack_rootfs(&pinned, rootfs.path());
    let plugin = rootfs.path().join(format!("usr/local/bin/{BIN}"));
    assert!(
        !image::elf_has_interpreter(&std::fs::read(&plugin).unwrap()),
        "the image's plugin is statically linked"
    );
    let certs =
        std::fs::read_to_string(rootfs.path().join("etc/ssl/certs/ca-certificates.crt")).unwrap();
    assert!(certs.contains("-----BEGIN CERTIFICATE-----"));
    let out = Command::new(&plugin)
        .arg("version")
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success());
    let version = String::from_utf8(out.stdout).unwrap();
    let commit = version
        .split("(commit ")
        .nth(1)
        .and_then(|r| r.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("a commit in {version:?}"));
    assert!(version.contains(VERSION), "{version}");
    assert!(
        commit.len() >= 7 && git_head().starts_with(commit),
        "{version}"
    );
}

/// `.ci/release` (the whole of it, as a user runs it): the archive packs
/// the image's static binary, the image tarball and the SBOM sit next to
/// it, `sha256sum -c SHA256SUMS` passes, and the SBOM lists exactly the
/// crates `cargo tree` says the plugin links on this target.
#[test]
fn the_release_writes_image_sbom_and_sums_a_user_can_check() {
    if !["cargo-cyclonedx", "sha256sum"]
        .iter()
        .all(|t| tool_or_skip(t, "the full release (.ci/release)"))
    {
        return;
    }
    let Some(crane) = image::crane() else { return };
    let dist = tempfile::tempdir().unwrap();
    let out = Command::new(repo_path(".ci/release"))
        .arg("--out")
        .arg(dist.path())
        .env("CRANE", crane)
        .env_remove("TARGET_OS")
        .env_remove("TARGET_ARCH")
        .output()
        .expect(".ci/release runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), ".ci/release failed:\n{stderr}");

    let oci = image::only_file(dist.path(), ".oci.tar");
    let sbom_path = image::only_file(dist.path(), ".cdx.json");
    let archive = image::only_file(dist.path(), ".tar.gz");
    // SHA256SUMS covers them, and checks.
    let sums = std::fs::read_to_string(dist.path().join("SHA256SUMS")).unwrap();
    let named: BTreeSet<&str> = sums
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    for f in [
        &oci,
        &sbom_path,
        &archive,
        &dist.path().join("cilium-gc.yaml"),
    ] {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(named.contains(name), "{name} not in SHA256SUMS:\n{sums}");
    }
    let check = Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(dist.path())
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    // The release printed the image's size and the digest its layout holds.
    let layout = tempfile::tempdir().unwrap();
    assert!(Command::new("tar")
        .arg("-xf")
        .arg(&oci)
        .arg("-C")
        .arg(layout.path())
        .status()
        .unwrap()
        .success());
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.path().join("index.json")).unwrap()).unwrap();
    let digest = index["manifests"][0]["digest"].as_str().unwrap();
    assert!(
        stderr.contains(&format!("image: digest {digest}\n")),
        "{stderr}"
    );
    let size_line = stderr
        .lines()
        .find(|l| l.starts_with("image: size "))
        .expect("a size line");
    let size: u64 = size_line
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert!(size > 1_000_000, "{size_line}: a plugin of a few MB");

    // The archive's binary is the image's.
    let unpacked = tempfile::tempdir().unwrap();
    assert!(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .unwrap()
        .success());
    let packed = std::fs::read(unpacked.path().join(BIN)).unwrap();
    assert!(
        !image::elf_has_interpreter(&packed),
        "the archive's binary is static"
    );

    // The SBOM against cargo's own view of what the plugin links: every
    // linked crate is listed. cargo-cyclonedx reads `cargo metadata`, whose
    // resolve is wider than a build's (proc macros, and optional
    // dependencies it records as edges), so the SBOM may list more; never a
    // crate that is not in Cargo.lock.
    let sbom: Value = serde_json::from_slice(&std::fs::read(&sbom_path).unwrap()).unwrap();
    assert_eq!(sbom["metadata"]["component"]["name"], "kubectl-cilium-gc");
    let listed = sbom_crates(&sbom);
    let linked = linked_crates();
    assert!(linked.len() > 100, "{} crates: the premise", linked.len());
    let missing: Vec<_> = linked.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "linked but not in the SBOM: {missing:?}"
    );
    let locked = lock_crates();
    let unknown: Vec<_> = listed.difference(&locked).collect();
    assert!(
        unknown.is_empty(),
        "in the SBOM, not in Cargo.lock: {unknown:?}"
    );
}

/// `name version` of every package in Cargo.lock.
fn lock_crates() -> BTreeSet<String> {
    let lock = std::fs::read_to_string(repo_path("Cargo.lock")).unwrap();
    let value = |l: &str, key: &str| {
        l.strip_prefix(key)
            .map(|v| v.trim_matches(|c| c == '"' || c == ' ').to_owned())
    };
    let mut out = BTreeSet::new();
    let mut name = None;
    for l in lock.lines() {
        if let Some(n) = value(l, "name = ") {
            name = Some(n);
        } else if let (Some(v), Some(n)) = (value(l, "version = "), name.take()) {
            out.insert(format!("{n} {v}"));
        }
    }
    out
}

/// `name version` of every component (nested ones too) of a CycloneDX BOM,
/// the workspace's own crates left out.
fn sbom_crates(sbom: &Value) -> BTreeSet<String> {
    fn walk(components: &Value, out: &mut BTreeSet<String>) {
        for c in components.as_array().into_iter().flatten() {
            let purl = c["purl"].as_str().unwrap_or_default();
            if !purl.contains("download_url=file") {
                out.insert(format!(
                    "{} {}",
                    c["name"].as_str().unwrap(),
                    c["version"].as_str().unwrap()
                ));
            }
            walk(&c["components"], out);
        }
    }
    let mut out = BTreeSet::new();
    walk(&sbom["components"], &mut out);
    out
}

/// `name version` of every crate the plugin binary links on this target:
/// `cargo tree -e normal,no-proc-macro` (no build or dev dependencies, no
/// proc macros: they run in the compiler, never in the binary), registry
/// crates only.
fn linked_crates() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--locked",
            "-p",
            "kubectl-cilium-gc",
            "-e",
            "normal,no-proc-macro",
            "--prefix",
            "none",
            "--target",
            &format!("{}-unknown-linux-gnu", std::env::consts::ARCH),
        ])
        .current_dir(repo_path(""))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("(/"))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (name, v) = (w.next()?, w.next()?.strip_prefix('v')?);
            Some(format!("{name} {v}"))
        })
        .collect()
}
