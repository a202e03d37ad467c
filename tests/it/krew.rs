//! Packaging (issue 6): `krew/cilium-gc.yaml` passes krew's manifest rules
//! (krew's `internal/index/validation` plus krew-index's conventions), and
//! `.ci/release` packs an archive and renders a manifest that does too.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::repo_path;

/// The platforms every manifest must cover, in krew's names.
const PLATFORMS: [(&str, &str); 4] = [
    ("linux", "amd64"),
    ("linux", "arm64"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
];
const BIN: &str = "kubectl-cilium_gc";
/// Windows device names krew refuses as plugin names.
const WINDOWS_FORBIDDEN: [&str; 22] = [
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
    "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
];

fn load_yaml(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// krew's `semver.Parse`: a `v`, then MAJOR.MINOR.PATCH without leading
/// zeros, then optional `-pre` and `+build`.
fn is_krew_semver(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let core = rest.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars().all(|c| c.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
}

/// Every krew rule `manifest` breaks, one clear sentence each; empty when it
/// passes. Besides krew's own validation (apiVersion, kind, safe name,
/// one-line short description, semver version, per platform: uri, a 64-hex
/// lowercase sha256, bin, files, an os/arch selector) this checks what
/// krew-index reviewers ask for and what this plugin promises.
pub fn krew_violations(m: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let mut rule = |ok: bool, msg: String| {
        if !ok {
            bad.push(msg);
        }
    };

    let api = str_at(m, "/apiVersion");
    rule(
        api == "krew.googlecontainertools.github.com/v1alpha2",
        format!("apiVersion must be krew.googlecontainertools.github.com/v1alpha2, not {api:?}"),
    );
    let kind = str_at(m, "/kind");
    rule(
        kind == "Plugin",
        format!("kind must be Plugin, not {kind:?}"),
    );

    let name = str_at(m, "/metadata/name");
    let safe = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !WINDOWS_FORBIDDEN
            .iter()
            .any(|f| f.eq_ignore_ascii_case(name));
    rule(
        safe,
        format!("metadata.name {name:?} must match ^[\\w-]+$ and not be a Windows device name"),
    );
    rule(
        name == "cilium-gc",
        format!("metadata.name must be cilium-gc (kubectl cilium-gc), not {name:?}"),
    );

    let version = str_at(m, "/spec/version");
    rule(
        is_krew_semver(version),
        format!("spec.version {version:?} must be semver with a leading v, like v1.2.3"),
    );
    let homepage = str_at(m, "/spec/homepage");
    rule(
        homepage.starts_with("https://"),
        format!("spec.homepage must be an https URL, not {homepage:?}"),
    );

    let short = str_at(m, "/spec/shortDescription");
    rule(
        !short.trim().is_empty(),
        "spec.shortDescription must be set".into(),
    );
    rule(
        !short.contains(['\r', '\n']),
        "spec.shortDescription must be one line".into(),
    );
    rule(
        short.chars().count() <= 50,
        format!(
            "spec.shortDescription must be at most 50 characters, has {}",
            short.chars().count()
        ),
    );
    let description = str_at(m, "/spec/description");
    rule(
        !description.trim().is_empty(),
        "spec.description must be set".into(),
    );
    for line in description.lines().filter(|l| l.chars().count() > 80) {
        rule(
            false,
            format!("spec.description must be wrapped at 80 columns: {line:?}"),
        );
    }
    let caveats = str_at(m, "/spec/caveats");
    rule(
        !caveats.trim().is_empty(),
        "spec.caveats must name the RBAC the plugin needs".into(),
    );

    let platforms = m.pointer("/spec/platforms").and_then(Value::as_array);
    rule(
        platforms.is_some_and(|p| !p.is_empty()),
        "spec.platforms must list at least one platform".into(),
    );
    let mut seen = BTreeSet::new();
    for (i, p) in platforms.into_iter().flatten().enumerate() {
        let at = format!("spec.platforms[{i}]");
        let labels = p
            .pointer("/selector/matchLabels")
            .and_then(Value::as_object);
        rule(
            labels.is_some_and(|l| !l.is_empty()),
            format!("{at}.selector.matchLabels must be set and non-empty"),
        );
        rule(
            p.pointer("/selector/matchExpressions").is_none(),
            format!("{at}.selector must use matchLabels only"),
        );
        let keys: BTreeSet<&str> = labels
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        rule(
            keys == BTreeSet::from(["arch", "os"]),
            format!(
                "{at}.selector.matchLabels must have exactly the keys os and arch, has {keys:?}"
            ),
        );
        let os = str_at(p, "/selector/matchLabels/os");
        let arch = str_at(p, "/selector/matchLabels/arch");
        rule(
            PLATFORMS.contains(&(os, arch)),
            format!("{at}: {os}/{arch} is not one of the supported platforms {PLATFORMS:?}"),
        );
        rule(
            seen.insert((os, arch)),
            format!("{at}: {os}/{arch} is listed twice"),
        );

        let uri = str_at(p, "/uri");
        rule(
            uri.starts_with("https://"),
            format!("{at}.uri must be an https URL, not {uri:?}"),
        );
        rule(
            uri.ends_with(".tar.gz"),
            format!("{at}.uri must point to a .tar.gz, not {uri:?}"),
        );
        let archive = format!(
            "{BIN}-{}-{os}-{arch}.tar.gz",
            version.trim_start_matches('v')
        );
        rule(
            uri.ends_with(&format!("/{version}/{archive}")),
            format!(
                "{at}.uri must end with /{version}/{archive} (version and platform), is {uri:?}"
            ),
        );
        let sha = str_at(p, "/sha256");
        rule(
            sha.len() == 64 && sha.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
            format!("{at}.sha256 must be 64 lowercase hex digits, is {sha:?}"),
        );
        let bin = str_at(p, "/bin");
        rule(bin == BIN, format!("{at}.bin must be {BIN}, is {bin:?}"));

        let files = p.get("files").and_then(Value::as_array);
        rule(
            files.is_some_and(|f| !f.is_empty()),
            format!("{at}.files must be non-empty"),
        );
        let files = files.into_iter().flatten();
        let mut from = BTreeSet::new();
        for (j, f) in files.enumerate() {
            let (src, dst) = (str_at(f, "/from"), str_at(f, "/to"));
            rule(!src.is_empty(), format!("{at}.files[{j}].from must be set"));
            rule(!dst.is_empty(), format!("{at}.files[{j}].to must be set"));
            from.insert(src);
        }
        for needed in [BIN, "LICENSE"] {
            rule(
                from.contains(needed),
                format!("{at}.files must copy {needed}"),
            );
        }
    }
    rule(
        PLATFORMS.iter().all(|p| seen.contains(p)),
        format!("spec.platforms must cover all of {PLATFORMS:?}, has {seen:?}"),
    );
    bad
}

fn assert_krew_valid(what: &str, manifest: &Value) {
    let bad = krew_violations(manifest);
    assert!(
        bad.is_empty(),
        "{what} breaks krew rules:\n  - {}",
        bad.join("\n  - ")
    );
}

fn cargo_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[test]
fn template_passes_krew_rules() {
    let m = load_yaml(&repo_path("krew/cilium-gc.yaml"));
    assert_krew_valid("krew/cilium-gc.yaml", &m);
    assert_eq!(
        str_at(&m, "/spec/version"),
        format!("v{}", cargo_version()),
        "krew/cilium-gc.yaml's version should follow Cargo.toml"
    );
}

#[test]
fn checker_catches_broken_manifests() {
    let good = load_yaml(&repo_path("krew/cilium-gc.yaml"));
    let cases: [(&str, &str, Value); 6] = [
        ("/spec/version", "semver", "0.1.0".into()),
        ("/spec/shortDescription", "one line", "two\nlines".into()),
        ("/spec/platforms/0/sha256", "64 lowercase hex", "ABC".into()),
        (
            "/spec/platforms/0/selector/matchLabels/cpu",
            "exactly the keys",
            "x".into(),
        ),
        (
            "/spec/platforms/1/selector/matchLabels/arch",
            "listed twice",
            "amd64".into(),
        ),
        ("/metadata/name", "must match", "cilium gc".into()),
    ];
    for (pointer, expect, value) in cases {
        let mut bad = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        bad.pointer_mut(parent).unwrap()[key] = value;
        let found = krew_violations(&bad);
        assert!(
            found.iter().any(|m| m.contains(expect)),
            "{pointer}: expected a violation mentioning {expect:?}, got {found:#?}"
        );
    }
}

/// Every permission in `rbac::PERMISSIONS` is named in the caveats, with its
/// verb on the same line, so users learn the RBAC before the first 403.
#[test]
fn caveats_name_every_permission() {
    let m = load_yaml(&repo_path("krew/cilium-gc.yaml"));
    let caveats = str_at(&m, "/spec/caveats");
    for p in cilium_gc_cluster::rbac::PERMISSIONS {
        let line = caveats
            .lines()
            .find(|l| l.split([' ', ':', '(', ')']).any(|w| w == p.resource))
            .unwrap_or_else(|| panic!("caveats do not mention {}", p.resource));
        assert!(
            line.split([' ', ',', ';', ':']).any(|w| w == p.verb),
            "caveats line for {} lacks the verb {}: {line:?}",
            p.resource,
            p.verb
        );
        let group = if p.group.is_empty() { "core" } else { p.group };
        assert!(
            line.contains(group),
            "caveats line for {} lacks its group {group}",
            p.resource
        );
    }
}

fn host_platform() -> (&'static str, &'static str) {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        other => panic!("no krew name for OS {other}"),
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no krew name for architecture {other}"),
    };
    (os, arch)
}

fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .or_else(|_| {
            Command::new("shasum")
                .args(["-a", "256"])
                .arg(path)
                .output()
        })
        .expect("sha256sum or shasum");
    assert!(out.status.success(), "hashing {} failed", path.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// `.ci/release --binary` packs the built binary, LICENSE and README.md; the
/// binary in the archive runs; the rendered manifest carries the archive's
/// real sha256 for this platform and still passes every krew rule.
#[test]
fn release_script_packs_and_renders() {
    let dist = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(repo_path(".ci/release"))
        .args(["--binary", env!("CARGO_BIN_EXE_kubectl-cilium_gc"), "--out"])
        .arg(dist.path())
        .env_remove("TARGET_OS")
        .env_remove("TARGET_ARCH")
        .output()
        .expect("run .ci/release");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        ".ci/release failed ({}):\n{stderr}",
        out.status
    );

    let (os, arch) = host_platform();
    let version = cargo_version();
    let archive = dist
        .path()
        .join(format!("{BIN}-{version}-{os}-{arch}.tar.gz"));
    assert!(
        archive.is_file(),
        "no {} in {:?}; stderr:\n{stderr}",
        archive.display(),
        std::fs::read_dir(dist.path()).unwrap().collect::<Vec<_>>()
    );

    // Unpack and look.
    let unpacked = tempfile::tempdir().unwrap();
    let tar = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .expect("run tar");
    assert!(tar.success(), "tar -x failed");
    let mut names: Vec<String> = std::fs::read_dir(unpacked.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["LICENSE", "README.md", BIN], "archive contents");
    let run = Command::new(unpacked.path().join(BIN))
        .arg("--help")
        .output()
        .expect("the packed binary runs");
    assert!(
        run.status.success(),
        "packed binary --help exited {}",
        run.status
    );

    // The rendered manifest.
    let manifest = load_yaml(&dist.path().join("cilium-gc.yaml"));
    assert_krew_valid("the rendered dist/cilium-gc.yaml", &manifest);
    assert_eq!(str_at(&manifest, "/spec/version"), format!("v{version}"));
    let sha = sha256_of(&archive);
    let platforms = manifest["spec"]["platforms"].as_array().unwrap();
    for p in platforms {
        let this = (
            str_at(p, "/selector/matchLabels/os"),
            str_at(p, "/selector/matchLabels/arch"),
        );
        let got = str_at(p, "/sha256");
        if this == (os, arch) {
            assert_eq!(got, sha, "sha256 of {os}/{arch} must be the archive's");
            assert!(str_at(p, "/uri")
                .ends_with(&format!("/v{version}/{BIN}-{version}-{os}-{arch}.tar.gz")));
        } else {
            assert_eq!(
                got,
                "0".repeat(64),
                "{this:?} keeps the template placeholder"
            );
        }
    }
    let sidecar = std::fs::read_to_string(
        dist.path()
            .join(format!("{BIN}-{version}-{os}-{arch}.tar.gz.sha256")),
    )
    .unwrap();
    assert!(sidecar.starts_with(&sha), "the .sha256 file agrees");
}

// --- the real krew (issue 26) -------------------------------------------------

/// `.ci/release` once per published platform, each run's manifest the next
/// one's `--manifest` (as the release matrix does): every archive and the
/// manifest with every platform's sha256 filled in. Only names differ: the
/// archives all pack this host's binary (nothing here cross-builds).
fn release_every_platform(dist: &Path) {
    let mut manifest = repo_path("krew/cilium-gc.yaml");
    for (os, arch) in PLATFORMS {
        let out = Command::new("bash")
            .arg(repo_path(".ci/release"))
            .args(["--binary", env!("CARGO_BIN_EXE_kubectl-cilium_gc"), "--out"])
            .arg(dist)
            .arg("--manifest")
            .arg(&manifest)
            .env("TARGET_OS", os)
            .env("TARGET_ARCH", arch)
            .output()
            .expect("run .ci/release");
        assert!(
            out.status.success(),
            ".ci/release for {os}/{arch} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        manifest = dist.join("cilium-gc.yaml");
    }
}

/// A loopback file server for `dir` (HTTP/1.0, GET only), standing in for
/// the release download host: krew and its validator fetch from it.
fn serve_dir(dir: &Path) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut line = String::new();
            let _ = BufReader::new(&conn).read_line(&mut line);
            let name = line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .trim_start_matches('/')
                .to_owned();
            let body = (!name.contains("..") && !name.contains('/'))
                .then(|| std::fs::read(dir.join(&name)).ok())
                .flatten();
            let _ = match body {
                Some(b) => write!(
                    conn,
                    "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n",
                    b.len()
                )
                .and_then(|_| conn.write_all(&b)),
                None => write!(conn, "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
            };
        }
    });
    url
}

