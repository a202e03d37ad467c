//! The Mermaid charts of `diagnose -o markdown` drawn by the real renderer:
//! @mermaid-js/mermaid-cli (`mmdc`, the Mermaid that GitHub and GitLab
//! draw issues with) driving Debian's chromium, installed by
//! `tests/tools/mermaid.sh`. Every ```` ```mermaid ```` block of a diagnosis
//! of a churning simulated cluster, and of two saved clusters where most
//! counts are 0, must draw: mmdc exits 0, prints no error and draws no
//! "Syntax error" picture (which Mermaid does with exit 0), and the picture
//! holds what the block says (every pie slice in the legend with its count,
//! one bar per hour, a bar of 0 flat). Nothing from the cluster, redacted or
//! not, reaches a chart.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::world::{binary, TEST_TIMEOUT};
use crate::support::{repo_path, tool_or_skip};

/// `mmdc` and the puppeteer config that hands it chromium.
struct Renderer {
    mmdc: PathBuf,
    config: PathBuf,
}

/// The renderer, installed once per test binary (cached across runs by
/// the script). `None` when chromium or npm is missing outside CI; in CI
/// that fails the test.
fn renderer() -> Option<&'static Renderer> {
    static R: OnceLock<Option<Renderer>> = OnceLock::new();
    R.get_or_init(|| {
        let what = "the Mermaid charts drawn by the real renderer";
        if !["chromium", "npm", "flock"]
            .iter()
            .all(|t| tool_or_skip(t, what))
        {
            return None;
        }
        let out = Command::new(repo_path("tests/tools/mermaid.sh"))
            .output()
            .expect("tests/tools/mermaid.sh runs");
        assert!(
            out.status.success(),
            "installing mermaid-cli failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        Some(Renderer {
            mmdc: dir.join("node_modules/.bin/mmdc"),
            config: dir.join("puppeteer-config.json"),
        })
    })
    .as_ref()
}

