//! What the reconciler's tests (`reconcile.rs`, and `tls.rs`) share: the
//! CRD, daemons and inputs, polling with a bound, the Sentinel port, the
//! comparison with `render()`, the install's RBAC, and a pod's DNS name and
//! valkey-server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde_json::{Value, json};
use valkyrie::daemon::Daemon;
use valkyrie::kube::crd::ValkeyCluster;
use valkyrie::kube::input::{Input, KubeSettings};
use valkyrie_protocol::Frame;

use crate::support::{TempDir, daemon_config, try_call};

// ---------------------------------------------------------------------------
// Helpers

pub use crate::support::kube::install_crd;

/// Polls `f` every 25 ms until it gives `Some`; fails after `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    crate::support::eventually(what, limit, Duration::from_millis(25), f).await
}

/// A daemon with a Sentinel port and no groups of its own.
pub async fn daemon(tmp: &TempDir) -> Daemon {
    // Quiet unless VALKYRIE_LOG asks (e.g. valkyrie::kube=debug).
    valkyrie::telemetry::init_logging("warning", false);
    Daemon::start(daemon_config(&tmp.0, Vec::new()))
        .await
        .unwrap()
}

/// An input watching `ns`, its Lease in `lease_ns`, named `pod`.
pub async fn input(d: &Daemon, client: Client, ns: &str, lease_ns: &str, pod: &str) -> Input {
    let mut settings = KubeSettings::new(lease_ns, pod);
    settings.namespace = Some(ns.to_owned());
    settings.groups.quorum = 1;
    Input::start(d.handle.clone(), client, settings)
        .await
        .unwrap()
}

/// Waits until one of `a` and `b` leads, never both: whether `a` does.
pub async fn a_leads(a: &Input, b: &Input) -> bool {
    eventually("a leader", Duration::from_secs(20), || async {
        let (la, lb) = (
            a.leadership().borrow().is_leading(),
            b.leadership().borrow().is_leading(),
        );
        assert!(!(la && lb), "two leaders");
        (la != lb).then_some(la)
    })
    .await
}

pub fn cr(name: &str, replicas: i32) -> ValkeyCluster {
    serde_json::from_value(json!({
        "apiVersion": "valkyrie.io/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": { "name": name },
        "spec": { "image": "valkey/valkey:8.1", "replicas": replicas },
    }))
    .unwrap()
}

/// `SENTINEL MASTERS` as one map per master.
pub async fn masters(port: u16) -> Vec<BTreeMap<String, String>> {
    let reply = tokio::task::spawn_blocking(move || try_call(port, &["SENTINEL", "MASTERS"]))
        .await
        .unwrap()
        .unwrap();
    let Frame::Array(items) = reply else {
        panic!("SENTINEL MASTERS: {reply:?}")
    };
    let text = |f: &Frame| String::from_utf8_lossy(f.as_bytes().unwrap()).into_owned();
    items
        .iter()
        .map(|m| match m {
            Frame::Array(kv) => kv.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect(),
            Frame::Map(kv) => kv.iter().map(|(k, v)| (text(k), text(v))).collect(),
            other => panic!("a master: {other:?}"),
        })
        .collect()
}

pub async fn master_named(port: u16, name: &str) -> Option<BTreeMap<String, String>> {
    masters(port).await.into_iter().find(|m| m["name"] == name)
}

pub async fn sentinel(port: u16, args: &[&str]) -> Frame {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        try_call(port, &args)
    })
    .await
    .unwrap()
    .unwrap()
}

/// Numbers as f64, so that `15` and `15.0` compare equal.
pub fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Where `want` is not contained in `got` (every field of `want` present
/// and equal; fields only in `got` are the server's defaults).
pub fn not_contained(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => not_contained(wv, gv, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k}: missing (want {wv})")),
                }
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                not_contained(wv, gv, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(_), Value::Number(_)) if number(want) == number(got) => {}
        _ if want == got => {}
        _ => out.push(format!("{path}: want {want}, got {got}")),
    }
}

pub fn assert_contains<T: Serialize>(what: &str, want: &T, got: &T) {
    let (want, got) = (
        serde_json::to_value(want).unwrap(),
        serde_json::to_value(got).unwrap(),
    );
    let mut diffs = Vec::new();
    not_contained(&want, &got, "", &mut diffs);
    assert!(
        diffs.is_empty(),
        "{what} differs from render():\n{}",
        diffs.join("\n")
    );
}