/// The real krew's environment: its own `KREW_ROOT`, the real kubectl and
/// krew on `PATH` (after `$KREW_ROOT/bin`, where installed plugins land), no
/// upgrade check, and every non-loopback request sent to a closed port.
fn krew_env(cmd: &mut Command, krew_root: &Path, kubectl: &Path) {
    let path = std::env::join_paths([
        krew_root.join("bin"),
        kubectl.parent().unwrap().to_owned(),
        crate::support::tools::bin_dir().unwrap().to_owned(),
        "/usr/bin".into(),
        "/bin".into(),
    ])
    .unwrap();
    cmd.env_clear()
        .env("PATH", path)
        .env("HOME", krew_root)
        .env("KREW_ROOT", krew_root)
        .env("KREW_NO_UPGRADE_CHECK", "1")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1")
        .env("NO_COLOR", "1");
}

fn assert_ran(out: &std::process::Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    text
}

/// What a krew-index reviewer runs: krew's own validator accepts the
/// rendered manifest (structure, every platform used once), and, with the
/// URIs pointed at a loopback copy of the release, installs every platform
/// through the real `kubectl krew install`, which checks each archive's
/// sha256 and the LICENSE it must extract.
#[test]
fn the_real_krew_validator_accepts_the_rendered_manifest_for_every_platform() {
    let (Some(validator), Some(kubectl)) = (
        crate::support::tools::tool("validate-krew-manifest"),
        crate::support::tools::kubectl(),
    ) else {
        return;
    };
    let dist = tempfile::tempdir().unwrap();
    release_every_platform(dist.path());
    let manifest = dist.path().join("cilium-gc.yaml");
    let rendered = load_yaml(&manifest);
    let version = cargo_version();
    for p in rendered["spec"]["platforms"].as_array().unwrap() {
        let (os, arch) = (
            str_at(p, "/selector/matchLabels/os"),
            str_at(p, "/selector/matchLabels/arch"),
        );
        let archive = dist
            .path()
            .join(format!("{BIN}-{version}-{os}-{arch}.tar.gz"));
        assert_eq!(str_at(p, "/sha256"), sha256_of(&archive), "{os}/{arch}");
    }

    let krew_root = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(&validator);
    cmd.arg("-manifest").arg(&manifest).arg("-skip-install");
    krew_env(&mut cmd, krew_root.path(), &kubectl);
    let said = assert_ran(
        &cmd.output().unwrap(),
        "validate-krew-manifest -skip-install",
    );
    assert!(said.contains("structural validation OK"), "{said}");

    // Every platform installed, from a loopback copy of the release.
    let url = serve_dir(dist.path());
    let local = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&manifest).unwrap();
    let prefix = format!(
        "https://github.com/kubectl-cilium-gc/kubectl-cilium-gc/releases/download/v{version}"
    );
    assert_eq!(text.matches(&prefix).count(), PLATFORMS.len(), "{text}");
    let local_manifest = local.path().join("cilium-gc.yaml");
    std::fs::write(&local_manifest, text.replace(&prefix, &url)).unwrap();
    let mut cmd = Command::new(&validator);
    cmd.arg("-manifest").arg(&local_manifest);
    krew_env(&mut cmd, krew_root.path(), &kubectl);
    let said = assert_ran(&cmd.output().unwrap(), "validate-krew-manifest");
    assert!(
        said.contains(&format!(
            "all {} spec.platforms installed fine",
            PLATFORMS.len()
        )),
        "{said}"
    );

    // And it fails when an archive does not match its sha256.
    let (os, arch) = PLATFORMS[0];
    let archive = dist
        .path()
        .join(format!("{BIN}-{version}-{os}-{arch}.tar.gz"));
    let mut bytes = std::fs::read(&archive).unwrap();
    bytes.push(0);
    std::fs::write(&archive, bytes).unwrap();
    let mut cmd = Command::new(&validator);
    cmd.arg("-manifest").arg(&local_manifest);
    krew_env(&mut cmd, krew_root.path(), &kubectl);
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "a tampered archive must not install");
}

