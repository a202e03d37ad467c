//! The real tools users run beside the plugin, built from Go modules by
//! `tests/tools/build.sh` (cached): krew and its manifest validator, the
//! Prometheus Pushgateway and promtool. Shared by the integration and the
//! end-to-end suites (`#[path]`), so both build and start them one way.

// Each of the two test binaries uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support::{repo_path, tool_or_skip};

/// What `tests/tools/build.sh` needs beyond the Rust toolchain.
const BUILD_TOOLS: [&str; 2] = ["go", "flock"];

/// The directory of the built tools, building them once per test binary
/// (cached across runs by build.sh). `None` when Go is missing outside CI;
/// in CI that fails the test.
pub fn bin_dir() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        if !BUILD_TOOLS
            .iter()
            .all(|t| tool_or_skip(t, "the tests of the real krew, Pushgateway and promtool"))
        {
            return None;
        }
        Some(build("tests/tools/build.sh", "krew, pushgateway, promtool"))
    })
    .as_deref()
}

/// The real `kubectl` of the end-to-end suite's release (tests/apiserver).
pub fn kubectl() -> Option<PathBuf> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        if !["go", "flock"]
            .iter()
            .all(|t| tool_or_skip(t, "the real kubectl (tests/apiserver)"))
        {
            return None;
        }
        Some(build("tests/apiserver/build.sh", "kubectl").join("bin"))
    })
    .as_ref()
    .map(|d| d.join("kubectl"))
}

/// Runs a build script and returns the directory it prints.
fn build(script: &str, what: &str) -> PathBuf {
    let out = Command::new(repo_path(script))
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("{script} runs: {e}"));
    assert!(
        out.status.success(),
        "building {what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).expect("utf-8 path").trim())
}

/// The path of one built tool (`promtool`, `pushgateway`, `kubectl-krew`,
/// `validate-krew-manifest`).
pub fn tool(name: &str) -> Option<PathBuf> {
    bin_dir().map(|d| d.join(name))
}

/// A real Pushgateway on a free loopback port, stopped when dropped.
pub struct Pushgateway {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
}

impl Pushgateway {
    /// Start one; `None` when the tools cannot be built here (outside CI).
    pub fn start() -> Option<Pushgateway> {
        let bin = tool("pushgateway")?;
        for _ in 0..5 {
            let port = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            };
            let mut child = Command::new(&bin)
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--log.level=warn")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("pushgateway starts");
            let url = format!("http://127.0.0.1:{port}");
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if child.try_wait().expect("pushgateway status").is_some() {
                    break; // the port was taken meanwhile: try another
                }
                if ready(port) {
                    return Some(Pushgateway { child, url });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("the Pushgateway did not become ready on any of 5 ports");
    }

    /// `GET <path>` from this Pushgateway: the body, or a panic on anything but 200.
    pub fn get(&self, path: &str) -> String {
        let port = self.url.rsplit(':').next().unwrap().parse().unwrap();
        let (status, body) = http_get(port, path).expect("the Pushgateway answers");
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }
}

impl Drop for Pushgateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ready(port: u16) -> bool {
    matches!(http_get(port, "/-/ready"), Ok((200, _)))
}

/// A minimal HTTP/1.0 GET to 127.0.0.1 (no client crate needed for a
/// loopback read of a few kilobytes).
fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_owned()))
}
