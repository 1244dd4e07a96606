//! The install's RBAC (`deploy/15-rbac.yaml`) against a real kube-apiserver
//! and etcd (`tests/support/kube.rs`; needs `VALKYRIE_KUBE_BIN`, fails
//! without it).
//!
//! [`CLUSTER`] and [`LEADER`] below are what the controller does, written
//! here independently of the YAML. Then:
//! - the ClusterRole and Role grant exactly those verbs: a missing one, or
//!   one more, fails (least privilege both ways);
//! - applied with the administrator's client (namespace, ServiceAccount,
//!   ClusterRole, ClusterRoleBinding, Role, RoleBinding, from `deploy/`),
//!   each is allowed for the service account (SelfSubjectAccessReview, in
//!   a namespace of its own and, for list and watch, in all namespaces);
//! - requests the controller makes succeed as the service account: the
//!   children by server-side apply, a pod's role label, the Lease, Events,
//!   ValkeyClusters of the CRD in `deploy/05-crd.yaml`;
//! - what it must not do is refused, by review and by real requests (403).
//!
//! The YAML is read with PyYAML, from the Python of `scripts/deps.sh`
//! (`VALKYRIE_PYTHON`; kubernetes-validate depends on it): no YAML crate is
//! in the tree, and a real YAML reader sees the file as kubectl does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchParams,
};
use serde_json::{Value, json};
use tokio::sync::OnceCell;
use tokio::time::{Instant, sleep};

use support::kube::SA_USER;
// Lists across namespaces: on an API server no other module writes to.
use support::kube::isolated::{admin_client, namespace, service_account_client};

/// The verbs on every child kind: server-side apply is `patch` (and
/// `create` for the first apply), `update` where an object is replaced,
/// `delete` for children the spec no longer asks for.
const CHILD: &[&str] = &[
    "get", "list", "watch", "create", "patch", "update", "delete",
];

/// What the reconciler does in every namespace: (API group, resource,
/// verbs). Written from the controller's needs, not from the YAML.
const CLUSTER: &[(&str, &str, &[&str])] = &[
    (
        "valkyrie.io",
        "valkeyclusters",
        &["get", "list", "watch", "patch", "update"],
    ),
    (
        "valkyrie.io",
        "valkeyclusters/status",
        &["get", "patch", "update"],
    ),
    ("valkyrie.io", "valkeyclusters/finalizers", &["update"]),
    ("apps", "statefulsets", CHILD),
    ("", "services", CHILD),
    ("", "configmaps", CHILD),
    ("", "secrets", CHILD),
    ("policy", "poddisruptionbudgets", CHILD),
    ("", "pods", &["get", "list", "watch", "patch", "delete"]),
    ("events.k8s.io", "events", &["create", "patch"]),
    ("", "events", &["create", "patch"]),
];

/// The Lease elector, in Valkyrie's own namespace: (resource name or none,
/// verbs). `create` cannot be limited to a name.
const LEADER: &[(Option<&str>, &[&str])] = &[
    (None, &["create"]),
    (Some("valkyrie-leader"), &["get", "update"]),
];
const LEASE: &str = "valkyrie-leader";
const HOME: &str = "valkyrie";

// ---------------------------------------------------------------------------
// Reading the manifests

/// The documents of a file under `deploy/`, as JSON (PyYAML).
fn documents(rel: &str) -> Vec<Value> {
    let py = std::env::var_os("VALKYRIE_PYTHON").expect(
        "VALKYRIE_PYTHON is not set: this test reads the manifests with PyYAML. \
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
        "reading {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The one document of `kind` in `rel`.
fn document(rel: &str, kind: &str) -> Value {
    let mut found: Vec<Value> = documents(rel)
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} in deploy/{rel}");
    found.remove(0)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// (group, resource, verb, resource name or "") for every rule of a role.
fn grants(role: &Value) -> BTreeSet<(String, String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        let names = match rule.get("resourceNames") {
            Some(n) => strings(n),
            None => vec![String::new()],
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for name in &names {
                        let g = (group.clone(), resource.clone(), verb.clone(), name.clone());
                        assert!(out.insert(g.clone()), "granted twice: {g:?}");
                    }
                }
            }
        }
    }
    out
}

