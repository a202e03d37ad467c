//! The container image as users get it: built by `.ci/image` (no daemon,
//! go-containerregistry's crane from `tests/tools/build.sh`), pushed to a
//! registry this test starts on loopback (`crane registry serve`), and read
//! back from it by digest. Shared by the integration suite (the image's
//! contract) and the end-to-end suite (the CronJob run from its root
//! filesystem) through `#[path]`.

// Each of the two test binaries uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use super::tools;
use crate::support::{repo_path, tool_or_skip};

/// What `.ci/image` needs besides crane and cargo.
const IMAGE_TOOLS: [&str; 4] = ["jq", "tar", "file", "git"];

/// One `.ci/image` run: the OCI layout tarball it wrote and what it printed.
pub struct Built {
    /// `kubectl-cilium_gc-<version>-linux-<arch>.oci.tar`.
    pub layout_tar: PathBuf,
    /// Its stderr (reference, digest, size).
    pub stderr: String,
    _dir: tempfile::TempDir,
}

/// The image, built once per test binary by `.ci/image` (the static release
/// build is cargo's, so cached after the first run). `None` when a tool is
/// missing outside CI; in CI that fails the test.
pub fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !IMAGE_TOOLS
                .iter()
                .all(|t| tool_or_skip(t, "the container image (.ci/image)"))
            {
                return None;
            }
            let crane = crane()?;
            let dir = tempfile::tempdir().unwrap();
            let out = Command::new(repo_path(".ci/image"))
                .arg("--out")
                .arg(dir.path())
                .env("CRANE", crane)
                .output()
                .expect(".ci/image runs");
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), ".ci/image failed:\n{stderr}");
            let layout_tar = only_file(dir.path(), ".oci.tar");
            Some(Built {
                layout_tar,
                stderr,
                _dir: dir,
            })
        })
        .as_ref()
}

/// The one file in `dir` whose name ends with `suffix`.
pub fn only_file(dir: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one *{suffix} in {}: {found:?}",
        dir.display()
    );
    found.into_iter().next().unwrap()
}

/// The reference the release publishes the image as (`.ci/image --print-reference`).
pub fn release_reference() -> String {
    let out = Command::new(repo_path(".ci/image"))
        .arg("--print-reference")
        .output()
        .expect(".ci/image runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The real crane (v0.22.1), built by `tests/tools/build.sh`.
pub fn crane() -> Option<PathBuf> {
    tools::tool("crane")
}

/// `crane args`: its stdout, or a panic with its stderr.
pub fn crane_out(args: &[&str]) -> Vec<u8> {
    let out = crane_run(args);
    assert!(
        out.status.success(),
        "crane {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn crane_run(args: &[&str]) -> Output {
    Command::new(crane().expect("crane is built"))
        .args(args)
        .output()
        .expect("crane runs")
}

/// go-containerregistry's registry (`crane registry serve`), in memory, on a
/// free loopback port; stopped when dropped.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub host: String,
}

impl Registry {
    /// Start one (crane must be built).
    pub fn start() -> Registry {
        let mut child = Command::new(crane().expect("crane is built"))
            .args(["registry", "serve", "--address", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("crane registry serve starts");
        // It logs "serving on port N" once it listens.
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let port = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.split("serving on port ").nth(1).map(str::to_owned))
            .expect("the registry says its port");
        // Keep draining its log so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Registry {
            child,
            host: format!("127.0.0.1:{}", port.trim()),
        }
    }

    /// Push the OCI layout tarball as `<host>/<path>` (path and tag of
    /// `reference`, the registry host replaced by this one's); returns the
    /// pushed reference and the digest the registry holds for the tag.
    pub fn push(&self, layout_tar: &Path, reference: &str) -> (String, String) {
        let layout = tempfile::tempdir().unwrap();
        let st = Command::new("tar")
            .arg("-xf")
            .arg(layout_tar)
            .arg("-C")
            .arg(layout.path())
            .status()
            .unwrap();
        assert!(st.success(), "tar -x of the layout");
        let (_, path) = reference.split_once('/').expect("registry/path:tag");
        let target = format!("{}/{path}", self.host);
        crane_out(&["push", layout.path().to_str().unwrap(), &target]);
        let digest = String::from_utf8(crane_out(&["digest", &target])).unwrap();
        (target, digest.trim().to_owned())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `<host>/<path>@<digest>` for a `<host>/<path>:<tag>`.
pub fn by_digest(tagged: &str, digest: &str) -> String {
    let (repo, _) = tagged.rsplit_once(':').unwrap();
    format!("{repo}@{digest}")
}

/// The image config (`crane config`), as the registry serves it.
pub fn config(reference: &str) -> Value {
    serde_json::from_slice(&crane_out(&["config", reference])).expect("config JSON")
}

/// The image's root filesystem, as a runtime unpacks it: `crane export
/// <reference> - | tar -x` into `dest`.
pub fn unpack_rootfs(reference: &str, dest: &Path) {
    let mut export = Command::new(crane().expect("crane is built"))
        .args(["export", reference, "-"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("crane export runs");
    let st = Command::new("tar")
        .args(["-x", "--numeric-owner", "-C"])
        .arg(dest)
        .stdin(export.stdout.take().unwrap())
        .status()
        .expect("tar runs");
    assert!(st.success(), "tar -x of the exported image");
    assert!(export.wait().unwrap().success(), "crane export");
    // The image has no entry for its root; a runtime's is 0755, where the
    // temporary directory's is 0700 (closed to the pod's user).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Whether an ELF file asks for a program interpreter (`PT_INTERP`): a
/// dynamically linked executable does, a static (or static-pie) one does not.
pub fn elf_has_interpreter(bytes: &[u8]) -> bool {
    assert_eq!(&bytes[..4], b"\x7fELF", "an ELF file");
    assert_eq!(bytes[4], 2, "64-bit ELF");
    let u16_at = |o: usize| u16::from_le_bytes(bytes[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    assert!(phnum > 0, "program headers");
    (0..phnum).any(|i| {
        let p_type = u32::from_le_bytes(
            bytes[phoff + i * phentsize..phoff + i * phentsize + 4]
                .try_into()
                .unwrap(),
        );
        p_type == 3 // PT_INTERP
    })
}
