//! Advice that matches the run (issue 26): the next steps follow from every
//! refusal of the run, one test per refusal kind, through the binary. The
//! JSON report's `nextSteps`, the text report's `Next:` lines and the
//! Markdown report's "Next steps" say the same, and no step suggests a
//! command the same checks would refuse.

use cilium_gc_sim::{default_cilium_config, Kind};
use serde_json::{json, Value};

use crate::support::world::{Binary, World};
use crate::support::{calm, schema};

/// The step a scan gives when nothing stops a delete.
const RUN_DELETE: &str = "run `kubectl cilium-gc delete` to remove them";

/// What one run advised, in each output format.
struct Advice {
    exit: i32,
    json: Vec<String>,
    text: Vec<String>,
    markdown: Vec<String>,
}

impl Advice {
    /// Whether some step (in every format) contains all of `needles`.
    fn says(&self, needles: &[&str]) {
        for (format, steps) in [
            ("json", &self.json),
            ("text", &self.text),
            ("markdown", &self.markdown),
        ] {
            assert!(
                steps.iter().any(|s| needles.iter().all(|n| s.contains(n))),
                "{format}: no step says {needles:?}: {steps:#?}"
            );
        }
    }

    /// No step (in any format) contains `needle`.
    fn never(&self, needle: &str) {
        for steps in [&self.json, &self.text, &self.markdown] {
            assert!(
                steps.iter().all(|s| !s.contains(needle)),
                "a step says {needle:?}: {steps:#?}"
            );
        }
    }
}

