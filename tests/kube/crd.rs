//! The `ValkeyCluster` CRD as shipped: `deploy/05-crd.yaml` is exactly what
//! `valkyrie crd` prints, so the two cannot drift.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

#[test]
fn deploy_holds_what_valkyrie_crd_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
        .arg("crd")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "valkyrie crd: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(
        printed.contains("\nkind: CustomResourceDefinition\n"),
        "{printed}"
    );
    assert!(printed.contains("\n  name: valkeyclusters.valkyrie.io\n"));

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/05-crd.yaml");
    let shipped = std::fs::read_to_string(&path).unwrap_or_default();
    if shipped != printed {
        let line = shipped
            .lines()
            .zip(printed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(shipped.lines().count().min(printed.lines().count()));
        panic!(
            "{} differs from `valkyrie crd` from line {} (shipped {:?}, printed {:?}).\n\
             Regenerate it and commit it with the change to the CRD:\n  \
             cargo run -q -- crd > deploy/05-crd.yaml",
            path.display(),
            line + 1,
            shipped.lines().nth(line),
            printed.lines().nth(line),
        );
    }
}

// ---------------------------------------------------------------------------
// Against a real kube-apiserver and etcd (tests/support/kube.rs; needs
// VALKYRIE_KUBE_BIN, fails without it).

use crate::support;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, GetParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};
use tokio::time::{Instant, sleep, timeout};
use valkyrie::kube::crd::ValkeyCluster;

use support::kube::{admin_client, namespace};

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// Sends `body` as YAML (the API server parses it itself, so this checks
/// the file is the YAML we mean) to collection `path`.
async fn create_yaml<T: serde::de::DeserializeOwned>(
    client: &Client,
    path: &str,
    body: &str,
) -> Result<T, kube::Error> {
    let mut req = kube::core::Request::new(path)
        .create(&PostParams::default(), body.as_bytes().to_vec())
        .unwrap();
    req.headers_mut()
        .insert("content-type", "application/yaml".parse().unwrap());
    client.request::<T>(req).await
}

fn status_code(r: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Numbers as f64, so that `15` and `15.0` compare equal.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), normalized(v))).collect())
        }
        other => other.clone(),
    }
}

/// Installs deploy/05-crd.yaml (once per API server) and waits until it
/// is Established.
async fn install_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = ValkeyCluster::crd_name();
    if crds.get_opt(name).await.unwrap().is_none() {
        let created: Result<CustomResourceDefinition, _> = create_yaml(
            client,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &read("deploy/05-crd.yaml"),
        )
        .await;
        if let Err(e) = created {
            // A concurrent test may have won the race; anything else is
            // the API server refusing the CRD (schema, CEL, CEL cost).
            assert!(
                matches!(&e, kube::Error::Api(s) if s.code == 409),
                "CRD refused: {e}"
            );
        }
    }
    timeout(
        Duration::from_secs(30),
        await_condition(crds, name, conditions::is_crd_established()),
    )
    .await
    .expect("the CRD is Established within 30 s")
    .unwrap();
}

