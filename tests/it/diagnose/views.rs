//! `--demo-scenario`, `-o markdown` and `--redact`: the command's views of a
//! diagnosis.

use super::*;

/// The hidden `--demo-scenario` runs the real path against a simulator it
/// starts itself; an unknown name is a flag error listing the choices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_scenario_diagnoses_a_simulated_cluster() {
    let run = |args: &'static [&'static str]| async move {
        let mut cmd = binary();
        cmd.args(args);
        tokio::time::timeout(TEST_TIMEOUT, cmd.output())
            .await
            .expect("binary finished in time")
            .expect("binary runs")
    };
    let out = run(&["diagnose", "--demo-scenario", "small", "-o", "json"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_conforms(&doc);
    assert_eq!(doc["identitySpace"]["total"], 301);
    assert!(doc["cluster"]["server"]
        .as_str()
        .unwrap()
        .starts_with("https://127.0.0.1:"));
    let codes: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"stale-backlog"), "{codes:?}");

    let text = run(&["diagnose", "--demo-scenario", "small"]).await;
    assert_eq!(text.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&text.stdout).starts_with("Cilium identity diagnosis"));

    let bad = run(&["diagnose", "--demo-scenario", "nope"]).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(bad.stdout.is_empty());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("unknown scenario \"nope\"") && err.contains("small"),
        "{err}"
    );
}

/// Every table in `md`: (header, its rows). Fails when a table's separator
/// row is missing or a row's column count differs from its header's.
pub(crate) fn markdown_tables(md: &str) -> Vec<(Vec<String>, usize)> {
    let columns = |row: &str| -> Vec<String> {
        let mut cells = vec![String::new()];
        let mut prev = ' ';
        for c in row.trim().chars() {
            if c == '|' && prev != '\\' {
                cells.push(String::new());
            } else {
                cells.last_mut().unwrap().push(c);
            }
            prev = c;
        }
        // Leading and trailing pipes leave empty ends.
        assert!(
            cells.len() >= 3 && cells[0].is_empty() && cells.last().unwrap().is_empty(),
            "{row}"
        );
        cells[1..cells.len() - 1]
            .iter()
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut tables = Vec::new();
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with('|') {
            i += 1;
            continue;
        }
        assert!(
            i == 0 || lines[i - 1].trim().is_empty(),
            "a table needs a blank line before it: {}",
            lines[i]
        );
        let header = columns(lines[i]);
        let sep = columns(lines.get(i + 1).expect("separator row"));
        assert!(
            sep.iter().all(|c| c == "---"),
            "bad separator under {header:?}"
        );
        assert_eq!(sep.len(), header.len(), "separator of {header:?}");
        let mut rows = 0;
        i += 2;
        while i < lines.len() && lines[i].starts_with('|') {
            assert_eq!(
                columns(lines[i]).len(),
                header.len(),
                "row {:?} under {header:?}",
                lines[i]
            );
            rows += 1;
            i += 1;
        }
        tables.push((header, rows));
    }
    tables
}

/// `diagnose -o markdown` of the seed scenario (issue 15): the verdict, the
/// headings, tables with the right column counts, `<details>` balanced, the
/// Kubernetes version; under `--redact` no namespace, label value or server
/// of the cluster appears, while the plain rendering shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_of_the_seed_diagnosis_is_a_well_formed_ticket_and_redacts() {
    let w = World::start(calm("seed")).await;
    let run = |args: &'static [&'static str]| {
        let w = &w;
        async move {
            let out = w.bin(args).await;
            assert_ok(&out);
            String::from_utf8(out.stdout).unwrap()
        }
    };
    let plain = run(&["diagnose", "-o", "markdown"]).await;
    let red = run(&["diagnose", "-o", "markdown", "--redact"]).await;
    let json: Value = serde_json::from_str(&run(&["diagnose", "-o", "json"]).await).unwrap();
    for md in [&plain, &red] {
        assert!(
            md.starts_with("# Cilium identity diagnosis\n\n**Verdict: "),
            "{md}"
        );
        let headings: Vec<&str> = md.lines().filter(|l| l.starts_with("## ")).collect();
        for h in [
            "## Findings",
            "## Identity space",
            "## Age and rate",
            "## Churn",
            "## Configuration",
        ] {
            assert!(headings.contains(&h), "{h} missing from {headings:?}");
        }
        assert_eq!(
            md.matches("<details>").count(),
            md.matches("</details>").count()
        );
        let tables = markdown_tables(md);
        let header = |first: &str| {
            tables
                .iter()
                .find(|(h, _)| h[0] == first)
                .unwrap_or_else(|| panic!("no table headed {first}: {tables:?}"))
        };
        let findings = header("Severity");
        assert_eq!(
            findings.0,
            ["Severity", "Code", "Finding", "Evidence", "Next step"]
        );
        assert_eq!(findings.1, json["findings"].as_array().unwrap().len());
        assert_eq!(header("State").0.len(), 2);
        assert_eq!(header("State").1, 8, "seven states and the total");
        assert_eq!(header("Label key").0.len(), 5);
        assert_eq!(header("Namespace").0.len(), 4);
        assert_eq!(header("Key").0.len(), 3);
        let k8s = json["cluster"]["kubernetesVersion"]
            .as_str()
            .expect("the sim serves /version");
        assert!(md.contains(&format!("| Kubernetes | {k8s} |")), "{md}");
        assert!(md.contains(&json["tool"]["version"].as_str().unwrap().to_string()));
        let generated = md
            .lines()
            .find_map(|l| l.strip_prefix("| Generated at | "))
            .expect("the time is shown");
        generated
            .trim_end_matches(" |")
            .parse::<jiff::Timestamp>()
            .expect("an RFC 3339 time");
    }
    // The seed is critical: the verdict says so.
    assert!(red.contains("**Verdict: 🔴 critical"), "{}", &red[..300]);

    let namespaces: Vec<String> = json["churn"]["namespacesByIdentities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespace"].as_str().unwrap().to_string())
        .collect();
    assert!(!namespaces.is_empty());
    for ns in &namespaces {
        assert!(
            plain.contains(&format!("| {ns} |")),
            "plain rendering shows {ns}"
        );
    }
    for s in scenario_secrets(&w)
        .iter()
        .chain(namespaces.iter())
        .chain([&w.sim.url()])
    {
        assert!(!red.contains(s.as_str()), "--redact markdown leaks {s:?}");
    }
    assert!(!red.contains("127.0.0.1"));
    assert!(red.contains("| Redacted | yes"));
    assert!(red.contains("| ns-"), "namespaces appear as tokens");
}

