//! `diagnose --from PATH`: the same diagnosis from saved
//! objects, without a cluster. Read-only by construction: nothing here
//! holds a client.
//!
//! PATH is a directory holding `kubectl get … -o yaml|json` output, a
//! `cilium sysdump` `.zip`, or a `.tar.gz`/`.tgz` of either (unpacked into a
//! temporary directory: objects and metrics only). Each file is read by what it holds (a `List`
//! or single objects, YAML with several documents or JSON); a file without
//! `kind` on its items is named by cilium-cli's sysdump file names
//! (`vendor/github.com/cilium/cilium/cilium-cli/sysdump/constants.go`:
//! `ciliumidentities-<ts>.yaml`, `ciliumendpoints-<ts>.yaml`,
//! `ciliumendpointslices-<ts>.yaml`, `cilium-configmap-<ts>.yaml`,
//! `cilium-operator-deployment-<ts>.yaml`, `cilium-daemonset-<ts>.yaml`,
//! `k8s-pods-<ts>.yaml`, `ciliumnetworkpolicies-<ts>.yaml`,
//! `ciliumclusterwidenetworkpolicies-<ts>.yaml`,
//! `k8s-networkpolicies-<ts>.yaml`, `metrics-<pod>-<container>-<ts>.txt`,
//! with `<ts>` the capture time as `20060102-150405`).
//!
//! "Now" is the capture time from the files, never this machine's clock:
//! a sysdump's `<ts>` (read as UTC: cilium-cli writes the collecting
//! machine's local time and says nothing of its zone), else the newest
//! time any saved object carries (a managedFields entry, a creation, a
//! mark): a lower bound on the capture time.
//!
//! A file that cannot be read or parsed is named in a warning and the rest
//! of the diagnosis goes on.

use std::collections::{BTreeMap, HashSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::Value;

use super::input::{self, Input, Policies};
use super::policies;
use super::sysdump_ts::sysdump_time;
use crate::error::DiagnoseError;
use cilium_gc_cluster::discovery::Crds;
use cilium_gc_cluster::model::HEARTBEAT_ANNOTATION;
use cilium_gc_documents::diagnosis::{self as types, CaptureTimeFrom, SavedSource};

/// Files larger than this are not read (a whole sysdump's logs are not
/// needed; a CiliumIdentity list of 65k identities is tens of MB).
const MAX_FILE: u64 = 1 << 30;

/// What was found in the files.
#[derive(Default)]
struct Found {
    identities: Vec<Value>,
    endpoints: Vec<Value>,
    slices: Vec<Value>,
    config: Option<BTreeMap<String, String>>,
    operator: Option<Value>,
    daemonset: Option<Value>,
    pods: Vec<Value>,
    metrics: Vec<(String, String)>,
    policies: Vec<(types::PolicyKind, Value)>,
    saw_policies: bool,
    /// The kinds a file was saved of, even with no items: cilium-cli writes
    /// an empty list when the CRD is served and no file when it is not.
    saved_kinds: HashSet<&'static str>,
    sysdump_time: Option<Timestamp>,
    warnings: Vec<String>,
    /// Refusals in the container logs read, by pod (`agent_logs`).
    logs: BTreeMap<String, super::agent_logs::Tally>,
    logs_read: u64,
}

/// Every regular file under `dir`, sorted.
fn files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            files(&p, out)?;
        } else if p.is_file() {
            out.push(p);
        }
    }
    Ok(())
}

/// Whether an archive member is worth unpacking: objects, metrics and the
/// containers' logs (`logs-*.log`, for the agents' refusals); not the
/// bugtool archives and profiles a sysdump also holds.
fn wanted(name: &str) -> bool {
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    [".yaml", ".yml", ".json", ".txt", ".prom"]
        .iter()
        .any(|e| name.ends_with(e))
        || super::agent_logs::log_pod(file).is_some()
}