/// Runs `args` three times (`-o json`, text, `-o markdown`) and collects the
/// steps; the JSON report must validate against the published schema, and
/// every format must give the same steps.
async fn advice(w: &World, args: &[&str]) -> Advice {
    let run = |format: &'static str| {
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["-o", format]);
        async move { w.bin(&a).await }
    };
    let out = run("json").await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let errors = schema::errors(&schema::committed(), &report);
    assert!(errors.is_empty(), "report invalid: {errors:?}");
    let json: Vec<String> = report["nextSteps"]
        .as_array()
        .expect("nextSteps")
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    let text_out = run("text").await;
    // An early refusal prints its error and steps on stderr (stdout stays
    // empty); a run that got further ends its report with them.
    let text_all = format!(
        "{}{}",
        String::from_utf8_lossy(&text_out.stdout),
        String::from_utf8_lossy(&text_out.stderr)
    );
    let text: Vec<String> = text_all
        .lines()
        .filter_map(|l| l.strip_prefix("Next: ").map(str::to_owned))
        .collect();
    let md_out = run("markdown").await;
    let md = String::from_utf8_lossy(&md_out.stdout).into_owned();
    let markdown: Vec<String> = md
        .split("## Next steps\n\n")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .map_while(|l| l.strip_prefix("- "))
                .map(|l| {
                    l.replace("\\|", "|")
                        .replace("&lt;", "<")
                        .replace("&gt;", ">")
                        .replace("&amp;", "&")
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(text, json, "text and JSON give the same steps");
    assert_eq!(markdown, json, "Markdown and JSON give the same steps");
    assert!(!json.is_empty(), "a refused run has a next step");
    Advice {
        exit: out.status.code().unwrap(),
        json,
        text,
        markdown,
    }
}

/// The case: identities and no endpoints. The scan says which are
/// stale but not "run delete" (delete refuses); it says check the agents,
/// or `--force`. The refused delete says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_endpoints_advises_checking_the_agents_or_force_never_a_refused_delete() {
    let w = World::start(calm("no-endpoints")).await;
    let a = advice(&w, &["scan"]).await;
    assert_eq!(a.exit, 0);
    a.says(&["Cilium agents run", "k8s-app=cilium", "--force"]);
    a.says(&["stale, but `kubectl cilium-gc delete` refuses"]);
    a.never(RUN_DELETE);
    a.never("--mark");
    let a = advice(&w, &["delete", "--yes"]).await;
    assert_eq!(a.exit, 3);
    a.says(&["Cilium agents run", "--force"]);
    a.never("fix the failed checks listed above");

    // With endpoints the scan advises the delete, as before.
    let w = World::start(calm("small")).await;
    let a = advice(&w, &["scan"]).await;
    a.says(&[RUN_DELETE]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn missing_permissions_advise_the_published_rbac() {
    let w = World::start(calm("forbidden")).await;
    let a = advice(&w, &["delete", "--yes"]).await;
    assert_eq!(a.exit, 3);
    a.says(&[
        "Grant what is missing (delete ciliumidentities.cilium.io",
        "examples/cronjob.yaml",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kvstore_mode_says_there_is_nothing_to_do() {
    let w = World::start(calm("kvstore")).await;
    let a = advice(&w, &["delete", "--yes"]).await;
    assert_eq!(a.exit, 3);
    a.says(&["kvstore", "nothing for kubectl cilium-gc to do"]);
    a.never("--force");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_managed_identities_say_there_is_nothing_to_do() {
    let mut s = calm("small");
    let mut c = default_cilium_config("crd");
    c.insert("identity-management-mode".into(), "operator".into());
    s.cilium_config = Some(c);
    let w = World::start(s).await;
    let a = advice(&w, &["delete", "--yes"]).await;
    assert_eq!(a.exit, 3);
    a.says(&["cilium-operator manages identities", "diagnose"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_cilium_config_advises_the_namespace_or_the_mode() {
    let w = World::start(calm("small")).await;
    let a = advice(&w, &["delete", "--yes", "--cilium-namespace", "nope"]).await;
    assert_eq!(a.exit, 3);
    a.says(&[
        "not readable in nope",
        "--cilium-namespace",
        "--identity-allocation-mode crd",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_identity_crd_advises_checking_the_cluster() {
    let w = World::start(calm("missing-crd")).await;
    let a = advice(&w, &["delete", "--yes"]).await;
    assert_eq!(a.exit, 3);
    a.says(&["CiliumIdentity CRD is not served", "--context"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_endpoint_crds_advise_enabling_them() {
    let w = World::start(calm("no-cep-crd")).await;
    let a = advice(&w, &["delete", "--yes"]).await;
    assert_eq!(a.exit, 3);
    a.says(&["enable the CiliumEndpoint CRD"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_cluster_id_advises_fixing_cilium_config() {
    let mut s = calm("small");
    let mut c = default_cilium_config("crd");
    c.insert("cluster-id".into(), "300".into());
    c.insert("max-connected-clusters".into(), "255".into());
    s.cilium_config = Some(c);
    let w = World::start(s).await;
    let a = advice(&w, &["delete", "--yes"]).await;
    assert_eq!(a.exit, 3);
    a.says(&["Fix cluster-id / max-connected-clusters in cilium-config"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_short_heartbeat_timeout_advises_the_configs() {
    let w = World::start(calm("small")).await;
    let a = advice(&w, &["delete", "--yes", "--heartbeat-timeout", "10m"]).await;
    assert_eq!(a.exit, 3);
    a.says(&["--heartbeat-timeout", "identity-heartbeat-timeout"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreadable_endpoints_advise_fixing_them_or_the_override() {
    let w = World::start(calm("small")).await;
    let cep = json!({"apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
        "metadata": {"name": "id-bool", "namespace": "chaos", "uid": "uid-cep-id-bool",
                     "resourceVersion": "1"},
        "status": {"identity": {"id": true}}});
    w.sim.inject_raw(Kind::Endpoint, "chaos/id-bool", cep);
    let a = advice(&w, &["delete", "--yes"]).await;
    assert_eq!(a.exit, 3);
    a.says(&["Fix the endpoints", "--allow-unreadable-endpoints"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_blast_radius_advises_checking_then_raising_the_limit() {
    let w = World::start(calm("small")).await;
    let a = advice(&w, &["delete", "--yes", "--max-deletions", "1"]).await;
    assert_eq!(a.exit, cilium_gc::Exit::BlastRadius.code() as i32);
    a.says(&["exceed --max-deletions 1", "nothing was deleted"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unconfirmed_delete_advises_yes() {
    let w = World::start(calm("small")).await;
    let a = advice(&w, &["delete"]).await;
    assert_eq!(a.exit, 2);
    a.says(&["rerun with --yes"]);
}
