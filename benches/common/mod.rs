//! What the benchmarks share: one child process measured alone (wall time
//! around it, CPU and peak RSS from `wait4`'s rusage of that child), and
//! the figures' rounding. See `compare.rs` for the peak-RSS caveat.

// Each bench uses part of this module.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub mod judge;

/// Every line a bench printed through `say!`, in order: its results
/// JSON stores them (`"printed"`), so docs quote lines verbatim.
static PRINTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Print `text` on stderr and record each of its lines (see [`printed`]);
/// `say!` formats and calls it.
pub fn print_recorded(text: &str) {
    eprintln!("{text}");
    PRINTED
        .lock()
        .unwrap()
        .extend(text.lines().map(str::to_owned));
}

/// The lines printed through [`print_recorded`] (`say!`) so far.
pub fn printed() -> Vec<String> {
    PRINTED.lock().unwrap().clone()
}

/// `say!("...", args)`: [`print_recorded`] of a `format!`.
#[allow(unused_macros)]
macro_rules! say {
    ($($t:tt)*) => {
        $crate::common::print_recorded(&format!($($t)*))
    };
}
#[allow(unused_imports)]
pub(crate) use say;

/// What one child process cost, and what the simulator spent meanwhile.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    pub wall: f64,
    pub cpu: f64,
    pub max_rss_kib: i64,
    pub sim_cpu: f64,
    pub ok: bool,
}

impl Cost {
    pub fn json(&self) -> Value {
        json!({"wallSeconds": r3(self.wall), "cpuSeconds": r3(self.cpu), "peakRssKiB": self.max_rss_kib,
               "simulatorCpuSeconds": r3(self.sim_cpu), "ok": self.ok})
    }
    pub fn plus(self, o: Cost) -> Cost {
        Cost {
            wall: self.wall + o.wall,
            cpu: self.cpu + o.cpu,
            max_rss_kib: self.max_rss_kib.max(o.max_rss_kib),
            sim_cpu: self.sim_cpu + o.sim_cpu,
            ok: self.ok && o.ok,
        }
    }
}

pub fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The median run by wall time (upper median for an even count).
pub fn median(mut runs: Vec<Cost>) -> Cost {
    runs.sort_by(|a, b| a.wall.total_cmp(&b.wall));
    runs[runs.len() / 2]
}

/// 1-minute load average, as `uptime` shows it.
pub fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// CPU seconds (user + system) a process has used so far.
pub fn proc_cpu(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields overall, in clock ticks.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// The simulator's own binary (`cilium-gc-sim`), built (release) next to
/// the plugin binary `plugin_bin`, once per bench process: the build can
/// take minutes on a loaded machine, and must never count against a
/// simulator's start-up wait (it did: "simulator did not come up").
pub fn sim_bin(plugin_bin: &str) -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| build_sim(plugin_bin)).clone()
}

fn build_sim(plugin_bin: &str) -> std::path::PathBuf {
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-p",
            "cilium-gc-sim",
            "--bin",
            "cilium-gc-sim",
        ])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building cilium-gc-sim failed");
    std::path::Path::new(plugin_bin).with_file_name("cilium-gc-sim")
}

/// The plugin binary to measure: `KCG_BENCH_BIN` when set (an earlier
/// build, for before/after figures), else this build's `plugin_bin`.
pub fn plugin_bin(plugin_bin: &str) -> std::path::PathBuf {
    std::env::var_os("KCG_BENCH_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| plugin_bin.into())
}

/// The reference client's capacity run against `kubeconfig`: 900 deletes,
/// 8 in flight, every 429 retried at once (its stdout is one JSON object
/// with `ratePerSecond`, the server's admitted rate). The struggling parts
/// measure the plugin against it.
pub fn refclient_capacity(refclient: &Path, kubeconfig: &Path) -> std::process::Output {
    Command::new(refclient)
        .arg("-kubeconfig")
        .arg(kubeconfig)
        .args([
            "-mode",
            "capacity",
            "-inflight",
            "8",
            "-from",
            "900",
            "-to",
            "0",
        ])
        .stderr(Stdio::inherit())
        .output()
        .expect("the reference client runs")
}

/// The reference client (`benches/refclient`), built with the machine's Go.
pub fn refclient() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = root.join("target/bench-refclient");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(root.join("benches/refclient"))
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .status()
        .expect("go runs");
    assert!(status.success(), "building benches/refclient failed");
    out
}