/// Unpack a `.zip` (a sysdump) or a `.tar.gz`/`.tgz` into a temporary
/// directory: only the members [`wanted`] keeps, none larger than
/// [`MAX_FILE`], none outside the directory (the archive's own paths are
/// checked by `enclosed_name` and `unpack_in`).
fn unpack(path: &Path) -> Result<tempfile::TempDir, String> {
    let name = path.to_string_lossy().to_ascii_lowercase();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    if name.ends_with(".zip") {
        let mut zip = zip::ZipArchive::new(file).map_err(|e| format!("not a readable zip: {e}"))?;
        for i in 0..zip.len() {
            let mut entry = zip
                .by_index(i)
                .map_err(|e| format!("zip member {i}: {e}"))?;
            let Some(rel) = entry.enclosed_name() else {
                continue;
            };
            if !entry.is_file() || entry.size() > MAX_FILE || !wanted(&rel.to_string_lossy()) {
                continue;
            }
            let to = dir.path().join(&rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            let mut out = std::fs::File::create(&to).map_err(|e| e.to_string())?;
            std::io::copy(&mut (&mut entry).take(MAX_FILE), &mut out)
                .map_err(|e| format!("zip member {}: {e}", rel.display()))?;
        }
    } else if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        for entry in tar
            .entries()
            .map_err(|e| format!("not a readable .tar.gz: {e}"))?
        {
            let mut entry = entry.map_err(|e| format!("not a readable .tar.gz: {e}"))?;
            let rel = entry
                .path()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !entry.header().entry_type().is_file() || entry.size() > MAX_FILE || !wanted(&rel) {
                continue;
            }
            entry
                .unpack_in(dir.path())
                .map_err(|e| format!("tar member {rel}: {e}"))?;
        }
    } else {
        return Err("neither a directory nor a .zip, .tar.gz or .tgz".into());
    }
    Ok(dir)
}

/// The kind a sysdump file name says its items are, when they carry none.
fn kind_by_name(name: &str) -> Option<&'static str> {
    const NAMES: [(&str, &str); 10] = [
        ("ciliumidentities-", "CiliumIdentity"),
        ("ciliumendpoints-", "CiliumEndpoint"),
        ("ciliumendpointslices-", "CiliumEndpointSlice"),
        ("cilium-configmap-", "ConfigMap"),
        ("cilium-operator-deployment-", "Deployment"),
        ("cilium-daemonset-", "DaemonSet"),
        ("k8s-pods-", "Pod"),
        ("ciliumnetworkpolicies-", "CiliumNetworkPolicy"),
        (
            "ciliumclusterwidenetworkpolicies-",
            "CiliumClusterwideNetworkPolicy",
        ),
        ("k8s-networkpolicies-", "NetworkPolicy"),
    ];
    NAMES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, k)| *k)
}

/// The kinds whose saved files say what was served, by their own name.
fn known_kind(kind: &str) -> Option<&'static str> {
    ["CiliumIdentity", "CiliumEndpoint", "CiliumEndpointSlice"]
        .into_iter()
        .find(|k| *k == kind)
}

/// Whether a file is Prometheus exposition text (its first line a `# HELP`
/// or `# TYPE` comment), whatever its name says.
fn is_exposition(text: &str) -> bool {
    let first = text.trim_start().lines().next().unwrap_or_default();
    first.starts_with("# HELP ") || first.starts_with("# TYPE ")
}

/// The documents of a YAML or JSON file.
fn documents(text: &str) -> Result<Vec<Value>, String> {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text)
            .map(|v| vec![v])
            .map_err(|e| e.to_string());
    }
    serde_saphyr::from_str_multiple::<Value, Vec<Value>>(text).map_err(|e| e.to_string())
}

impl Found {
    /// Whether a file of this kind was saved (an empty list counts: it
    /// says the kind was served and had no objects).
    fn saved(&self, kind: &str) -> bool {
        self.saved_kinds.contains(kind)
    }