/// Every namespace name and label value the scenario has, for leak checks.
/// `default` (cluster and service-account values) is left out: the document
/// uses the word itself (`"source": "default"`); where it could leak as a
/// label value the structural check in the test covers it.
fn scenario_secrets(w: &World) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    for o in w.identity_objects() {
        for m in [&o["security-labels"], &o["metadata"]["labels"]] {
            for v in m.as_object().into_iter().flatten().map(|(_, v)| v) {
                s.insert(v.as_str().unwrap_or_default().to_owned());
            }
        }
    }
    for key in w.sim.endpoint_keys() {
        s.insert(key.split('/').next().unwrap().to_owned());
    }
    s.remove("default");
    s.remove("");
    s
}

/// `--redact` through the binary: none of the scenario's namespaces, label
/// values, nor the server URL appear in the JSON or the text; the plain run
/// shows them (so the check means something) and its JSON validates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redact_leaves_no_namespace_label_value_or_server() {
    let w = World::start(small()).await;
    // Exercise every place a name can appear: strip-loop examples carry a
    // namespace, duplicate groups carry label values.
    // Three unused identities with a mark, of any age.
    for name in cilium_gc_testkit::stale_names(&w.sim, Duration::ZERO)
        .into_iter()
        .take(3)
    {
        w.sim.set_heartbeat(&name, None).unwrap();
    }
    let secrets = scenario_secrets(&w);
    assert!(secrets.iter().any(|s| s.starts_with("team-")));
    let server = w.sim.url();
    let host = w.sim.addr().to_string();

    let plain = w.bin(&["diagnose", "-o", "json"]).await;
    assert_eq!(
        plain.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let plain_json: Value = serde_json::from_slice(&plain.stdout).expect("stdout is JSON");
    assert_conforms(&plain_json);
    let plain_text = String::from_utf8(plain.stdout).unwrap();
    assert!(plain_text.contains("team-00") && plain_text.contains(&server));
    assert_eq!(plain_json["redacted"], false);

    let red = w.bin(&["diagnose", "--redact", "-o", "json"]).await;
    assert_eq!(
        red.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&red.stderr)
    );
    let doc: Value = serde_json::from_slice(&red.stdout).expect("stdout is JSON");
    assert_conforms(&doc);
    assert_eq!(doc["redacted"], true);
    assert!(doc["cluster"]["server"]
        .as_str()
        .unwrap()
        .starts_with("server-"));
    assert!(doc["cluster"]["context"]
        .as_str()
        .unwrap()
        .starts_with("context-"));
    assert!(doc["integrity"]["stripLoopExamples"][0]["namespace"]
        .as_str()
        .unwrap()
        .starts_with("ns-"));
    for ns in doc["churn"]["namespacesByIdentities"].as_array().unwrap() {
        assert!(ns["namespace"].as_str().unwrap().starts_with("ns-"), "{ns}");
    }
    let groups = doc["churn"]["duplicates"]["examples"].as_array().unwrap();
    assert!(!groups.is_empty(), "the seed has duplicate label sets");
    for g in groups {
        for (k, v) in g["labels"].as_object().unwrap() {
            let v = v.as_str().unwrap();
            assert!(v.starts_with("v-") || v.starts_with("ns-"), "{k}={v}");
        }
    }
    let text_red = w.bin(&["diagnose", "--redact"]).await;
    assert_eq!(text_red.status.code(), Some(0));
    for (what, out) in [("json", &red.stdout), ("text", &text_red.stdout)] {
        let out = String::from_utf8_lossy(out);
        for s in secrets.iter().chain([&server, &host]) {
            assert!(!out.contains(s.as_str()), "--redact {what} leaks {s:?}");
        }
        assert!(!out.contains("127.0.0.1"), "--redact {what} leaks the host");
    }
}