/// Creates an example CR from its YAML in `ns`, retrying while the new
/// resource is not served yet (404 for a moment after Established).
async fn create_example(client: &Client, ns: &str, file: &str) -> ValkeyCluster {
    let path = format!("/apis/valkyrie.io/v1alpha1/namespaces/{ns}/valkeyclusters");
    let text = read(file);
    let began = Instant::now();
    loop {
        match create_yaml::<ValkeyCluster>(client, &path, &text).await {
            Err(kube::Error::Api(s))
                if s.code == 404 && began.elapsed() < Duration::from_secs(10) =>
            {
                sleep(Duration::from_millis(100)).await;
            }
            other => return other.unwrap_or_else(|e| panic!("{file} refused: {e}")),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_accepts_the_crd_and_enforces_its_rules() {
    let client = admin_client().await;
    install_crd(&client).await;

    // What the server stored is what `valkyrie crd` generates.
    let stored = Api::<CustomResourceDefinition>::all(client.clone())
        .get(ValkeyCluster::crd_name())
        .await
        .unwrap();
    let stored = serde_json::to_value(&stored.spec).unwrap();
    let mut ours = serde_json::to_value(ValkeyCluster::crd().spec).unwrap();
    // The one field the server defaults.
    ours["names"]["listKind"] = json!("ValkeyClusterList");
    for field in ["group", "names", "scope"] {
        assert_eq!(stored[field], ours[field], "spec.{field}");
    }
    for field in [
        "name",
        "schema",
        "subresources",
        "additionalPrinterColumns",
        "served",
        "storage",
    ] {
        assert_eq!(
            normalized(&stored["versions"][0][field]),
            normalized(&ours["versions"][0][field]),
            "spec.versions[0].{field}"
        );
    }

    let ns = namespace("crd").await;
    let api: Api<ValkeyCluster> = Api::namespaced(client.clone(), &ns);
    let minimal = create_example(&client, &ns, "deploy/examples/minimal.yaml").await;
    assert_eq!(minimal.spec.replicas, 3, "the schema's default");
    let full = create_example(&client, &ns, "deploy/examples/full.yaml").await;
    let monitoring = full.spec.monitoring.clone().unwrap();
    assert_eq!(monitoring.down_after_milliseconds, 3000);

    // A transition rule refuses an update: 422 with the rule's message.
    let mut grown = full.clone();
    grown.spec.storage.as_mut().unwrap().size =
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("16Gi".into());
    let (code, message) = status_code(
        api.replace("sessions", &PostParams::default(), &grown)
            .await,
    );
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("storage.size is immutable"), "{message}");
    let mut renamed = full.clone();
    renamed.spec.monitoring.as_mut().unwrap().master_name = Some("other".into());
    let (code, message) = status_code(
        api.replace("sessions", &PostParams::default(), &renamed)
            .await,
    );
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("masterName is immutable"), "{message}");
    // ... and allows a mutable change.
    let mut scaled = full.clone();
    scaled.spec.monitoring.as_mut().unwrap().parallel_syncs = 3;
    api.replace("sessions", &PostParams::default(), &scaled)
        .await
        .unwrap();

    // Creation rules and the structural schema.
    for (what, patch, expect) in [
        (
            "a managed directive",
            json!({"config": {"replicaof": "evil 6379"}}),
            "directive Valkyrie manages",
        ),
        (
            "timers out of order",
            json!({"monitoring": {"downAfterMilliseconds": 90000}}),
            "at least downAfterMilliseconds",
        ),
        ("16 pods", json!({"replicas": 16}), "spec.replicas"),
        (
            "a two-line directive",
            json!({"config": {"save": "1 1\nreplicaof x 1"}}),
            "spec.config",
        ),
    ] {
        let mut object = serde_json::to_value(&minimal).unwrap();
        object["metadata"] = json!({"name": "bad"});
        for (k, v) in patch.as_object().unwrap() {
            object["spec"][k] = v.clone();
        }
        let object: ValkeyCluster = serde_json::from_value(object).unwrap();
        let (code, message) = status_code(api.create(&PostParams::default(), &object).await);
        assert_eq!(code, 422, "{what}: {message}");
        assert!(message.contains(expect), "{what}: {message}");
    }
    let mut dotted = minimal.clone();
    dotted.metadata = kube::api::ObjectMeta {
        name: Some("cache.eu".into()),
        ..Default::default()
    };
    let (code, message) = status_code(api.create(&PostParams::default(), &dotted).await);
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("DNS label"), "{message}");

    // The scale subresource reads and writes spec.replicas.
    api.patch_scale(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    assert_eq!(api.get("cache").await.unwrap().spec.replicas, 5);

    // The status subresource, and the printer columns reading it.
    let status = json!({"status": {
        "phase": "Running", "replicas": 5, "readyReplicas": 4, "configEpoch": 7,
        "selector": "app.kubernetes.io/instance=cache",
        "currentMaster": {"pod": "cache-1", "address": "cache-1.cache-headless.x.svc.cluster.local:6379"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "Running", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}],
    }});
    api.patch_status("cache", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let scale = api.get_scale("cache").await.unwrap();
    assert_eq!(scale.status.unwrap().replicas, 5);
    let mut req = kube::core::Request::new(format!(
        "/apis/valkyrie.io/v1alpha1/namespaces/{ns}/valkeyclusters"
    ))
    .get("cache", &GetParams::default())
    .unwrap();
    req.headers_mut().insert(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io"
            .parse()
            .unwrap(),
    );
    let table: Value = serde_json::from_str(&client.request_text(req).await.unwrap()).unwrap();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        ["Name", "Phase", "Master", "Epoch", "Ready", "Age", "Image"]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[1], "Running");
    assert_eq!(cells[2], "cache-1");
    assert_eq!(cells[3], 7);
    assert_eq!(cells[4], 4);
    assert_eq!(cells[6], "valkey/valkey:8.1");
}

/// Server-side applies `object` (a rendered child) as the reconciler will;
/// returns the resourceVersion the server holds afterwards.
async fn apply<K>(client: &Client, ns: &str, object: &K) -> String
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let name = object.meta().name.clone().unwrap();
    let applied = api
        .patch(
            &name,
            &PatchParams::apply("valkyrie").force(),
            &Patch::Apply(object),
        )
        .await
        .unwrap_or_else(|e| panic!("{name} refused: {e}"));
    applied.meta().resource_version.clone().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_takes_every_rendered_child_by_server_side_apply() {
    use valkyrie::kube::render::{Observed, render};

    let client = admin_client().await;
    install_crd(&client).await;
    let ns = namespace("render").await;
    for file in ["deploy/examples/minimal.yaml", "deploy/examples/full.yaml"] {
        let vc = create_example(&client, &ns, file).await;
        let observed = Observed {
            cluster_domain: "cluster.local",
            generated_password: Some("a-generated-password"),
        };
        let d = render(&vc, &observed).unwrap();
        let mut versions = Vec::new();
        for round in 0..2 {
            let mut v = vec![
                apply(&client, &ns, &d.stateful_set).await,
                apply(&client, &ns, &d.headless_service).await,
                apply(&client, &ns, &d.master_service).await,
                apply(&client, &ns, &d.config_map).await,
            ];
            if let Some(s) = &d.replicas_service {
                v.push(apply(&client, &ns, s).await);
            }
            if let Some(s) = &d.secret {
                v.push(apply(&client, &ns, s).await);
            }
            if let Some(p) = &d.pod_disruption_budget {
                v.push(apply(&client, &ns, p).await);
            }
            versions.push(v);
            assert!(
                round == 0 || versions[0] == versions[1],
                "{file}: a second apply changed objects: {versions:?}"
            );
        }
        // The server kept what was rendered (nothing dropped or refused).
        let api: Api<k8s_openapi::api::apps::v1::StatefulSet> =
            Api::namespaced(client.clone(), &ns);
        let sts = api.get(vc.metadata.name.as_deref().unwrap()).await.unwrap();
        let spec = sts.spec.unwrap();
        assert_eq!(
            spec.service_name.as_deref(),
            Some(format!("{}-headless", vc.metadata.name.as_deref().unwrap()).as_str())
        );
        let owner = &sts.metadata.owner_references.unwrap()[0];
        assert_eq!(owner.uid, vc.metadata.uid.clone().unwrap());
        let labels = spec.template.metadata.unwrap().labels.unwrap();
        assert!(!labels.contains_key("valkyrie.io/role"));
    }
}
