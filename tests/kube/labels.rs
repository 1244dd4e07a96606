//! The roles against a real kube-apiserver: the `-master` Service's
//! selector and the role labels moved to the new master and fenced by the
//! configuration epoch, whoever writes and in whatever order, through the
//! same hook the failover step runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;

use ::kube::api::{Api, PostParams};
use ::kube::{Client, ResourceExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use support::kube::{admin_client, namespace};
use valkyrie::config::GroupOwner;
use valkyrie::core::Addr;
use valkyrie::kube::labels::{ANNOTATION_CONFIG_EPOCH, LabelError, RoleLabels};
use valkyrie::runtime::{MasterSwitch, RoleHook};

const PODS: [&str; 3] = ["cache-0", "cache-1", "cache-2"];

/// The pods a StatefulSet would create for `cache` (no kubelet runs: they
/// stay Pending, which labels do not care about), plus a stranger.
async fn pods(client: &Client, ns: &str) -> Api<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    for (name, instance) in PODS
        .iter()
        .map(|p| (*p, "cache"))
        .chain([("other-0", "other")])
    {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": {
                    "app.kubernetes.io/name": "valkey",
                    "app.kubernetes.io/instance": instance,
                    "app.kubernetes.io/managed-by": "valkyrie",
                    "statefulset.kubernetes.io/pod-name": name,
                },
            },
            "spec": { "containers": [{ "name": "valkey", "image": "valkey/valkey:8.1" }] },
        }))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
    }
    api
}

/// `cache-master` as an older Valkyrie applied it: selecting the role
/// label.
async fn service(client: &Client, ns: &str) -> Api<Service> {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "cache-master" },
        "spec": {
            "selector": {
                "app.kubernetes.io/name": "valkey",
                "app.kubernetes.io/instance": "cache",
                "app.kubernetes.io/managed-by": "valkyrie",
                "valkyrie.io/role": "master",
            },
            "ports": [{ "name": "valkey", "port": 6379 }],
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &service).await.unwrap();
    api
}

/// The pod `cache-master` selects, and its epoch annotation; the selector
/// must be the master's pod and the instance's labels, nothing else.
async fn selected(api: &Api<Service>) -> (String, String) {
    let s = api.get("cache-master").await.unwrap();
    let selector = s.spec.unwrap().selector.unwrap();
    let keys: Vec<&str> = selector.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "app.kubernetes.io/instance",
            "app.kubernetes.io/managed-by",
            "app.kubernetes.io/name",
            "statefulset.kubernetes.io/pod-name",
        ],
        "{selector:?}"
    );
    let epoch = s
        .metadata
        .annotations
        .unwrap_or_default()
        .get(ANNOTATION_CONFIG_EPOCH)
        .cloned()
        .unwrap_or_default();
    (
        selector["statefulset.kubernetes.io/pod-name"].clone(),
        epoch,
    )
}

fn selects(pod: &str, epoch: u64) -> (String, String) {
    (pod.to_string(), epoch.to_string())
}

/// Each pod's role label and epoch annotation.
async fn roles(api: &Api<Pod>) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for p in api.list(&Default::default()).await.unwrap() {
        let role = p
            .labels()
            .get("valkyrie.io/role")
            .cloned()
            .unwrap_or_default();
        let epoch = p
            .annotations()
            .get(ANNOTATION_CONFIG_EPOCH)
            .cloned()
            .unwrap_or_default();
        out.insert(p.name_any(), (role, epoch));
    }
    out
}

fn expect(master: &str, epoch: u64) -> BTreeMap<String, (String, String)> {
    let mut out: BTreeMap<String, (String, String)> = PODS
        .iter()
        .map(|p| {
            let role = if *p == master { "master" } else { "replica" };
            (p.to_string(), (role.to_string(), epoch.to_string()))
        })
        .collect();
    out.insert("other-0".into(), (String::new(), String::new()));
    out
}

#[tokio::test]
async fn labels_follow_the_master_and_a_lower_epoch_never_wins() {
    let client = admin_client().await;
    let ns = namespace("labels").await;
    let api = pods(&client, &ns).await;
    let services = service(&client, &ns).await;
    let labels = RoleLabels::new(client.clone());

    // Through the failover step's hook, with the address Valkyrie uses.
    let switch = MasterSwitch {
        group: format!("{ns}.cache"),
        owner: GroupOwner::Kubernetes {
            namespace: ns.clone(),
            name: "cache".into(),
            labels: Default::default(),
        },
        config_epoch: 3,
        old: Addr::new(
            format!("cache-0.cache-headless.{ns}.svc.cluster.local"),
            6379,
        ),
        new: Addr::new(
            format!("cache-1.cache-headless.{ns}.svc.cluster.local"),
            6379,
        ),
    };
    labels.master_switched(switch).await.unwrap();
    assert_eq!(roles(&api).await, expect("cache-1", 3));
    assert_eq!(selected(&services).await, selects("cache-1", 3));

    // Again in the same epoch: nothing to do.
    assert!(
        !labels
            .converge(&ns, "cache", "cache-1", 3)
            .await
            .unwrap()
            .any()
    );
    // A lower epoch (a late writer) changes nothing.
    assert!(
        !labels
            .converge(&ns, "cache", "cache-2", 2)
            .await
            .unwrap()
            .any()
    );
    assert_eq!(roles(&api).await, expect("cache-1", 3));
    assert_eq!(selected(&services).await, selects("cache-1", 3));

    // The next failover moves it.
    let moved = labels.converge(&ns, "cache", "cache-2", 4).await.unwrap();
    assert!(moved.service, "{moved:?}");
    assert_eq!(moved.pods.len(), 3, "{moved:?}");
    assert_eq!(roles(&api).await, expect("cache-2", 4));
    assert_eq!(selected(&services).await, selects("cache-2", 4));

    // Two writers at once, in either order: the higher epoch wins.
    for round in 0..4_u64 {
        let (high, low) = (6 + 2 * round, 5 + 2 * round);
        let (a, b) = (labels.clone(), RoleLabels::new(admin_client().await));
        let (ns_a, ns_b) = (ns.clone(), ns.clone());
        let first = tokio::spawn(async move { a.converge(&ns_a, "cache", "cache-0", high).await });
        let second = tokio::spawn(async move { b.converge(&ns_b, "cache", "cache-1", low).await });
        first.await.unwrap().unwrap();
        second.await.unwrap().unwrap();
        let got = roles(&api).await;
        assert_eq!(
            got["cache-0"],
            ("master".to_string(), high.to_string()),
            "{got:?}"
        );
        let masters = got.values().filter(|(r, _)| r == "master").count();
        assert_eq!(masters, 1, "one master label: {got:?}");
        assert_eq!(selected(&services).await, selects("cache-0", high));
    }

    // An address that names no pod of the resource is an error.
    match labels.converge(&ns, "cache", "other-0", 99).await {
        Err(LabelError::NoSuchPod { host, .. }) => assert_eq!(host, "other-0"),
        other => panic!("{other:?}"),
    }
}