    /// Read one file; a problem is a warning naming it.
    fn read(&mut self, path: &Path, shown: &str) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(t) = sysdump_time(&name) {
            self.sysdump_time = self.sysdump_time.max(Some(t));
        }
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if size > MAX_FILE {
            return;
        }
        if let Some(pod) = super::agent_logs::log_pod(&name) {
            self.read_log(path, shown, pod);
            return;
        }
        let is_metrics = name.ends_with(".txt") || name.ends_with(".prom");
        let is_object = [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e));
        if !is_metrics && !is_object {
            return;
        }
        let text = match std::fs::read(path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => {
                self.warnings.push(format!("{shown}: cannot read: {e}"));
                return;
            }
        };
        // cilium-cli saves the kube-apiserver's `/metrics` text as
        // `k8s-metrics-<ts>.yaml`: exposition text is read as such, whatever
        // the file is named.
        if is_metrics || is_exposition(&text) {
            if text.contains("cilium_operator_") {
                self.metrics.push((name, text));
            }
            return;
        }
        match documents(&text) {
            Ok(docs) => {
                if let Some(kind) = kind_by_name(&name) {
                    self.saved_kinds.insert(kind);
                }
                for d in docs {
                    self.object(d, kind_by_name(&name));
                }
            }
            // The YAML parser's message draws the offending line below its
            // first; a warning stays one line.
            Err(e) => self.warnings.push(format!(
                "{shown}: not YAML or JSON objects ({}): skipped, the diagnosis goes on without it",
                e.to_string().lines().next().unwrap_or_default()
            )),
        }
    }

    /// Count the allocator's refusals in one container log, line by line.
    fn read_log(&mut self, path: &Path, shown: &str, pod: String) {
        let mut tally = super::agent_logs::Tally::default();
        let read = std::fs::File::open(path).and_then(|f| tally.read(std::io::BufReader::new(f)));
        if let Err(e) = read {
            self.warnings.push(format!("{shown}: cannot read: {e}"));
            return;
        }
        self.logs_read += 1;
        self.logs.entry(pod).or_default().merge(tally);
    }

    /// File one object (or each item of a list) by its kind.
    fn object(&mut self, v: Value, by_name: Option<&'static str>) {
        if let Some(items) = v.get("items").and_then(Value::as_array) {
            let list_of = v["kind"].as_str().and_then(|k| k.strip_suffix("List"));
            if let Some(kind) = list_of.and_then(known_kind) {
                self.saved_kinds.insert(kind);
            }
            for i in items.clone() {
                self.object(i, by_name);
            }
            return;
        }
        let kind = v["kind"].as_str().map(str::to_owned);
        let kind = kind.as_deref().or(by_name).unwrap_or_default();
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(k) = known_kind(kind) {
            self.saved_kinds.insert(k);
        }
        match kind {
            "CiliumIdentity" => self.identities.push(v),
            "CiliumEndpoint" => self.endpoints.push(v),
            "CiliumEndpointSlice" => self.slices.push(v),
            "ConfigMap" if name == "cilium-config" => {
                self.config = serde_json::from_value(v["data"].clone()).ok();
            }
            "Deployment" if name == "cilium-operator" => self.operator = Some(v),
            // cilium-cli picks the agents' DaemonSet by its label
            // (`k8s-app=cilium`), whatever its name.
            "DaemonSet" if name == "cilium" || by_name == Some("DaemonSet") => {
                self.daemonset = Some(v);
            }
            "Pod" if v["metadata"]["labels"]["io.cilium/app"] == "operator" => self.pods.push(v),
            k => {
                if let Some(kind) = policies::kind_of(k) {
                    self.saw_policies = true;
                    self.policies.push((kind, v));
                }
            }
        }
    }
}

/// The newest time the saved objects carry: a lower bound on the capture.
fn newest_time(f: &Found) -> Option<Timestamp> {
    let mut newest: Option<Timestamp> = None;
    let mut see = |v: &Value| {
        if let Some(t) = v.as_str().and_then(|s| s.parse::<Timestamp>().ok()) {
            newest = newest.max(Some(t));
        }
    };
    for o in f.identities.iter().chain(&f.endpoints).chain(&f.slices) {
        let m = &o["metadata"];
        see(&m["creationTimestamp"]);
        see(&m["annotations"][HEARTBEAT_ANNOTATION]);
        for e in m["managedFields"].as_array().into_iter().flatten() {
            see(&e["time"]);
        }
    }
    newest
}

