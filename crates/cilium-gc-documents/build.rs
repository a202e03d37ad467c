//! Records the git commit the documents crate is built from (the commit
//! of the whole workspace), for `version` and the
//! report's `tool.commit`. Outside a git checkout (crates.io, release
//! tarballs) the commit is simply unknown.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=KUBECTL_CILIUM_GC_COMMIT");
    if std::env::var_os("KUBECTL_CILIUM_GC_COMMIT").is_some() {
        return;
    }
    // This crate sits two levels below the checkout, so `.git` is not a
    // relative path from here: ask git where HEAD, the index and the
    // current branch's ref live (worktrees keep them apart), or a commit
    // would not rebuild the crate and `tool.commit` would go stale.
    // (A packed ref has no file of its own; a missing path would make cargo
    // rerun this on every build, so only existing files are watched.)
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for f in ["HEAD", "index"].into_iter().chain(branch.as_deref()) {
        if let Some(p) =
            git(&["rev-parse", "--git-path", f]).filter(|p| std::path::Path::new(p).exists())
        {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=KUBECTL_CILIUM_GC_COMMIT={commit}");
}