/// A user's install: in a fresh `KREW_ROOT`, the real `kubectl krew install
/// --manifest --archive` installs the archive `.ci/release` built; the real
/// kubectl finds the plugin on `PATH` and `kubectl cilium-gc version` prints
/// our version; `kubectl krew uninstall` removes it.
#[test]
fn the_real_krew_installs_and_uninstalls_the_release() {
    if !crate::support::tool_or_skip("git", "the real krew's index") {
        return;
    }
    let (Some(_), Some(kubectl)) = (
        crate::support::tools::tool("kubectl-krew"),
        crate::support::tools::kubectl(),
    ) else {
        return;
    };
    let dist = tempfile::tempdir().unwrap();
    release_every_platform(dist.path());
    let (os, arch) = host_platform();
    let version = cargo_version();
    let archive = dist
        .path()
        .join(format!("{BIN}-{version}-{os}-{arch}.tar.gz"));
    let krew_root = tempfile::tempdir().unwrap();
    let kubectl_in = |args: &[&str]| {
        let mut cmd = Command::new(&kubectl);
        cmd.args(args);
        krew_env(&mut cmd, krew_root.path(), &kubectl);
        cmd.output().unwrap()
    };

    let manifest = dist.path().join("cilium-gc.yaml");
    let said = assert_ran(
        &kubectl_in(&[
            "krew",
            "install",
            &format!("--manifest={}", manifest.display()),
            &format!("--archive={}", archive.display()),
        ]),
        "kubectl krew install",
    );
    assert!(said.contains("Installed plugin: cilium-gc"), "{said}");
    assert!(krew_root.path().join("bin").join(BIN).exists());

    // `list` and `uninstall` want a plugin index (a git clone): our own
    // index, as the README's `krew index add` gives users, here a local
    // git repository holding the rendered manifest (no network).
    let index = tempfile::tempdir().unwrap();
    std::fs::create_dir(index.path().join("plugins")).unwrap();
    std::fs::copy(&manifest, index.path().join("plugins/cilium-gc.yaml")).unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@localhost",
            "commit",
            "-qm",
            "index",
        ],
    ] {
        let out = Command::new("git")
            .args(args)
            .current_dir(index.path())
            .output()
            .expect("git runs");
        assert_ran(&out, &format!("git {args:?}"));
    }
    assert_ran(
        &kubectl_in(&[
            "krew",
            "index",
            "add",
            "cilium-gc",
            index.path().to_str().unwrap(),
        ]),
        "kubectl krew index add",
    );
    let listed = assert_ran(&kubectl_in(&["krew", "list"]), "kubectl krew list");
    assert!(listed.contains("cilium-gc"), "{listed}");

    let out = kubectl_in(&["cilium-gc", "version"]);
    let said = assert_ran(&out, "kubectl cilium-gc version");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(version),
        "version through kubectl's plugin discovery: {said}"
    );
    let plugins = assert_ran(&kubectl_in(&["plugin", "list"]), "kubectl plugin list");
    assert!(plugins.contains(BIN), "{plugins}");

    assert_ran(
        &kubectl_in(&["krew", "uninstall", "cilium-gc"]),
        "kubectl krew uninstall",
    );
    assert!(!krew_root.path().join("bin").join(BIN).exists());
    let out = kubectl_in(&["cilium-gc", "version"]);
    assert!(
        !out.status.success(),
        "still runs after uninstall: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
