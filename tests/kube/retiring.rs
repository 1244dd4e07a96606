//! The retiring pods reach every Valkyrie, not only the Lease holder,
//! against a real kube-apiserver and etcd (`tests/support/kube.rs`; needs
//! `VALKYRIE_KUBE_BIN`, fails without it).
//!
//! Every Valkyrie governs the master's write fence, so a pod the
//! reconciler is about to remove must be marked retiring in each of them:
//! one that still counts it would tighten the fence again while the pod
//! goes, and stop writes. Two Valkyries share one Lease; a scale-down
//! from 3 to 2 pods makes the holder publish `shared-2` in
//! `status.retiringPods` (the test plays the kubelet's part so far as
//! creating the Pod objects: a pod that does not exist retires nothing),
//! and both runtimes mark it, the follower from the status alone. The
//! reconcile's own status writes leave the field alone. A scale back up
//! clears the list and the marks. (Names that are not the CR's pods are
//! ignored: `src/kube/groups/retiring.rs`, unit tests.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::helpers::*;
use crate::support::TempDir;
use crate::support::kube::{admin_client, namespace};

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use valkyrie::daemon::Daemon;
use valkyrie::kube::crd::ValkeyCluster;

/// Whether `d` marks pod `pod` of group `group` retiring (`None` while
/// it does not know the group or the pod).
fn marked(d: &Daemon, group: &str, pod: &str) -> Option<bool> {
    let topology = d.handle.topology.borrow();
    let g = topology.groups.get(group)?;
    let prefix = format!("{pod}.");
    let i = g
        .replicas
        .iter()
        .find(|r| r.addr.host.starts_with(&prefix))?;
    Some(i.retiring)
}

async fn retiring_pods(api: &Api<ValkeyCluster>, name: &str) -> Option<Vec<String>> {
    api.get_status(name).await.unwrap().status?.retiring_pods
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_down_marks_the_removed_pod_retiring_in_every_valkyrie() {
    let admin = admin_client().await;
    install_crd(&admin).await;
    let ns = namespace("retiring").await;
    let (ta, tb) = (
        TempDir::new("kube-retiring-a"),
        TempDir::new("kube-retiring-b"),
    );
    let (da, db) = (daemon(&ta).await, daemon(&tb).await);
    let a = input(&da, admin.clone(), &ns, &ns, "valkyrie-a").await;
    let b = input(&db, admin.clone(), &ns, &ns, "valkyrie-b").await;
    let (holder, follower) = if a_leads(&a, &b).await {
        (&da, &db)
    } else {
        (&db, &da)
    };

    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    for n in 0..3 {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": format!("shared-{n}"), "labels": {
                "app.kubernetes.io/name": "valkey",
                "app.kubernetes.io/instance": "shared",
                "app.kubernetes.io/managed-by": "valkyrie",
            } },
            "spec": { "containers": [{ "name": "valkey", "image": "valkey/valkey:8.1" }] },
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let api: Api<ValkeyCluster> = Api::namespaced(admin.clone(), &ns);
    api.create(&PostParams::default(), &cr("shared", 3))
        .await
        .unwrap();
    status_of_generation(&api, "shared").await;
    let group = format!("{ns}.shared");
    for d in [holder, follower] {
        let known = eventually("the group's replicas", Duration::from_secs(20), || async {
            marked(d, &group, "shared-2")
        })
        .await;
        assert!(!known, "no pod retires before the scale-down");
    }
    eventually(
        "an empty list published",
        Duration::from_secs(20),
        || async {
            retiring_pods(&api, "shared")
                .await?
                .is_empty()
                .then_some(())
        },
    )
    .await;

    api.patch_scale(
        "shared",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "replicas": 2 } })),
    )
    .await
    .unwrap();
    eventually(
        "shared-2 published retiring",
        Duration::from_secs(20),
        || async { (retiring_pods(&api, "shared").await? == ["shared-2"]).then_some(()) },
    )
    .await;
    for (who, d) in [("holder", holder), ("follower", follower)] {
        eventually(
            &format!("shared-2 retiring in the {who}"),
            Duration::from_secs(10),
            || async { marked(d, &group, "shared-2").filter(|m| *m) },
        )
        .await;
        assert_eq!(marked(d, &group, "shared-1"), Some(false), "{who}");
    }
    // The reconcile's own status (a newer generation's) keeps the field.
    let generation = status_of_generation(&api, "shared").await;
    assert_eq!(
        generation.status.unwrap().retiring_pods.as_deref(),
        Some(&["shared-2".to_owned()][..])
    );

    api.patch_scale(
        "shared",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "replicas": 3 } })),
    )
    .await
    .unwrap();
    eventually("the list cleared", Duration::from_secs(20), || async {
        retiring_pods(&api, "shared")
            .await?
            .is_empty()
            .then_some(())
    })
    .await;
    for (who, d) in [("holder", holder), ("follower", follower)] {
        eventually(
            &format!("shared-2 no longer retiring in the {who}"),
            Duration::from_secs(10),
            || async { marked(d, &group, "shared-2").filter(|m| !*m) },
        )
        .await;
    }

    a.shutdown().await;
    b.shutdown().await;
    da.stop().await.unwrap();
    db.stop().await.unwrap();
}
