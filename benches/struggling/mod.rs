//! The struggling servers across seeds (`cargo bench --bench compare --
//! --only struggling-seeds,hostile-seeds`), each drawn with three seeds
//! (`cilium-gc-sim --seed`: its objects, its actors' choices, its faults'
//! draws):
//! - `struggling-seeds`, the `struggling` preset: a server built like a
//!   struggling one met in the field (a 50 deletes/s cap answered 429 +
//!   `Retry-After`, a 3 s burst of 429s every 15 s, 3 % 5xx, nothing else;
//!   it admits about 40 deletes/s);
//! - `hostile-seeds`, the `hostile` preset: the same cap, a 3 s burst every
//!   20 s, 3 % 5xx, and its other noise (5 % random 429s, connection
//!   resets, slow list pages, expired continue tokens, watches that end).
//!
//! For each seed, on fresh servers: what the server admits (the reference
//! client, `benches/refclient`, 900 deletes 8 in flight, every 429 retried
//! at once, twice, the mean), then `delete --yes` at `--qps 0 -c 8` and at
//! `--qps 100 -c 8`, each row's rate against that seed's admitted rate.
//! Then per setting the spread over seeds (min / median / max of
//! `fractionOfAdmitted`) and the goal, ≥ 0.85 of what is admitted, judged
//! at the minimum: a missed goal is printed, not a failure. A violation
//! fails the bench: the reference client or the plugin exiting non-zero, a
//! report that does not parse, a candidate left unhandled.

use std::path::Path;

use serde_json::{json, Value};

use super::common::judge::{expect_exit, goal};
use super::common::{load, r3, say};
use super::{gc, Opts, Server};

/// The seeds each setting is run with.
const SEEDS: [u64; 3] = [1, 2, 3];
/// `(--qps, --concurrency)` of the plugin's runs.
const SETTINGS: [(u32, u32); 2] = [(0, 8), (100, 8)];
/// The goal: this share of what the server admits, at the worst seed.
const GOAL: f64 = 0.85;

/// The parts: `(part, preset, key in the results)`.
const PARTS: [(&str, &str, &str); 2] = [
    ("struggling-seeds", "struggling", "strugglingSeeds"),
    ("hostile-seeds", "hostile", "hostileSeeds"),
];

/// A fresh `preset` server drawn with `seed`.
fn server(preset: &str, seed: u64) -> Server {
    Server::spawn(&["--scenario", preset, "--seed", &seed.to_string()])
}

/// The parts `--only` asks for (or every part): each one's figures in
/// `results[key]`, the printed lines in `results["printed"]`.
pub(crate) fn run(opts: &Opts, results: &mut Value) {
    for (part, preset, key) in PARTS {
        if opts.wants(part) {
            results[key] = seeds(preset);
            results["printed"] = json!(super::common::printed());
        }
    }
}

/// One preset across [`SEEDS`]: what each seed admits, the plugin's runs
/// against it, and the spread per setting.
fn seeds(preset: &str) -> Value {
    let refclient = super::common::refclient();
    let mut admits = Vec::new();
    let mut rows = Vec::new();
    for seed in SEEDS {
        let (admitted, reference) = admitted(&refclient, preset, seed);
        admits.push(json!({"seed": seed, "ratePerSecond": admitted, "runs": reference}));
        for (qps, conc) in SETTINGS {
            rows.push(delete_run(preset, seed, (qps, conc), admitted));
        }
    }
    let spreads: Vec<Value> = SETTINGS.iter().map(|&s| spread(preset, &rows, s)).collect();
    json!({
        "command": format!("cargo bench --bench compare -- --only {preset}-seeds"),
        "preset": preset, "seeds": SEEDS, "goalFractionOfAdmitted": GOAL,
        "admits": admits, "rows": rows, "spread": spreads,
    })
}

/// What the `seed` server admits: the reference client's rate of
/// successful deletes, twice on fresh servers, and the mean.
fn admitted(refclient: &Path, preset: &str, seed: u64) -> (f64, Vec<Value>) {
    let runs: Vec<Value> = (0..2)
        .map(|_| {
            let server = server(preset, seed);
            let out = super::common::refclient_capacity(refclient, &server.kubeconfig);
            let run = format!("the reference client on {preset} seed {seed}");
            expect_exit(&run, out.status.code().unwrap_or(-1), 0);
            let r: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("violation: {run}: its output does not parse ({e})"));
            assert!(
                r["ratePerSecond"].as_f64().is_some_and(|x| x > 0.0),
                "violation: {run} deleted nothing: {r}"
            );
            r
        })
        .collect();
    let rates: Vec<f64> = runs
        .iter()
        .filter_map(|r| r["ratePerSecond"].as_f64())
        .collect();
    let admitted = r3(rates.iter().sum::<f64>() / rates.len() as f64);
    say!(
        "{preset} seed {seed}: the server admits {admitted}/s (reference client, 900 deletes, 8 in flight; runs {})",
        rates.iter().map(|r| format!("{}/s", r3(*r))).collect::<Vec<_>>().join(", ")
    );
    (admitted, runs)
}

