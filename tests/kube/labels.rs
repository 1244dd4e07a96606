//! The role labels against a real kube-apiserver: moved to the new master
//! and fenced by the configuration epoch, whoever writes and in whatever
//! order, through the same hook the failover step runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;

use ::kube::api::{Api, PostParams};
use ::kube::{Client, ResourceExt};
use k8s_openapi::api::core::v1::Pod;
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
                    "app.kubernetes.io/instance": instance,
                    "app.kubernetes.io/managed-by": "valkyrie",
                },
            },
            "spec": { "containers": [{ "name": "valkey", "image": "valkey/valkey:8.1" }] },
        }))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
    }
    api
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

    // Again in the same epoch: nothing to do.
    assert!(
        labels
            .converge(&ns, "cache", "cache-1", 3)
            .await
            .unwrap()
            .is_empty()
    );
    // A lower epoch (a late writer) changes nothing.
    assert!(
        labels
            .converge(&ns, "cache", "cache-2", 2)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(roles(&api).await, expect("cache-1", 3));

    // The next failover moves it.
    let changed = labels.converge(&ns, "cache", "cache-2", 4).await.unwrap();
    assert_eq!(changed.len(), 3, "{changed:?}");
    assert_eq!(roles(&api).await, expect("cache-2", 4));

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
    }

    // An address that names no pod of the resource is an error.
    match labels.converge(&ns, "cache", "other-0", 99).await {
        Err(LabelError::NoSuchPod { host, .. }) => assert_eq!(host, "other-0"),
        other => panic!("{other:?}"),
    }
}