/// Runs the plugin with `args`; its stdout, after asserting exit 0.
async fn plugin(args: &[&str]) -> String {
    let mut cmd = binary();
    cmd.args(args);
    let out = tokio::time::timeout(TEST_TIMEOUT, cmd.output())
        .await
        .expect("the plugin finished in time")
        .expect("the plugin runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The text of every ```` ```mermaid ```` block of `md`, in order.
fn mermaid_blocks(md: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in md.lines() {
        match (&mut current, line) {
            (None, "```mermaid") => current = Some(String::new()),
            (Some(b), "```") => {
                blocks.push(std::mem::take(b));
                current = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unclosed mermaid block in:\n{md}");
    blocks
}

/// Draws `block` with mmdc into `dir/name.svg`; the SVG. Fails when mmdc
/// fails or says anything of an error, or when Mermaid drew its error
/// picture instead of the chart.
fn draw(r: &Renderer, dir: &Path, name: &str, block: &str) -> String {
    let input = dir.join(format!("{name}.mmd"));
    let output = dir.join(format!("{name}.svg"));
    std::fs::write(&input, block).unwrap();
    let out = Command::new(&r.mmdc)
        .arg("-p")
        .arg(&r.config)
        .arg("-i")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .expect("mmdc runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "mmdc failed on {name}:\n{said}\n{block}"
    );
    assert!(
        !said.to_lowercase().contains("error"),
        "mmdc on {name}:\n{said}\n{block}"
    );
    let svg = std::fs::read_to_string(&output).expect("mmdc wrote the SVG");
    assert!(svg.starts_with("<svg"), "{name}: {svg}");
    for bad in ["Syntax error", "NaN"] {
        assert!(!svg.contains(bad), "{name} drew {bad:?}:\n{block}\n{svg}");
    }
    svg
}

/// A pie's slices: (label, count) from `pie` block lines `"label" : count`.
fn slices(block: &str) -> Vec<(String, u64)> {
    block
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.split_once("\" : "))
        .map(|(label, n)| (label.to_owned(), n.parse().expect("a count")))
        .collect()
}

/// The values of one xychart series (`bar [..]`, `x-axis ".." [..]`).
fn series(block: &str, name: &str) -> Vec<String> {
    let line = block
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} in {block}"));
    let list = line.rsplit_once('[').unwrap().1.trim_end_matches(']');
    list.split(", ")
        .map(|s| s.trim_matches('"').to_owned())
        .collect()
}

/// The heights of the rects Mermaid drew for the first bar series.
fn bar_heights(svg: &str) -> Vec<f64> {
    let group = svg
        .split_once("<g class=\"bar-plot-0\">")
        .expect("a bar series drawn")
        .1;
    let group = &group[..group.find("</g>").expect("the series' group ends")];
    group
        .split("<rect ")
        .skip(1)
        .map(|r| {
            let h = r.split_once("height=\"").unwrap().1;
            h[..h.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}

/// The bars Mermaid drew say the counts: every bar of 0 as high as the
/// others of 0 (Mermaid lifts the axis' 0 half a label above the plot's
/// floor, so they are a few pixels, not none), every other one higher by
/// its count times one scale.
fn bars_follow_counts(bars: &[String], heights: &[f64], case: &str) {
    let counts: Vec<f64> = bars.iter().map(|b| b.parse().unwrap()).collect();
    let floor = heights[counts
        .iter()
        .position(|&c| c == 0.0)
        .expect("hours ahead are 0")];
    let scales: Vec<f64> = counts
        .iter()
        .zip(heights)
        .filter(|(&c, _)| c > 0.0)
        .map(|(c, h)| (h - floor) / c)
        .collect();
    for (c, h) in counts.iter().zip(heights) {
        if *c == 0.0 {
            assert!(
                (h - floor).abs() < 0.5,
                "{case}: bars of 0 drawn {h} and {floor}px high"
            );
        }
    }
    if let Some(first) = scales.first() {
        assert!(*first > 0.0, "{case}: a bar above 0 no higher than 0");
        for s in &scales {
            assert!((s - first).abs() <= first * 0.01, "{case}: {scales:?}");
        }
    }
}

/// Draws every block of `md` and checks each picture against its block:
/// the pie's slices in its legend with their counts; the xychart's bars,
/// one per hour, flat where the count is 0, and its pace line. Returns the
/// blocks.
fn draw_all(r: &Renderer, md: &str, case: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let blocks = mermaid_blocks(md);
    assert_eq!(blocks.len(), 2, "{case}: the pie and the creation chart");
    for (i, block) in blocks.iter().enumerate() {
        let svg = draw(r, dir.path(), &format!("{case}-{i}"), block);
        if block.contains("\npie showData") {
            let slices = slices(block);
            assert_eq!(slices.len(), 5, "{block}");
            for (label, n) in &slices {
                let legend = format!(">{label} [{n}]<");
                assert!(svg.contains(&legend), "{case}: {legend} not in\n{svg}");
            }
        } else {
            assert!(block.contains("\nxychart-beta\n"), "{block}");
            let hours = series(block, "x-axis");
            let bars = series(block, "bar");
            assert_eq!(hours.len(), 48 + 6, "{block}");
            assert_eq!(bars.len(), hours.len(), "{block}");
            assert_eq!(series(block, "line").len(), hours.len(), "{block}");
            let heights = bar_heights(&svg);
            assert_eq!(heights.len(), bars.len(), "{case}: one bar per hour");
            bars_follow_counts(&bars, &heights, case);
            let line = svg
                .split_once("<g class=\"line-plot-1\"><path d=\"")
                .unwrap_or_else(|| panic!("{case}: no pace line in\n{svg}"))
                .1;
            let points = line[..line.find('"').unwrap()].split('L').count();
            assert_eq!(
                points,
                hours.len(),
                "{case}: the pace line, a point an hour"
            );
        }
    }
    blocks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_of_a_churning_cluster_draw_and_leak_nothing() {
    let Some(r) = renderer() else { return };
    let first = std::time::Instant::now();
    let json: Value = serde_json::from_str(
        &plugin(&["diagnose", "--demo-scenario", "churn", "-o", "json"]).await,
    )
    .unwrap();
    let per_hour: Vec<u64> = json["forecast"]["createdPerHour"]
        .as_array()
        .expect("a forecast")
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert!(
        per_hour.iter().all(|&n| n > 20),
        "the premise: churn every hour, {per_hour:?}"
    );
    let md = plugin(&["diagnose", "--demo-scenario", "churn", "-o", "markdown"]).await;
    let blocks = draw_all(r, &md, "churn");
    let pie = slices(&blocks[0]);
    assert_eq!(
        pie[0],
        (
            "In use".to_owned(),
            json["identitySpace"]["states"]["inUse"].as_u64().unwrap()
        )
    );
    let bars: Vec<u64> = series(&blocks[1], "bar")[..48]
        .iter()
        .map(|b| b.parse().unwrap())
        .collect();
    // Two runs some seconds apart (each its own simulated cluster, whose
    // identities are created at the same offsets from its start): the
    // identities near an hour's edge cross it meanwhile, each one moving
    // two counts. At the preset's ~65/h, 48 edges see about 0.9 crossings a
    // second; allow that, doubled, plus two.
    let apart = first.elapsed().as_secs_f64();
    let moved: u64 = bars
        .iter()
        .zip(&per_hour)
        .map(|(a, b)| a.abs_diff(*b))
        .sum();
    assert!(
        moved as f64 <= 2.0 * (2.0 * 0.9 * apart + 2.0),
        "the bars are forecast.createdPerHour, oldest first:\n{bars:?}\n{per_hour:?}"
    );

    // Nothing from the cluster in a chart, though the rest of the Markdown
    // names the namespaces (or, redacted, their tokens).
    let redacted = plugin(&[
        "diagnose",
        "--demo-scenario",
        "churn",
        "--redact",
        "-o",
        "markdown",
    ])
    .await;
    let namespaces: Vec<&str> = json["churn"]["namespacesByIdentities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespace"].as_str().unwrap())
        .collect();
    assert!(!namespaces.is_empty() && md.contains(namespaces[0]));
    assert!(
        redacted.contains("| ns-"),
        "the premise: redacted namespaces"
    );
    let redacted_blocks = mermaid_blocks(&redacted);
    for block in blocks.iter().chain(&redacted_blocks) {
        for ns in &namespaces {
            assert!(!block.contains(ns), "{ns} in a chart:\n{block}");
        }
        assert!(
            !block.contains("ns-"),
            "a redacted token in a chart:\n{block}"
        );
    }
}

/// Two saved clusters, so that most counts are 0: one identity in use and
/// one unused but not marked yet (no stale, none marked: two pie slices of
/// 0), created at `created` (each a creationTimestamp).
fn saved_cluster(created: [&str; 2]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ts = "20260601-120000";
    let sysdump = dir.path().join(format!("cilium-sysdump-{ts}"));
    std::fs::create_dir(&sysdump).unwrap();
    let identities = format!(
        "apiVersion: cilium.io/v2\nkind: CiliumIdentityList\nitems:\n\
         - metadata: {{name: \"1000\", uid: u1000, resourceVersion: \"5\", creationTimestamp: \"{}\"}}\n  \
         security-labels: {{k8s:app: web, k8s:io.kubernetes.pod.namespace: shop}}\n\
         - metadata: {{name: \"1001\", uid: u1001, resourceVersion: \"6\", creationTimestamp: \"{}\"}}\n  \
         security-labels: {{k8s:app: db, k8s:io.kubernetes.pod.namespace: shop}}\n",
        created[0], created[1]
    );
    std::fs::write(
        sysdump.join(format!("ciliumidentities-{ts}.yaml")),
        identities,
    )
    .unwrap();
    let endpoints =
        "items:\n- metadata: {name: web-0, namespace: shop}\n  status: {identity: {id: 1000}}\n";
    std::fs::write(
        sysdump.join(format!("ciliumendpoints-{ts}.yaml")),
        endpoints,
    )
    .unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_draw_when_most_counts_are_zero() {
    let Some(r) = renderer() else { return };
    // Two creations within the last 48 hours; then none at all in them
    // (every bar 0, a pace of 0).
    for (case, created) in [
        ("recent", ["2026-06-01T10:00:00Z", "2026-05-31T20:10:00Z"]),
        ("quiet", ["2026-05-01T10:00:00Z", "2026-05-02T20:10:00Z"]),
    ] {
        let dir = saved_cluster(created);
        let from = dir.path().to_str().unwrap();
        let md = plugin(&["diagnose", "--from", from, "-o", "markdown"]).await;
        let blocks = draw_all(r, &md, case);
        let zero_slices = slices(&blocks[0]).iter().filter(|(_, n)| *n == 0).count();
        assert_eq!(zero_slices, 2, "the premise: stale and marked are 0");
        let created: u64 = series(&blocks[1], "bar")
            .iter()
            .map(|b| b.parse::<u64>().unwrap())
            .sum();
        assert_eq!(created, if case == "recent" { 2 } else { 0 }, "{case}");
    }
}

/// The check can fail: a slice that is not a number, which mmdc draws as
/// Mermaid's "Syntax error" picture with exit 0, and a negative slice, on
/// which mmdc fails.
#[test]
fn a_chart_mermaid_cannot_parse_fails_the_check() {
    let Some(r) = renderer() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (name, value, says) in [
        ("word", "many", "drew \"Syntax error\""),
        ("negative", "-1", "mmdc failed"),
    ] {
        let broken = format!("pie showData title T\n    \"In use\" : {value}\n    \"Free\" : 2\n");
        let caught = std::panic::catch_unwind(|| draw(r, dir.path(), name, &broken));
        let message = caught.expect_err("the broken chart passed");
        let message = message
            .downcast_ref::<String>()
            .expect("a formatted message");
        assert!(message.contains(says), "{name}: {message}");
    }
}
