//! `diagnose`'s text view in a real terminal: tmux, 80 columns wide, runs
//! the built plugin on a simulated cluster, and the pane is read back as a
//! person sees it. The bar of the local range and the sparkline of
//! creations must each stay on one row (a wrapped bar is a broken
//! picture), colour must reach the terminal, and must not with `NO_COLOR`
//! in the same terminal nor when stdout is a pipe.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::tool_or_skip;

/// The preset the plugin diagnoses: identities made over the last 48
/// hours, so the sparkline has every hour to draw.
const SCENARIO: &str = "churn";

/// A tmux server of this test's own (its own socket), killed when dropped,
/// on failure too.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached session of 80 by 50 running `command` in its one pane.
    fn start(command: &str) -> Tmux {
        let tmux = Tmux {
            socket: format!("cilium-gc-it-{}", std::process::id()),
        };
        tmux.run(&[
            "new-session",
            "-d",
            "-x",
            "80",
            "-y",
            "50",
            "-s",
            "diagnose",
            command,
        ]);
        tmux
    }

    /// `tmux -L <socket> args`: its stdout, or a panic with its stderr.
    /// No configuration file: a user's `~/.tmux.conf` does not change the
    /// pane.
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-f", "/dev/null", "-L"])
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("tmux prints UTF-8")
    }

    /// The pane and its history, with the escapes that draw it (`-e`) or
    /// plain.
    fn capture(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-S", "-", "-t", "diagnose"];
        if escapes {
            args.push("-e");
        }
        self.run(&args)
    }

    /// The plain pane once `marker` is on it. The bound only keeps a hung
    /// run from hanging the suite; how long it took is not checked.
    fn wait_for(&self, marker: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let pane = self.capture(false);
            if pane.lines().any(|l| l.trim_end() == marker) {
                return pane;
            }
            assert!(Instant::now() < deadline, "no {marker} in:\n{pane}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// The shell line the pane runs: the plugin three times, coloured as the
/// terminal allows, with `NO_COLOR=1`, and into a pipe, each run's text
/// between `BEGIN-<name>` and `END-<name> <exit code>`. stderr goes to
/// files in `dir`, which the failure messages quote.
fn script(bin: &Path, dir: &Path) -> String {
    let run = |name: &str, env: &str, pipe: &str| {
        format!(
            "printf 'BEGIN-{name}\\n'; {env} '{bin}' diagnose --demo-scenario {SCENARIO} \
             2>'{dir}/{name}.err' {pipe}; printf 'END-{name} %s\\n' $?; ",
            bin = bin.display(),
            dir = dir.display(),
        )
    };
    let clean = "env -u NO_COLOR -u KUBECONFIG";
    format!(
        "{}{}{}printf 'ALL-DONE\\n'; exec sleep 3600",
        run("tty", clean, ""),
        run("nocolor", &format!("{clean} NO_COLOR=1"), ""),
        run("pipe", clean, "| cat"),
    )
}

/// The lines between `BEGIN-<name>` and `END-<name> …`, asserting the run
/// exited 0.
fn section<'a>(pane: &'a str, name: &str, dir: &Path) -> Vec<&'a str> {
    let lines: Vec<&str> = pane.lines().collect();
    let begin = format!("BEGIN-{name}");
    let start = lines.iter().position(|l| strip(l).trim_end() == begin);
    let start = start.unwrap_or_else(|| panic!("no {begin} in:\n{pane}"));
    let end = lines[start..]
        .iter()
        .position(|l| strip(l).starts_with(&format!("END-{name} ")))
        .map(|i| start + i)
        .unwrap_or_else(|| panic!("no END-{name} in:\n{pane}"));
    let err = std::fs::read_to_string(dir.join(format!("{name}.err"))).unwrap_or_default();
    assert!(
        strip(lines[end]).trim_end() == format!("END-{name} 0"),
        "{name}: {}\n{err}",
        lines[end]
    );
    lines[start + 1..end].to_vec()
}

/// A captured line as text: its escape sequences (`ESC [ … final`) left out.
fn strip(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Columns a captured line takes (every glyph of the view is one wide).
fn columns(line: &str) -> usize {
    strip(line).trim_end().chars().count()
}

/// The bar and its legend, the sparkline and its scale, whole: each on a
/// row of its own within 80 columns, the row after each the one the view
/// prints next (a wrapped row would be the rest of the bar instead).
fn assert_pictures_intact(captured: &[&str], name: &str) {
    let run: Vec<String> = captured
        .iter()
        .map(|l| strip(l).trim_end().to_owned())
        .collect();
    let shown = run.join("\n");
    let bar = run
        .iter()
        .position(|l| l.starts_with("  ▕"))
        .unwrap_or_else(|| panic!("{name}: no bar in:\n{shown}"));
    assert!(run[bar].ends_with('▏'), "{name}: bar cut: {}", run[bar]);
    assert!(
        run[bar + 1].starts_with("  █ in use ") && run[bar + 1].contains("· free "),
        "{name}: the row after the bar is not its legend:\n{shown}"
    );
    let spark = run
        .iter()
        .position(|l| l.starts_with("  created/h  48h ago "))
        .unwrap_or_else(|| panic!("{name}: no sparkline in:\n{shown}"));
    assert!(run[spark].ends_with(" now"), "{name}: {}", run[spark]);
    assert!(
        run[spark + 1].contains("/h; hours before the last"),
        "{name}: the row after the sparkline is not its scale:\n{shown}"
    );
    for row in [bar, bar + 1, spark, spark + 1] {
        assert!(columns(&run[row]) <= 80, "{name}: {}", run[row]);
    }
    // 48 hours, one cell each, between "ago " and " now".
    let cells = run[spark]
        .split("48h ago ")
        .nth(1)
        .and_then(|s| s.strip_suffix(" now"))
        .map(|s| s.chars().count());
    assert_eq!(cells, Some(48), "{name}: {}", run[spark]);
}

#[test]
fn diagnose_draws_its_pictures_in_an_80_column_terminal_in_colour_only_there() {
    if !tool_or_skip("tmux", "diagnose's text in a real terminal") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc"));
    let tmux = Tmux::start(&script(bin, dir.path()));
    assert_eq!(
        tmux.run(&["display", "-p", "-t", "diagnose", "#{pane_width}"])
            .trim(),
        "80"
    );
    let plain = tmux.wait_for("ALL-DONE");
    let coloured = tmux.capture(true);
    for name in ["tty", "nocolor", "pipe"] {
        assert_pictures_intact(&section(&plain, name, dir.path()), name);
    }
    let tty = section(&coloured, "tty", dir.path());
    assert_pictures_intact(&tty, "tty with escapes");
    let bar = tty.iter().find(|l| l.contains('▕')).unwrap();
    assert!(
        bar.contains("\u{1b}["),
        "no colour on the terminal's bar: {bar}"
    );
    assert!(
        tty.iter()
            .any(|l| l.contains("created/h") && l.contains("\u{1b}[")),
        "no colour on the sparkline:\n{}",
        tty.join("\n")
    );
    for name in ["nocolor", "pipe"] {
        let run = section(&coloured, name, dir.path());
        assert_pictures_intact(&run, name);
        let escaped: Vec<_> = run.iter().filter(|l| l.contains('\u{1b}')).collect();
        assert!(escaped.is_empty(), "{name}: colour escapes in {escaped:?}");
    }
}