/// Reset this process's RSS high water mark to its current RSS, so children
/// spawned next do not inherit an earlier peak (see the module doc).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The environment variable that turns a bench binary into [`launcher`].
pub const LAUNCH_ENV: &str = "KCG_BENCH_LAUNCH";

/// The pid [`launcher`] forwards SIGTERM and SIGINT to.
static LAUNCHED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = LAUNCHED.load(std::sync::atomic::Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe; the pid is our unreaped child.
        unsafe { libc::kill(pid, sig) };
    }
}

/// `cmd`, started through this bench binary run again as a small
/// launcher ([`launcher`]) that writes the command's own peak RSS (KiB) to
/// `rss_file`. A child spawned straight from a bench that holds a large
/// heap starts its `ru_maxrss` at the bench's RSS (see `compare.rs`): a
/// floor of 145 MiB once stood as the plugin's own figure. The launcher is
/// freshly exec'd and small, so the floor it hands on is a few MiB.
pub fn through_launcher(cmd: &Command, rss_file: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("the bench's own path"));
    c.env(LAUNCH_ENV, rss_file)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c
}

/// First thing in a bench's `main`: when started by [`through_launcher`],
/// run the command, forward SIGTERM and SIGINT to it, write its peak RSS
/// to the file, and exit with its exit code. Otherwise returns at once.
pub fn launcher() {
    let Some(file) = std::env::var_os(LAUNCH_ENV) else {
        return;
    };
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let child = Command::new(&args[0])
        .args(&args[1..])
        .env_remove(LAUNCH_ENV)
        .spawn()
        .expect("the launched command starts");
    LAUNCHED.store(child.id() as i32, std::sync::atomic::Ordering::SeqCst);
    let handler = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only loads an atomic and calls kill(2).
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
    let (code, usage) = wait4(child);
    std::fs::write(&file, usage.ru_maxrss.to_string()).expect("the launcher's RSS file");
    std::process::exit(code);
}

/// The peak RSS (KiB) [`launcher`] wrote to `rss_file`.
pub fn launched_rss_kib(rss_file: &Path) -> i64 {
    std::fs::read_to_string(rss_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("violation: no peak RSS in {}", rss_file.display()))
}

/// Run a command to completion, measuring it alone; stdout goes to `out`.
pub fn measure(cmd: &mut Command, out: Stdio, sim: Option<u32>) -> Cost {
    reset_peak_rss();
    let sim_before = sim.map_or(0.0, proc_cpu);
    let start = Instant::now();
    let child = cmd
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let (status, usage) = wait4(child);
    let wall = start.elapsed().as_secs_f64();
    Cost {
        wall,
        cpu: cpu_seconds(&usage),
        max_rss_kib: usage.ru_maxrss,
        sim_cpu: sim.map_or(0.0, |p| proc_cpu(p) - sim_before),
        ok: status == 0,
    }
}

/// User and system CPU seconds of a `wait4` rusage.
pub fn cpu_seconds(usage: &libc::rusage) -> f64 {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

pub fn wait4(child: Child) -> (i32, libc::rusage) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r != -1 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break r;
        }
    };
    assert_eq!(r, pid, "wait4");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    std::mem::forget(child);
    (code, usage)
}

/// Start the simulator `sim` with `args`, writing its kubeconfig to
/// `kubeconfig`; its stderr goes to `log` (next to the kubeconfig), so a
/// simulator that fails or hangs can be explained.
pub fn spawn_sim(sim: &Path, args: &[&str], kubeconfig: &Path, log: &Path) -> Child {
    let err = std::fs::File::create(log).expect("simulator log file");
    Command::new(sim)
        .args(args)
        .arg("--kubeconfig-out")
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("cilium-gc-sim starts")
}

/// Wait until the simulator has written its kubeconfig (it writes it once
/// it listens). Panics with the tail of its log when it exits first or is
/// not up within `limit`.
pub fn wait_for_sim(child: &mut Child, kubeconfig: &Path, log: &Path, limit: Duration) {
    let started = Instant::now();
    while !kubeconfig.exists() {
        let why = match child.try_wait() {
            Ok(Some(status)) => Some(format!("simulator exited ({status}) before it was up")),
            _ if started.elapsed() > limit => Some(format!(
                "simulator not up after {:.0} s",
                limit.as_secs_f64()
            )),
            _ => None,
        };
        if let Some(why) = why {
            panic!(
                "{why}; the end of its log ({}):\n{}",
                log.display(),
                tail(log, 40)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
}

/// The last `n` lines of a text file (empty if unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