/// Diagnose the saved objects under `path`.
pub(crate) fn collect(
    path: &Path,
    labels: Option<&str>,
) -> Result<(Input, Timestamp, SavedSource), DiagnoseError> {
    let flag = |e: String| DiagnoseError::Saved(format!("{}: {e}", path.display()));
    // An archive is unpacked into a directory of our own that dies with it.
    let unpacked = if path.is_dir() {
        None
    } else {
        Some(unpack(path).map_err(flag)?)
    };
    let root = unpacked.as_ref().map_or(path, |d| d.path());
    let mut paths = Vec::new();
    files(root, &mut paths).map_err(|e| flag(e.to_string()))?;
    paths.sort();
    let mut f = Found::default();
    for p in &paths {
        let shown = p.strip_prefix(root).unwrap_or(p).display().to_string();
        f.read(p, &shown);
    }
    let (now, from) = match (f.sysdump_time, newest_time(&f)) {
        (Some(t), newest) => (t.max(newest.unwrap_or(t)), CaptureTimeFrom::SysdumpFileName),
        (None, Some(t)) => (t, CaptureTimeFrom::NewestObject),
        (None, None) => {
            // Name what was skipped: a malformed identities file is the
            // likeliest reason there is nothing to judge.
            let skipped = if f.warnings.is_empty() {
                String::new()
            } else {
                format!(" ({})", f.warnings.join("; "))
            };
            return Err(DiagnoseError::Saved(format!(
                "{}: no CiliumIdentity objects with times and no sysdump file names: nothing to judge ages by{skipped}",
                path.display()
            )));
        }
    };
    let input = build(&mut f, now, labels);
    let mut missing = Vec::new();
    if !input.identities.is_empty() && input.writes.values().all(Vec::is_empty) {
        missing.push(
            "the identities' managedFields (`kubectl get --show-managed-fields`): who writes is unknown"
                .to_string(),
        );
    }
    for (what, absent) in [
        ("ciliumidentities", !f.saved("CiliumIdentity")),
        ("ciliumendpoints", !f.saved("CiliumEndpoint")),
        ("ciliumendpointslices", !f.saved("CiliumEndpointSlice")),
        ("the cilium-config ConfigMap", f.config.is_none()),
        ("the cilium-operator Deployment", f.operator.is_none()),
        ("the cilium DaemonSet", f.daemonset.is_none()),
        ("cilium-operator Pods", f.pods.is_empty()),
        ("cilium-operator metrics", f.metrics.is_empty()),
        (
            "cilium-agent logs (`logs-<pod>-cilium-agent-<ts>.log`): the allocator's refusals are unknown",
            f.logs_read == 0,
        ),
        ("network policies", labels.is_some() && !f.saw_policies),
    ] {
        if absent {
            missing.push(what.to_string());
        }
    }
    let source = SavedSource {
        path: path.display().to_string(),
        captured_at: now,
        captured_at_from: from,
        files_read: paths.len() as u64,
        missing,
    };
    Ok((input, now, source))
}

/// The [`Input`] of what was found, as `collect` in `mod.rs` builds it live.
fn build(f: &mut Found, now: Timestamp, labels: Option<&str>) -> Input {
    let mut identities = Vec::new();
    let mut writes = BTreeMap::new();
    let mut malformed = Vec::new();
    let mut seen = HashSet::new();
    for v in std::mem::take(&mut f.identities) {
        let raw = serde_json::value::to_raw_value(&v).expect("a Value serialises");
        match crate::decode::decode_record(&raw) {
            Ok(r) => {
                if seen.insert(r.identity.name.clone()) {
                    writes.insert(r.identity.name.clone(), crate::decode::decode_writes(&raw));
                    identities.push(r);
                }
            }
            Err(bad) => malformed.push(format!(
                "ciliumidentity {}: {}",
                bad.name.unwrap_or_else(|| "<no name>".into()),
                bad.problem
            )),
        }
    }
    let mut refs: BTreeMap<u64, u32> = BTreeMap::new();
    for v in f.endpoints.iter().chain(&f.slices) {
        if let Ok(u) = serde_json::from_value::<cilium_gc_cluster::usage::UsageObject>(v.clone()) {
            for id in u.ids() {
                *refs.entry(*id).or_default() += 1;
            }
        }
    }
    let workloads = workloads(f, now);
    Input {
        identities,
        malformed,
        refs,
        endpoints: f.endpoints.len() as u64,
        endpoint_slices: f.slices.len() as u64,
        // What was saved is what was served: without a file of a kind the
        // diagnosis cannot tell "not served" from "not saved", and says so.
        crds: Crds {
            identities: true,
            endpoints: f.saved("CiliumEndpoint") || !f.saved("CiliumEndpointSlice"),
            slices: f.saved("CiliumEndpointSlice"),
            slices_v2: false,
        },
        config: f.config.clone(),
        warnings: std::mem::take(&mut f.warnings),
        server: None,
        context: None,
        redacted: false,
        workloads: Some(workloads),
        writes,
        proposed_labels: labels.map(str::to_owned),
        policies: labels.map(|_| Policies {
            items: f
                .policies
                .iter()
                .map(|(k, v)| policies::selectors(*k, v))
                .collect(),
            problems: Vec::new(),
        }),
        allocation_refusals: (f.logs_read > 0)
            .then(|| super::agent_logs::summarize(std::mem::take(&mut f.logs), f.logs_read)),
        // Saved objects cannot be watched: the pace comes from creation times.
        sample: None,
    }
}