fn needed_cluster() -> BTreeSet<(String, String, String, String)> {
    CLUSTER
        .iter()
        .flat_map(|(g, r, verbs)| {
            verbs
                .iter()
                .map(|v| (g.to_string(), r.to_string(), v.to_string(), String::new()))
        })
        .collect()
}

fn needed_leader() -> BTreeSet<(String, String, String, String)> {
    LEADER
        .iter()
        .flat_map(|(name, verbs)| {
            verbs.iter().map(|v| {
                let n = name.unwrap_or_default().to_string();
                (
                    "coordination.k8s.io".into(),
                    "leases".into(),
                    v.to_string(),
                    n,
                )
            })
        })
        .collect()
}

/// The ServiceAccount every binding names.
fn assert_binds_the_service_account(binding: &Value, kind: &str, role: &str) {
    assert_eq!(binding["roleRef"]["kind"], kind);
    assert_eq!(binding["roleRef"]["name"], role);
    assert_eq!(
        binding["subjects"],
        json!([{ "kind": "ServiceAccount", "name": "valkyrie", "namespace": HOME }])
    );
}

#[test]
fn the_roles_grant_exactly_what_the_controller_needs() {
    let cluster_role = document("15-rbac.yaml", "ClusterRole");
    let role = document("15-rbac.yaml", "Role");
    assert_eq!(role["metadata"]["namespace"], HOME);

    let (granted, needed) = (grants(&cluster_role), needed_cluster());
    let missing: Vec<_> = needed.difference(&granted).collect();
    let extra: Vec<_> = granted.difference(&needed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "ClusterRole valkyrie: missing {missing:?}, not needed {extra:?}"
    );
    let (granted, needed) = (grants(&role), needed_leader());
    let missing: Vec<_> = needed.difference(&granted).collect();
    let extra: Vec<_> = granted.difference(&needed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "Role valkyrie-leader: missing {missing:?}, not needed {extra:?}"
    );
    // No wildcards and no aggregation: the rules are the whole grant.
    for r in [&cluster_role, &role] {
        assert!(r.get("aggregationRule").is_none());
        assert!(!r.to_string().contains("\"*\""), "a wildcard in {r}");
    }

    let account = document("10-serviceaccount.yaml", "ServiceAccount");
    assert_eq!(account["metadata"]["name"], "valkyrie");
    assert_eq!(account["metadata"]["namespace"], HOME);
    assert_eq!(account["automountServiceAccountToken"], true);
    let name = &cluster_role["metadata"]["name"];
    let binding = document("15-rbac.yaml", "ClusterRoleBinding");
    assert_binds_the_service_account(&binding, "ClusterRole", name.as_str().unwrap());
    let binding = document("15-rbac.yaml", "RoleBinding");
    assert_eq!(binding["metadata"]["namespace"], HOME);
    let name = role["metadata"]["name"].as_str().unwrap();
    assert_binds_the_service_account(&binding, "Role", name);
    // The Lease the Role names is the one the elector takes.
    assert_eq!(valkyrie::kube::elector::LEASE_NAME, LEASE);
}

/// The CRD's group and plural are the ones the ClusterRole names (a
/// review answers for any string; only a real request sees a typo).
#[test]
fn the_cluster_role_names_the_crd_s_resource() {
    let crd = document("05-crd.yaml", "CustomResourceDefinition");
    assert_eq!(crd["spec"]["group"], "valkyrie.io");
    assert_eq!(crd["spec"]["names"]["plural"], "valkeyclusters");
    let versions = crd["spec"]["versions"].as_array().unwrap();
    assert!(
        versions
            .iter()
            .all(|v| v["subresources"].get("status").is_some()),
        "every version has the status subresource"
    );
}

// ---------------------------------------------------------------------------
// Against the API server