/// Every child of `name`, once all exist.
pub struct Children {
    pub stateful_set: StatefulSet,
    pub headless: Service,
    pub master: Service,
    pub replicas: Service,
    pub config_map: ConfigMap,
    pub secret: Secret,
    pub pdb: PodDisruptionBudget,
}

pub async fn children(client: &Client, ns: &str, name: &str) -> Option<Children> {
    let api = |c: &Client| c.clone();
    let sts: Api<StatefulSet> = Api::namespaced(api(client), ns);
    let svc: Api<Service> = Api::namespaced(api(client), ns);
    let cms: Api<ConfigMap> = Api::namespaced(api(client), ns);
    let secrets: Api<Secret> = Api::namespaced(api(client), ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(api(client), ns);
    Some(Children {
        stateful_set: sts.get_opt(name).await.unwrap()?,
        headless: svc.get_opt(&format!("{name}-headless")).await.unwrap()?,
        master: svc.get_opt(&format!("{name}-master")).await.unwrap()?,
        replicas: svc.get_opt(&format!("{name}-replicas")).await.unwrap()?,
        config_map: cms.get_opt(&format!("{name}-config")).await.unwrap()?,
        secret: secrets.get_opt(&format!("{name}-auth")).await.unwrap()?,
        pdb: pdbs.get_opt(name).await.unwrap()?,
    })
}

/// Waits until the status describes the CR's current generation: the
/// top-level observedGeneration and every condition's.
pub async fn status_of_generation(api: &Api<ValkeyCluster>, name: &str) -> ValkeyCluster {
    eventually(
        "status of the current generation",
        Duration::from_secs(20),
        || async {
            let vc = api.get(name).await.unwrap();
            let generation = vc.metadata.generation;
            let status = vc.status.as_ref()?;
            // Ready and Valid, and Updating once the roll has a plan.
            let current = status.observed_generation == generation
                && status.conditions.len() >= 2
                && status
                    .conditions
                    .iter()
                    .all(|c| c.observed_generation == generation);
            current.then_some(vc)
        },
    )
    .await
}

/// The events of `ns` about CR `name`: (reason, reporting instance).
pub async fn events(client: &Client, ns: &str, name: &str) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.reporting_instance.unwrap_or_default(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Under the service account, with the install's RBAC

/// The namespace of the install (where the Lease Role is).
pub const HOME: &str = "valkyrie";

/// The documents of a file under `deploy/`, as JSON (PyYAML).
pub fn documents(rel: &str) -> Vec<Value> {
    let py = std::env::var_os("VALKYRIE_PYTHON").expect(
        "VALKYRIE_PYTHON is not set: this test reads deploy/15-rbac.yaml with PyYAML. \
         Run scripts/test, or `source scripts/deps.sh && valkyrie_deps`",
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(rel);
    let script = "import json, sys, yaml\n\
                  with open(sys.argv[1]) as f:\n\
                  \x20   docs = [d for d in yaml.safe_load_all(f) if d is not None]\n\
                  json.dump(docs, sys.stdout)\n";
    let out = std::process::Command::new(py)
        .args(["-c", script])
        .arg(&path)
        .output()
        .expect("run VALKYRIE_PYTHON");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Applies the install's namespace and RBAC as an administrator.
pub async fn install_rbac(admin: &Client) {
    let pp = PatchParams::apply("valkyrie-install").force();
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({ "metadata": { "name": HOME } })).unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
        .patch(HOME, &pp, &Patch::Apply(&ns))
        .await
        .unwrap();
    for doc in documents("15-rbac.yaml") {
        let cluster_wide = doc["kind"]
            .as_str()
            .is_some_and(|k| k.starts_with("Cluster"));
        crate::support::kube::apply_manifest(admin, &doc, (!cluster_wide).then_some(HOME)).await;
    }
}

// ---------------------------------------------------------------------------
// Role labels repaired from the converged topology

/// A loopback address of this test's own, far from the 127.0.0.1 the other
/// tests use (and from kube_failover's 127.0.77.x).
pub const POD_IP: &str = "127.0.78.1";

/// The pod's valkey-server, killed on drop.
pub struct PodServer(pub std::process::Child);

impl Drop for PodServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Pod `name`'s role label and config-epoch annotation.
pub async fn role(pods: &Api<Pod>, name: &str) -> (String, String) {
    let p = pods.get(name).await.unwrap();
    let label = p
        .metadata
        .labels
        .unwrap_or_default()
        .get("valkyrie.io/role")
        .cloned();
    let epoch = p
        .metadata
        .annotations
        .unwrap_or_default()
        .get("valkyrie.io/config-epoch")
        .cloned();
    (label.unwrap_or_default(), epoch.unwrap_or_default())
}