/// The workloads as the live read makes them, from the saved objects;
/// metrics files are the operator's `/metrics`, read at the capture time.
fn workloads(f: &Found, now: Timestamp) -> input::Workloads {
    let images = |v: &Value| -> Vec<String> {
        v["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["image"].as_str().map(str::to_owned))
            .collect()
    };
    let pods = serde_json::json!({ "items": f.pods });
    let mut w = input::Workloads {
        operator_images: f.operator.as_ref().map(images).unwrap_or_default(),
        agent_images: f.daemonset.as_ref().map(images).unwrap_or_default(),
        operator_pods: crate::workloads::operator_pods(&pods),
        gc_interval_arg: crate::workloads::operator_arg(&pods, "--identity-gc-interval")
            .and_then(|v| cilium_gc_cluster::connect::parse_duration(&v).ok()),
        ..Default::default()
    };
    w.metrics = f
        .metrics
        .iter()
        .map(|(name, text)| {
            let samples = super::operator_metrics::parse_exposition(text);
            types::OperatorMetricsRead {
                pod: name.clone(),
                port: 0,
                first: Some(super::operator_metrics::counters(&samples, now)),
                ..Default::default()
            }
        })
        .collect();
    if f.operator.is_none() && f.daemonset.is_none() {
        w.problem = Some(
            "no cilium-operator Deployment or cilium DaemonSet among the saved objects: the operator version, known-defect and restart findings are skipped".into(),
        );
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysdump_names_carry_the_capture_time() {
        assert_eq!(
            sysdump_time("ciliumidentities-20260601-120000.yaml"),
            Some("2026-06-01T12:00:00Z".parse().unwrap())
        );
        assert_eq!(
            sysdump_time("metrics-cilium-operator-5d-x-cilium-operator-20260601-120001.txt"),
            Some("2026-06-01T12:00:01Z".parse().unwrap())
        );
        assert_eq!(sysdump_time("identities.yaml"), None);
        assert_eq!(
            kind_by_name("cilium-configmap-20260601-120000.yaml"),
            Some("ConfigMap")
        );
    }

    /// What the real cilium-cli writes (docs/diagnose.md, "A real
    /// cilium-cli archive"): an empty list for a served CRD, the API
    /// server's metrics text as `k8s-metrics-<ts>.yaml`, the agents'
    /// DaemonSet as a list without kinds, found by label not name.
    #[test]
    fn real_sysdump_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let ts = "20260601-120000";
        for (name, text) in [
            ("ciliumidentities", IDENTITY),
            (
                "ciliumendpointslices",
                "apiVersion: cilium.io/v2alpha1\nitems: []\nkind: CiliumEndpointSliceList\nmetadata:\n  resourceVersion: \"5\"\n",
            ),
            (
                "k8s-metrics",
                "# HELP a_total A.\n# TYPE a_total counter\na_total{name=\"v1.\"} 0\n",
            ),
            (
                "cilium-daemonset",
                "apiVersion: apps/v1\nitems:\n- metadata: {name: cilium-agent, labels: {k8s-app: cilium}}\n  spec: {template: {spec: {containers: [{name: cilium-agent, image: \"quay.io/cilium/cilium:v1.19.3\"}]}}}\nkind: DaemonSetList\n",
            ),
        ] {
            std::fs::write(dir.path().join(format!("{name}-{ts}.yaml")), text).unwrap();
        }
        let (input, _, source) = collect(dir.path(), None).unwrap();
        assert!(input.warnings.is_empty(), "{:?}", input.warnings);
        assert!(input.crds.slices && !input.crds.endpoints);
        assert_eq!(
            input.workloads.unwrap().agent_images,
            ["quay.io/cilium/cilium:v1.19.3"]
        );
        for saved in [
            "ciliumidentities",
            "ciliumendpointslices",
            "the cilium DaemonSet",
        ] {
            assert!(
                !source.missing.iter().any(|m| m == saved),
                "{saved}: {:?}",
                source.missing
            );
        }
        assert!(source.missing.iter().any(|m| m == "ciliumendpoints"));
    }

    const IDENTITY: &str = "items:\n- metadata: {name: \"1000\", uid: u, resourceVersion: \"1\", creationTimestamp: \"2026-06-01T10:00:00Z\"}\n  security-labels: {\"k8s:app\": web}\n";

    /// The same files as a directory, a sysdump `.zip` and a `.tar.gz`
    /// give the same input and capture time; a bugtool archive in it is
    /// not unpacked; anything else is refused.
    #[test]
    fn archives_read_as_their_directory() {
        use std::io::Write as _;
        let name = "cilium-sysdump-20260601-120000/ciliumidentities-20260601-120000.yaml";
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, IDENTITY).unwrap();

        let zip_path = dir.path().join("sysdump.zip");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file(name, stored).unwrap();
        z.write_all(IDENTITY.as_bytes()).unwrap();
        z.start_file(
            "cilium-sysdump-20260601-120000/cilium-bugtool-cilium-x-20260601-120000.tar",
            stored,
        )
        .unwrap();
        z.write_all(b"a log").unwrap();
        z.finish().unwrap();

        let tgz_path = dir.path().join("saved.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&tgz_path).unwrap(),
            flate2::Compression::fast(),
        );
        let mut t = tar::Builder::new(gz);
        t.append_path_with_name(&file, name).unwrap();
        t.into_inner().unwrap().finish().unwrap();

        let plain = collect(&dir.path().join("cilium-sysdump-20260601-120000"), None).unwrap();
        for archive in [&zip_path, &tgz_path] {
            let (input, now, source) = collect(archive, None).unwrap();
            assert_eq!(
                input.identities,
                plain.0.identities,
                "{}",
                archive.display()
            );
            assert_eq!(now, plain.1);
            assert_eq!(source.captured_at_from, CaptureTimeFrom::SysdumpFileName);
            assert_eq!(
                source.files_read,
                1,
                "only the identities: {}",
                archive.display()
            );
        }
        let other = dir.path().join("notes.rar");
        std::fs::write(&other, "x").unwrap();
        assert!(collect(&other, None).is_err());
    }

    /// An agent's log and its previous run's count for one pod; another
    /// container's log without refusals is read and names no pod; without
    /// any log the diagnosis says the refusals are unknown.
    #[test]
    fn agent_logs_give_the_refusals_per_pod() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ciliumidentities-20260601-120000.yaml"),
            IDENTITY,
        )
        .unwrap();
        let (input, _, source) = collect(dir.path(), None).unwrap();
        assert_eq!(input.allocation_refusals, None);
        assert!(source
            .missing
            .iter()
            .any(|m| m.contains("cilium-agent logs")));
        let line = r#"time="2026-06-01T11:59:00Z" level=warning msg="Key allocation attempt failed" attempt=0 error="no more available IDs in configured space" key="k8s:app=web;" subsys=allocator"#;
        let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "logs-cilium-abcde-cilium-agent-20260601-120000.log",
            format!("level=info msg=start\n{line}\n{line}\n"),
        );
        write(
            "logs-cilium-abcde-cilium-agent-20260601-120000-prev.log",
            format!("{line}\n"),
        );
        write(
            "logs-cilium-operator-x-cilium-operator-20260601-120000.log",
            "level=info msg=\"Starting GC\"\n".into(),
        );
        let (input, _, source) = collect(dir.path(), None).unwrap();
        let r = input.allocation_refusals.expect("logs read");
        assert_eq!((r.logs_read, r.total), (3, 3));
        assert_eq!(r.by_pod.len(), 1);
        assert_eq!(r.by_pod[0].pod, "cilium-abcde");
        assert_eq!(r.by_pod[0].refusals, 3);
        assert_eq!(r.by_pod[0].example, line);
        assert!(!source
            .missing
            .iter()
            .any(|m| m.contains("cilium-agent logs")));
    }
}