/// One `delete --yes --qps qps --concurrency conc` on a fresh `seed`
/// server, judged (exit 0, every candidate handled): its row.
fn delete_run(preset: &str, seed: u64, (qps, conc): (u32, u32), admitted: f64) -> Value {
    let server = server(preset, seed);
    let load_before = load();
    let (qps_s, conc_s) = (qps.to_string(), conc.to_string());
    let (cost, report) = gc(
        &server,
        &[
            "delete",
            "--yes",
            "--qps",
            &qps_s,
            "--concurrency",
            &conc_s,
            "--items",
            "none",
        ],
    );
    let run = format!("delete --yes --qps {qps} -c {conc} on {preset} seed {seed}");
    let code = match report["exitCode"].as_i64() {
        Some(c) if cost.ok || c != 0 => c as i32,
        _ => -1,
    };
    if code != 0 {
        eprintln!(
            "  {run}: exit {code}; the simulator's log ends:\n{}",
            super::common::tail(&server.log, 20)
        );
    }
    expect_exit(&run, code, 0);
    let s = &report["summary"];
    let count = |k: &str| s[k].as_u64().unwrap_or(0);
    let handled: u64 = ["deleted", "alreadyGone", "reclaimed"]
        .map(count)
        .iter()
        .sum();
    assert!(
        count("candidates") > 0 && handled == count("candidates"),
        "violation: {run} handled {handled} of {} candidates",
        count("candidates")
    );
    let rate = s["deleteRatePerSecond"].as_f64().unwrap_or(0.0);
    let frac = r3(rate / admitted);
    say!(
        "{preset} seed {seed} --qps {qps} -c {conc}: {} deleted, {handled}/{} handled, {}/s, {frac} of what it admits ({admitted}/s), {} of the 50/s cap, wall {} s, exit 0",
        count("deleted"), count("candidates"), r3(rate), r3(rate / 50.0), r3(cost.wall)
    );
    json!({
        "seed": seed, "qps": qps, "concurrency": conc,
        "candidates": s["candidates"], "deleted": s["deleted"], "handled": handled,
        "deleteRatePerSecond": rate, "admittedPerSecond": admitted,
        "fractionOfAdmitted": frac, "fractionOfCap": r3(rate / 50.0),
        "wallSeconds": r3(cost.wall), "exitCode": code,
        "throttled": s["throttled"], "retryAfterWaitSeconds": s["retryAfterWaitSeconds"],
        "serverErrors": s["serverErrors"], "loadAverage": [load_before, load()],
    })
}

/// Min, median and max of `xs` (upper median for an even count).
fn min_median_max(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[0], xs[xs.len() / 2], xs[xs.len() - 1])
}

/// The spread over seeds of one setting's rows, printed with its goal line.
fn spread(preset: &str, rows: &[Value], (qps, conc): (u32, u32)) -> Value {
    let mine: Vec<&Value> = rows
        .iter()
        .filter(|r| r["qps"] == qps && r["concurrency"] == conc)
        .collect();
    let of = |k: &str| min_median_max(mine.iter().filter_map(|r| r[k].as_f64()).collect());
    let (lo, mid, hi) = of("fractionOfAdmitted");
    let (rlo, rmid, rhi) = of("deleteRatePerSecond");
    let seeds = SEEDS.map(|s| s.to_string()).join(", ");
    say!(
        "{preset} --qps {qps} -c {conc} over seeds {seeds}: fractionOfAdmitted min {lo} / median {mid} / max {hi}; delete/s min {} / median {} / max {}",
        r3(rlo), r3(rmid), r3(rhi)
    );
    let met = goal(
        &format!(
            "≥ {GOAL} of what the {preset} server admits at --qps {qps} -c {conc}, at the worst of seeds {seeds}"
        ),
        lo >= GOAL,
        &format!("min {lo}, median {mid}, max {hi}"),
    );
    json!({
        "qps": qps, "concurrency": conc, "seeds": SEEDS,
        "fractionOfAdmitted": {"min": lo, "median": mid, "max": hi},
        "deleteRatePerSecond": {"min": r3(rlo), "median": r3(rmid), "max": r3(rhi)},
        "goalMet": met,
    })
}
