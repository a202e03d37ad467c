//! Records the git commit the binary is built from, for `version` and the
//! report's `tool.commit`. Outside a git checkout (crates.io, release
//! tarballs) the commit is simply unknown.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KUBECTL_CILIUM_GC_COMMIT");
    if std::env::var_os("KUBECTL_CILIUM_GC_COMMIT").is_some() {
        return;
    }
    for f in [".git/HEAD", ".git/index"] {
        if std::path::Path::new(f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    println!("cargo:rustc-env=KUBECTL_CILIUM_GC_COMMIT={commit}");
}