/// Applies what the controller's identity and rights need from `deploy/`,
/// once per test process, and waits until RBAC answers with it.
async fn install() {
    static DONE: OnceCell<()> = OnceCell::const_new();
    DONE.get_or_init(|| async {
        let admin = admin_client().await;
        for file in [
            "00-namespace.yaml",
            "10-serviceaccount.yaml",
            "15-rbac.yaml",
        ] {
            for doc in documents(file) {
                apply(&admin, &doc).await;
            }
        }
        // RBAC reads its objects through informers: wait for the last one.
        let sa = service_account_client().await;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let lease = access(
                "coordination.k8s.io",
                "leases",
                "get",
                Some(HOME),
                Some(LEASE),
            );
            let configmaps = access("", "configmaps", "create", Some("elsewhere"), None);
            if allowed(&sa, &lease).await && allowed(&sa, &configmaps).await {
                break;
            }
            assert!(Instant::now() < deadline, "RBAC not in effect within 20 s");
            sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}

/// Server-side apply of one manifest, as `kubectl apply --server-side`.
async fn apply(admin: &Client, doc: &Value) {
    support::kube::apply_manifest(admin, doc, None).await;
}

/// A SelfSubjectAccessReview's resource attributes. `resource` may name a
/// subresource (`pods/exec`).
fn access(group: &str, resource: &str, verb: &str, ns: Option<&str>, name: Option<&str>) -> Value {
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    json!({
        "group": group,
        "resource": resource,
        "subresource": subresource,
        "verb": verb,
        "namespace": ns.unwrap_or_default(),
        "name": name.unwrap_or_default(),
    })
}

/// Whether the API server allows `attributes` to `client`'s user.
async fn allowed(client: &Client, attributes: &Value) -> bool {
    let review: SelfSubjectAccessReview =
        serde_json::from_value(json!({ "spec": { "resourceAttributes": attributes } })).unwrap();
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answer.status.unwrap().allowed
}

fn code<T>(r: Result<T, kube::Error>) -> u16 {
    match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(other) => panic!("not an API answer: {other}"),
    }
}

#[tokio::test]
async fn every_needed_verb_is_allowed_to_the_service_account() {
    install().await;
    let sa = service_account_client().await;
    // The reviews below are about this user, not the administrator.
    let me = Api::<SelfSubjectReview>::all(sa.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let username = me.status.unwrap().user_info.unwrap().username.unwrap();
    assert_eq!(username, SA_USER);

    let shop = namespace("shop").await;
    let mut refused = Vec::new();
    for (group, resource, verbs) in CLUSTER {
        for verb in *verbs {
            // In any namespace, and across all of them for the controller's
            // list and watch (Api::all).
            let mut scopes = vec![Some(shop.as_str()), Some("kube-system")];
            if matches!(*verb, "list" | "watch") {
                scopes.push(None);
            }
            for ns in scopes {
                let a = access(group, resource, verb, ns, None);
                if !allowed(&sa, &a).await {
                    refused.push(a);
                }
            }
        }
    }
    for (name, verbs) in LEADER {
        for verb in *verbs {
            let a = access("coordination.k8s.io", "leases", verb, Some(HOME), *name);
            if !allowed(&sa, &a).await {
                refused.push(a);
            }
        }
    }
    assert!(
        refused.is_empty(),
        "refused to the service account: {refused:#?}"
    );
}

#[tokio::test]
async fn the_controller_s_requests_succeed_as_the_service_account() {
    install().await;
    let (admin, sa) = (admin_client().await, service_account_client().await);
    let ns = namespace("shop").await;
    let ssa = PatchParams::apply("valkyrie").force();
    let labels = json!({ "app.kubernetes.io/managed-by": "valkyrie" });

    // A ConfigMap: created by the first apply, applied again, replaced
    // (update), listed across namespaces, deleted.
    let configmaps = Api::<ConfigMap>::namespaced(sa.clone(), &ns);
    let cm = json!({ "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "cache-config", "labels": labels },
        "data": { "master": "cache-0.cache-headless:6379" } });
    configmaps
        .patch("cache-config", &ssa, &Patch::Apply(&cm))
        .await
        .unwrap();
    let mut cm = cm;
    cm["data"]["config-epoch"] = json!("1");
    configmaps
        .patch("cache-config", &ssa, &Patch::Apply(&cm))
        .await
        .unwrap();
    let mut current = configmaps.get("cache-config").await.unwrap();
    current
        .data
        .get_or_insert_default()
        .insert("config-epoch".into(), "2".into());
    configmaps
        .replace("cache-config", &PostParams::default(), &current)
        .await
        .unwrap();
    let all = Api::<ConfigMap>::all(sa.clone())
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=valkyrie"))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1);
    configmaps
        .delete("cache-config", &DeleteParams::default())
        .await
        .unwrap();

    // The generated password Secret: created, read back, listed.
    let secrets = Api::<Secret>::namespaced(sa.clone(), &ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "cache-auth", "labels": labels },
        "stringData": { "password": "not-a-real-one" } }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    secrets.get("cache-auth").await.unwrap();
    Api::<Secret>::all(sa.clone())
        .list(&ListParams::default())
        .await
        .unwrap();

    // The other children, by server-side apply, then deleted.
    let service = json!({ "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "cache-headless", "labels": labels },
        "spec": { "clusterIP": "None", "publishNotReadyAddresses": true,
                  "selector": { "app.kubernetes.io/instance": "cache" },
                  "ports": [{ "name": "valkey", "port": 6379 }] } });
    let services = Api::<Service>::namespaced(sa.clone(), &ns);
    services
        .patch("cache-headless", &ssa, &Patch::Apply(&service))
        .await
        .unwrap();
    let selector = json!({ "matchLabels": { "app.kubernetes.io/instance": "cache" } });
    let statefulset = json!({ "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": { "name": "cache", "labels": labels },
        "spec": { "serviceName": "cache-headless", "replicas": 1, "selector": selector,
                  "template": { "metadata": { "labels": { "app.kubernetes.io/instance": "cache" } },
                                "spec": { "containers": [{ "name": "valkey", "image": "valkey/valkey:8.0" }] } } } });
    let statefulsets = Api::<StatefulSet>::namespaced(sa.clone(), &ns);
    statefulsets
        .patch("cache", &ssa, &Patch::Apply(&statefulset))
        .await
        .unwrap();
    let pdb = json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "cache", "labels": labels },
        "spec": { "maxUnavailable": 1, "selector": selector } });
    let pdbs = Api::<PodDisruptionBudget>::namespaced(sa.clone(), &ns);
    pdbs.patch("cache", &ssa, &Patch::Apply(&pdb))
        .await
        .unwrap();
    let dp = DeleteParams::default();
    pdbs.delete("cache", &dp).await.unwrap();
    statefulsets.delete("cache", &dp).await.unwrap();
    services.delete("cache-headless", &dp).await.unwrap();

    // A Valkey pod (made here by the administrator, as the StatefulSet
    // controller would): its role label and config-epoch annotation move.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "cache-0", "labels": { "app.kubernetes.io/instance": "cache" } },
        "spec": { "containers": [{ "name": "valkey", "image": "valkey/valkey:8.0" }] } }))
    .unwrap();
    Api::<Pod>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let pods = Api::<Pod>::namespaced(sa.clone(), &ns);
    let role = json!({ "metadata": {
        "labels": { "valkyrie.io/role": "master" },
        "annotations": { "valkyrie.io/config-epoch": "3" } } });
    pods.patch("cache-0", &PatchParams::default(), &Patch::Merge(&role))
        .await
        .unwrap();
    let labelled = pods.get("cache-0").await.unwrap();
    assert_eq!(
        labelled.metadata.labels.unwrap()["valkyrie.io/role"],
        "master"
    );
    let watch = Api::<Pod>::all(sa.clone())
        .watch(&WatchParams::default().timeout(1), "0")
        .await;
    assert_eq!(code(watch), 200, "watch pods in all namespaces");

    // Events about a ValkeyCluster, in both APIs, then a repeat (patch).
    let regarding = json!({ "apiVersion": "valkyrie.io/v1alpha1", "kind": "ValkeyCluster",
                            "namespace": ns, "name": "cache" });
    let event: EventV1 = serde_json::from_value(json!({
        "metadata": { "name": "cache.failover" },
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "reportingController": "valkyrie.io/valkyrie", "reportingInstance": "valkyrie-0",
        "action": "Failover", "reason": "SwitchMaster", "type": "Normal",
        "regarding": regarding, "note": "cache-1 promoted" }))
    .unwrap();
    let events = Api::<EventV1>::namespaced(sa.clone(), &ns);
    events.create(&PostParams::default(), &event).await.unwrap();
    let series =
        json!({ "series": { "count": 2, "lastObservedTime": "2025-01-01T00:00:05.000000Z" } });
    events
        .patch(
            "cache.failover",
            &PatchParams::default(),
            &Patch::Merge(&series),
        )
        .await
        .unwrap();
    let event: Event = serde_json::from_value(json!({
        "metadata": { "name": "cache.reconciled" },
        "involvedObject": regarding, "reason": "Reconciled", "message": "ok", "type": "Normal",
        "count": 1 }))
    .unwrap();
    let core_events = Api::<Event>::namespaced(sa.clone(), &ns);
    core_events
        .create(&PostParams::default(), &event)
        .await
        .unwrap();
    core_events
        .patch(
            "cache.reconciled",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "count": 2 })),
        )
        .await
        .unwrap();

    // The Lease, as the elector takes it: create, read, replace with the
    // resourceVersion read (compare and swap).
    let leases = Api::<Lease>::namespaced(sa.clone(), HOME);
    let lease: Lease = serde_json::from_value(json!({
        "metadata": { "name": LEASE },
        "spec": { "holderIdentity": "valkyrie-0_a", "leaseDurationSeconds": 15,
                  "leaseTransitions": 0 } }))
    .unwrap();
    let pp = PostParams::default();
    leases.create(&pp, &lease).await.unwrap();
    let mut read = leases.get(LEASE).await.unwrap();
    read.spec.get_or_insert_default().holder_identity = Some("valkyrie-1_b".into());
    let written = leases.replace(LEASE, &pp, &read).await.unwrap();
    assert_eq!(
        written.spec.unwrap().holder_identity.as_deref(),
        Some("valkyrie-1_b")
    );
    // A stale resourceVersion is a conflict, not a refusal.
    assert_eq!(code(leases.replace(LEASE, &pp, &read).await), 409);

    // ValkeyClusters of the shipped CRD: listed and watched across
    // namespaces; get, patch and a status patch reach the object (404 for
    // one that does not exist: authorization comes first, and passed).
    let crd_doc = document("05-crd.yaml", "CustomResourceDefinition");
    apply(&admin, &crd_doc).await;
    let crds = Api::<CustomResourceDefinition>::all(admin.clone());
    let crd_name = crd_doc["metadata"]["name"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let crd = crds.get(crd_name).await.unwrap();
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            break;
        }
        assert!(Instant::now() < deadline, "the CRD not established in 20 s");
        sleep(Duration::from_millis(100)).await;
    }
    let version = crd_doc["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["storage"] == true)
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let resource = ApiResource {
        group: "valkyrie.io".into(),
        version: version.clone(),
        api_version: format!("valkyrie.io/{version}"),
        kind: crd_doc["spec"]["names"]["kind"].as_str().unwrap().into(),
        plural: "valkeyclusters".into(),
    };
    // Discovery may lag the Established condition by a moment.
    let all = Api::<DynamicObject>::all_with(sa.clone(), &resource);
    let deadline = Instant::now() + Duration::from_secs(20);
    while code(all.list(&ListParams::default()).await) == 404 {
        assert!(
            Instant::now() < deadline,
            "valkeyclusters not served in 20 s"
        );
        sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(code(all.list(&ListParams::default()).await), 200);
    assert_eq!(
        code(all.watch(&WatchParams::default().timeout(1), "0").await),
        200
    );
    let clusters = Api::<DynamicObject>::namespaced_with(sa.clone(), &ns, &resource);
    assert_eq!(code(clusters.get("absent").await), 404);
    let merge = json!({ "metadata": { "finalizers": ["valkyrie.io/cleanup"] } });
    let pp = PatchParams::default();
    assert_eq!(
        code(clusters.patch("absent", &pp, &Patch::Merge(&merge)).await),
        404
    );
    let status = json!({ "status": { "observedGeneration": 1 } });
    assert_eq!(
        code(
            clusters
                .patch_status("absent", &pp, &Patch::Merge(&status))
                .await
        ),
        404
    );
    assert_eq!(code(clusters.get_status("absent").await), 404);
}

#[tokio::test]
async fn what_valkyrie_must_not_do_is_refused() {
    install().await;
    let (admin, sa) = (admin_client().await, service_account_client().await);
    let ns = namespace("shop").await;

    // By review: none of these is allowed.
    let other = Some(ns.as_str());
    let denied = [
        access("", "namespaces", "delete", None, Some(&ns)),
        access("", "namespaces", "create", None, None),
        access("", "nodes", "list", None, None),
        access("", "pods", "create", other, None),
        access("", "pods/exec", "create", other, None),
        access("", "pods/eviction", "create", other, None),
        access("", "persistentvolumeclaims", "list", other, None),
        access("", "serviceaccounts", "create", other, None),
        access(
            "",
            "serviceaccounts/token",
            "create",
            Some(HOME),
            Some("valkyrie"),
        ),
        access("apps", "deployments", "create", other, None),
        access("valkyrie.io", "valkeyclusters", "create", other, None),
        access("valkyrie.io", "valkeyclusters", "delete", other, None),
        access(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "create",
            None,
            None,
        ),
        access(
            "rbac.authorization.k8s.io",
            "clusterroles",
            "create",
            None,
            None,
        ),
        access(
            "rbac.authorization.k8s.io",
            "clusterroles",
            "escalate",
            None,
            None,
        ),
        access(
            "rbac.authorization.k8s.io",
            "clusterroles",
            "bind",
            None,
            None,
        ),
        access("rbac.authorization.k8s.io", "roles", "create", other, None),
        access(
            "rbac.authorization.k8s.io",
            "rolebindings",
            "create",
            other,
            None,
        ),
        access("", "users", "impersonate", None, Some("admin")),
        // Leases: only valkyrie-leader, only in Valkyrie's namespace, and
        // never listed, watched or deleted.
        access("coordination.k8s.io", "leases", "create", other, None),
        access("coordination.k8s.io", "leases", "get", other, Some(LEASE)),
        access(
            "coordination.k8s.io",
            "leases",
            "update",
            Some(HOME),
            Some("other"),
        ),
        access(
            "coordination.k8s.io",
            "leases",
            "get",
            Some(HOME),
            Some("other"),
        ),
        access("coordination.k8s.io", "leases", "list", Some(HOME), None),
        access("coordination.k8s.io", "leases", "watch", Some(HOME), None),
        access(
            "coordination.k8s.io",
            "leases",
            "delete",
            Some(HOME),
            Some(LEASE),
        ),
        access(
            "coordination.k8s.io",
            "leases",
            "patch",
            Some(HOME),
            Some(LEASE),
        ),
    ];
    let mut allowed_wrongly = Vec::new();
    for a in &denied {
        if allowed(&sa, a).await {
            allowed_wrongly.push(a);
        }
    }
    assert!(
        allowed_wrongly.is_empty(),
        "allowed to the service account: {allowed_wrongly:#?}"
    );

    // By real requests: each answered 403.
    let dp = DeleteParams::default();
    let pp = PostParams::default();
    assert_eq!(
        code(Api::<Namespace>::all(sa.clone()).delete(&ns, &dp).await),
        403
    );
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": "valkyrie-more" },
        "rules": [{ "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] }] }))
    .unwrap();
    assert_eq!(
        code(Api::<ClusterRole>::all(sa.clone()).create(&pp, &role).await),
        403
    );
    assert_eq!(
        code(
            Api::<Node>::all(sa.clone())
                .list(&ListParams::default())
                .await
        ),
        403
    );
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "intruder" },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] } }))
    .unwrap();
    let pods = Api::<Pod>::namespaced(sa.clone(), &ns);
    assert_eq!(code(pods.create(&pp, &pod).await), 403);
    Api::<Pod>::namespaced(admin.clone(), &ns)
        .create(&pp, &pod)
        .await
        .unwrap();
    // Deleting a pod is granted (a rolling update replaces replicas).
    assert_eq!(code(pods.delete("intruder", &dp).await), 200);

    // Another Lease in Valkyrie's namespace (the administrator's): not
    // readable, not writable. No Lease elsewhere.
    let lease = |name: &str| -> Lease {
        serde_json::from_value(json!({ "metadata": { "name": name },
            "spec": { "holderIdentity": "someone" } }))
        .unwrap()
    };
    Api::<Lease>::namespaced(admin.clone(), HOME)
        .create(&pp, &lease("other"))
        .await
        .unwrap();
    let home = Api::<Lease>::namespaced(sa.clone(), HOME);
    assert_eq!(code(home.get("other").await), 403);
    let mut other_lease = Api::<Lease>::namespaced(admin.clone(), HOME)
        .get("other")
        .await
        .unwrap();
    other_lease.spec.get_or_insert_default().holder_identity = Some("valkyrie-0_x".into());
    assert_eq!(code(home.replace("other", &pp, &other_lease).await), 403);
    assert_eq!(code(home.list(&ListParams::default()).await), 403);
    assert_eq!(code(home.delete(LEASE, &dp).await), 403);
    let elsewhere = Api::<Lease>::namespaced(sa.clone(), &ns);
    assert_eq!(code(elsewhere.create(&pp, &lease(LEASE)).await), 403);
}
