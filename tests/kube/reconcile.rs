//! The reconciler and `--kubernetes` against a real kube-apiserver and etcd
//! (`tests/support/kube.rs`; needs `VALKYRIE_KUBE_BIN`, fails without it),
//! with in-process daemons and their Sentinel ports.
//!
//! - A CR becomes its children (each what `render()` gives, fields the
//!   server defaults aside, owned by the CR), a status whose conditions
//!   carry the generation, and a group on the Sentinel port at pod 0's DNS
//!   name that `SENTINEL REMOVE` cannot touch; a spec change and a scale
//!   move the generation, the status and the StatefulSet; deleting the CR
//!   runs the finalizer and the group leaves.
//! - Two Valkyries share one Lease: both monitor the group, only the
//!   holder reconciles, and when it shuts down (releasing the Lease) the
//!   other takes over.
//! - The reconciler under the service account, with only the install's
//!   RBAC (`deploy/15-rbac.yaml`).
//! - The role label repaired from the converged topology: the test plays
//!   the kubelet for one pod (a Pod object, a valkey-server on a loopback
//!   address of its own, its DNS name in `/etc/hosts`; it runs as root, as
//!   CI does).
//!
//! Elsewhere no kubelet runs: the pods are never created, so the group's
//! instances are down (their names do not resolve) and no failover
//! happens. Figures are printed (`--nocapture`); the helpers are in
//! `helpers.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use crate::helpers;

use std::time::Duration;

use helpers::*;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::TempDir;
use support::kube::{admin_client, namespace, service_account_client};
use tokio::time::{Instant, timeout};
use valkyrie::kube::crd::ValkeyCluster;
use valkyrie::kube::render::{Observed, render};
use valkyrie_protocol::Frame;

// ---------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_becomes_its_children_its_status_and_a_group() {
    let admin = admin_client().await;
    install_crd(&admin).await;
    let ns = namespace("reconcile").await;
    let tmp = TempDir::new("kube-reconcile");
    let d = daemon(&tmp).await;
    let port = d.sentinel_addrs[0].port();
    let input = input(&d, admin.clone(), &ns, &ns, "valkyrie-0").await;
    let mut leadership = input.leadership();
    timeout(
        Duration::from_secs(10),
        leadership.wait_for(|l| l.is_leading()),
    )
    .await
    .expect("the only Valkyrie leads within 10 s")
    .unwrap();

    let api: Api<ValkeyCluster> = Api::namespaced(admin.clone(), &ns);
    // Timed from the moment the CR exists: the API server's first create
    // in a fresh namespace waits for its namespace cache (about 2 s here).
    api.create(&PostParams::default(), &cr("cache", 3))
        .await
        .unwrap();
    let created_at = Instant::now();
    let got = eventually("every child", Duration::from_secs(20), || {
        children(&admin, &ns, "cache")
    })
    .await;
    let to_children = created_at.elapsed();
    let vc = status_of_generation(&api, "cache").await;
    eprintln!(
        "CR created -> all children in {to_children:.3?}; -> status of generation 1 in {:.3?}",
        created_at.elapsed()
    );

    // Each child is what render() gives for this CR (with the password
    // the reconciler generated), owned by the CR.
    let password =
        String::from_utf8(got.secret.data.as_ref().unwrap()["password"].0.clone()).unwrap();
    assert_eq!(password.len(), 64, "32 random bytes, hex");
    let want = render(
        &vc,
        &Observed {
            cluster_domain: "cluster.local",
            generated_password: Some(&password),
        },
    )
    .unwrap();
    assert_contains("StatefulSet", &want.stateful_set, &got.stateful_set);
    assert_contains("headless Service", &want.headless_service, &got.headless);
    assert_contains("master Service", &want.master_service, &got.master);
    assert_contains(
        "replicas Service",
        want.replicas_service.as_ref().unwrap(),
        &got.replicas,
    );
    assert_contains("ConfigMap", &want.config_map, &got.config_map);
    assert_contains("Secret", want.secret.as_ref().unwrap(), &got.secret);
    assert_contains(
        "PDB",
        want.pod_disruption_budget.as_ref().unwrap(),
        &got.pdb,
    );
    let owner = vc.controller_owner_ref(&()).unwrap();
    for (kind, meta) in [
        ("StatefulSet", &got.stateful_set.metadata),
        ("Service", &got.headless.metadata),
        ("Service", &got.master.metadata),
        ("Service", &got.replicas.metadata),
        ("ConfigMap", &got.config_map.metadata),
        ("Secret", &got.secret.metadata),
        ("PodDisruptionBudget", &got.pdb.metadata),
    ] {
        let refs = meta.owner_references.clone().unwrap_or_default();
        assert_eq!(refs.len(), 1, "{kind} {:?}", meta.name);
        assert_eq!(
            (&refs[0].uid, &refs[0].kind, refs[0].controller),
            (&owner.uid, &owner.kind, Some(true)),
            "{kind} {:?}",
            meta.name
        );
        let managers: Vec<_> = meta
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.clone())
            .collect();
        assert!(
            managers.iter().any(|m| m == "valkyrie"),
            "{kind}: {managers:?}"
        );
    }
    assert!(
        vc.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "valkyrie.io/cleanup")
    );
    let status = vc.status.clone().unwrap();
    assert_eq!(status.replicas, Some(0), "no kubelet: no pods");
    assert_eq!(
        status.selector.as_deref(),
        Some(
            "app.kubernetes.io/instance=cache,app.kubernetes.io/managed-by=valkyrie,app.kubernetes.io/name=valkey"
        )
    );
    let valid = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Valid")
        .unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("True", "Valid")
    );

    // The group: on the Sentinel port at pod 0's stable DNS name, and the
    // CR's alone.
    let group = format!("{ns}.cache");
    let pod0 = format!("cache-0.cache-headless.{ns}.svc.cluster.local");
    let m = master_named(port, &group)
        .await
        .expect("the group is monitored");
    assert_eq!(
        (m["ip"].as_str(), m["port"].as_str()),
        (pod0.as_str(), "6379")
    );
    assert_eq!(m["quorum"], "1");
    assert_eq!(m["down-after-milliseconds"], "5000");
    match sentinel(port, &["SENTINEL", "REMOVE", &group]).await {
        Frame::Error(e) => assert!(
            String::from_utf8_lossy(&e).contains("managed by Kubernetes"),
            "{e:?}"
        ),
        other => panic!("SENTINEL REMOVE of a CR's group: {other:?}"),
    }
    let vc = eventually(
        "currentMaster in the status",
        Duration::from_secs(20),
        || async {
            let vc = api.get("cache").await.unwrap();
            vc.status.as_ref()?.current_master.as_ref()?;
            Some(vc)
        },
    )
    .await;
    let status = vc.status.unwrap();
    let current = status.current_master.unwrap();
    assert_eq!(current.pod, "cache-0");
    assert_eq!(current.address, format!("{pod0}:6379"));
    assert_eq!(status.config_epoch, Some(0));

    // A spec change: a new generation, observed by the status and the group.
    api.patch(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "monitoring": { "downAfterMilliseconds": 7000 } } })),
    )
    .await
    .unwrap();
    let vc = status_of_generation(&api, "cache").await;
    assert_eq!(vc.metadata.generation, Some(2));
    eventually(
        "down-after on the Sentinel port",
        Duration::from_secs(10),
        || async {
            let m = master_named(port, &group).await?;
            (m["down-after-milliseconds"] == "7000").then_some(())
        },
    )
    .await;

    // Scaling through the scale subresource.
    let scaled_at = Instant::now();
    api.patch_scale(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "replicas": 5 } })),
    )
    .await
    .unwrap();
    let sts: Api<StatefulSet> = Api::namespaced(admin.clone(), &ns);
    eventually(
        "the StatefulSet scaled to 5",
        Duration::from_secs(20),
        || async {
            let s = sts.get("cache").await.unwrap();
            (s.spec?.replicas == Some(5)).then_some(())
        },
    )
    .await;
    eprintln!(
        "scale 3 -> 5 reached the StatefulSet in {:.3?}",
        scaled_at.elapsed()
    );
    let vc = status_of_generation(&api, "cache").await;
    assert_eq!(vc.metadata.generation, Some(3));
    let reasons: Vec<String> = events(&admin, &ns, "cache")
        .await
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert!(reasons.iter().any(|r| r == "Reconciled"), "{reasons:?}");

    // Deletion: the finalizer runs, the CR goes, and so does the group.
    let deleted_at = Instant::now();
    api.delete("cache", &DeleteParams::default()).await.unwrap();
    eventually("the CR deleted", Duration::from_secs(20), || async {
        api.get_opt("cache").await.unwrap().is_none().then_some(())
    })
    .await;
    eprintln!(
        "CR deleted (finalizer removed) in {:.3?}",
        deleted_at.elapsed()
    );
    eventually("the group removed", Duration::from_secs(10), || async {
        master_named(port, &group).await.is_none().then_some(())
    })
    .await;
    let reasons: Vec<String> = events(&admin, &ns, "cache")
        .await
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert!(reasons.iter().any(|r| r == "Deleting"), "{reasons:?}");
    assert!(input.reconciles() > 0);

    input.shutdown().await;
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_reconciles_and_the_other_takes_over() {
    let admin = admin_client().await;
    install_crd(&admin).await;
    let ns = namespace("handover").await;
    let (ta, tb) = (
        TempDir::new("kube-handover-a"),
        TempDir::new("kube-handover-b"),
    );
    let (da, db) = (daemon(&ta).await, daemon(&tb).await);
    let a = input(&da, admin.clone(), &ns, &ns, "valkyrie-a").await;
    let b = input(&db, admin.clone(), &ns, &ns, "valkyrie-b").await;
    let (holder, holder_d, other, other_d, holder_pod, other_pod) = if a_leads(&a, &b).await {
        (a, &da, b, &db, "valkyrie-a", "valkyrie-b")
    } else {
        (b, &db, a, &da, "valkyrie-b", "valkyrie-a")
    };

    let api: Api<ValkeyCluster> = Api::namespaced(admin.clone(), &ns);
    api.create(&PostParams::default(), &cr("shared", 3))
        .await
        .unwrap();
    let created_at = Instant::now();
    eventually("every child", Duration::from_secs(20), || {
        children(&admin, &ns, "shared")
    })
    .await;
    eprintln!("CR created -> all children in {:.3?}", created_at.elapsed());
    status_of_generation(&api, "shared").await;

    // Both monitor the group; only the holder reconciled and reported.
    let group = format!("{ns}.shared");
    for d in [holder_d, other_d] {
        let port = d.sentinel_addrs[0].port();
        eventually(
            "the group on both Sentinel ports",
            Duration::from_secs(10),
            || async { master_named(port, &group).await.map(drop) },
        )
        .await;
    }
    assert!(holder.reconciles() > 0);
    assert_eq!(other.reconciles(), 0, "the follower never reconciles");
    let reporters = eventually("the holder's events", Duration::from_secs(10), || async {
        let events = events(&admin, &ns, "shared").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert!(
        reporters.iter().all(|(_, by)| by == holder_pod),
        "{reporters:?}"
    );

    // The holder shuts down (SIGTERM: it releases the Lease); the other
    // takes over and reconciles the next change.
    let mut follower = other.leadership();
    let released_at = Instant::now();
    holder.shutdown().await;
    timeout(
        Duration::from_secs(10),
        follower.wait_for(|l| l.is_leading()),
    )
    .await
    .expect("the other Valkyrie leads within 10 s of the release")
    .unwrap();
    let takeover = released_at.elapsed();
    eprintln!("takeover after a release: {takeover:.3?}");
    // A scale up: a scale-down waits for a master it knows to be up on a
    // pod that stays, and this group's pods never run (no kubelet here).
    api.patch_scale(
        "shared",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "replicas": 4 } })),
    )
    .await
    .unwrap();
    let sts: Api<StatefulSet> = Api::namespaced(admin.clone(), &ns);
    eventually(
        "the new leader scales the StatefulSet",
        Duration::from_secs(20),
        || async {
            let s = sts.get("shared").await.unwrap();
            (s.spec?.replicas == Some(4)).then_some(())
        },
    )
    .await;
    assert!(other.reconciles() > 0);
    eventually(
        "an event of the new leader",
        Duration::from_secs(10),
        || async {
            let events = events(&admin, &ns, "shared").await;
            events.iter().any(|e| e.1 == other_pod).then_some(())
        },
    )
    .await;

    other.shutdown().await;
    da.stop().await.unwrap();
    db.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_runs_with_only_the_installs_rbac() {
    let admin = admin_client().await;
    install_crd(&admin).await;
    install_rbac(&admin).await;
    let ns = namespace("rbac").await;
    let tmp = TempDir::new("kube-rbac-reconcile");
    let d = daemon(&tmp).await;
    let sa = service_account_client().await;
    // RBAC takes effect through informers: wait until the Lease can be read
    // or created by the service account (the elector retries meanwhile).
    let input = input(&d, sa.clone(), &ns, HOME, "valkyrie-0").await;
    let mut leadership = input.leadership();
    timeout(
        Duration::from_secs(20),
        leadership.wait_for(|l| l.is_leading()),
    )
    .await
    .expect("leading with the install's Role within 20 s")
    .unwrap();

    let api: Api<ValkeyCluster> = Api::namespaced(admin.clone(), &ns);
    api.create(&PostParams::default(), &cr("guarded", 3))
        .await
        .unwrap();
    eventually(
        "every child, as the service account",
        Duration::from_secs(30),
        || children(&admin, &ns, "guarded"),
    )
    .await;
    let vc = status_of_generation(&api, "guarded").await;
    let valid = vc
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Valid")
        .unwrap();
    assert_eq!(valid.status, "True");
    // Events are written after the status, asynchronously: wait for one.
    let reasons: Vec<String> =
        eventually("a Reconciled event", Duration::from_secs(30), || async {
            let reasons: Vec<String> = events(&admin, &ns, "guarded")
                .await
                .into_iter()
                .map(|e| e.0)
                .collect();
            reasons.iter().any(|r| r == "Reconciled").then_some(reasons)
        })
        .await;
    assert!(
        !reasons.iter().any(|r| r == "Forbidden"),
        "a verb the reconciler uses is missing from deploy/15-rbac.yaml: {reasons:?}"
    );

    api.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the finalizer removed by the service account",
        Duration::from_secs(20),
        || async {
            api.get_opt("guarded")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
    input.shutdown().await;
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_puts_the_role_label_back_where_the_topology_says() {
    let admin = admin_client().await;
    install_crd(&admin).await;
    let ns = namespace("repair").await;
    let fqdn = format!("cache-0.cache-headless.{ns}.svc.cluster.local");
    let _hosts = support::pods::Hosts::add(&ns, &[(POD_IP.to_string(), fqdn.clone())]);
    let tmp = TempDir::new("kube-repair");
    let password = "pod-password";
    let _server = PodServer(
        std::process::Command::new(support::valkey_server())
            .args([
                "--bind",
                POD_IP,
                "--port",
                "6379",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--requirepass", password, "--replica-announce-ip", &fqdn])
            .arg("--dir")
            .arg(&tmp.0)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // What a StatefulSet and its kubelet would have made: the password
    // Secret the CR names and the pod (labels of the StatefulSet's
    // template, no role yet).
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "cache-password" },
        "stringData": { "password": password },
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "cache-0", "labels": {
            "app.kubernetes.io/name": "valkey",
            "app.kubernetes.io/instance": "cache",
            "app.kubernetes.io/managed-by": "valkyrie",
        } },
        "spec": { "containers": [{ "name": "valkey", "image": "valkey/valkey:8.1" }] },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let d = daemon(&tmp).await;
    let port = d.sentinel_addrs[0].port();
    let input = input(&d, admin.clone(), &ns, &ns, "valkyrie-0").await;
    let api: Api<ValkeyCluster> = Api::namespaced(admin.clone(), &ns);
    let mut vc = cr("cache", 1);
    vc.spec.auth = Some(
        serde_json::from_value(json!({
            "passwordSecretRef": { "name": "cache-password", "key": "password" },
        }))
        .unwrap(),
    );
    api.create(&PostParams::default(), &vc).await.unwrap();
    let created_at = Instant::now();

    // The master answers (the password came from the Secret), so the
    // reconciler labels its pod, in the group's config epoch.
    let group = format!("{ns}.cache");
    eventually(
        "the master up on the Sentinel port",
        Duration::from_secs(20),
        || async {
            let m = master_named(port, &group).await?;
            (m["flags"] == "master").then_some(())
        },
    )
    .await;
    eventually(
        "cache-0 labelled master",
        Duration::from_secs(20),
        || async { (role(&pods, "cache-0").await == ("master".into(), "0".into())).then_some(()) },
    )
    .await;
    eprintln!(
        "CR created -> master pod labelled in {:.3?}",
        created_at.elapsed()
    );

    // Someone changes the label by hand: the pod watch brings the
    // reconciler, which puts it back.
    pods.patch(
        "cache-0",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "valkyrie.io/role": "replica" } } })),
    )
    .await
    .unwrap();
    let drifted_at = Instant::now();
    eventually("the label repaired", Duration::from_secs(20), || async {
        (role(&pods, "cache-0").await.0 == "master").then_some(())
    })
    .await;
    eprintln!("label drift repaired in {:.3?}", drifted_at.elapsed());
    // The `-master` Service names the master's pod, and the reconciles
    // since (each an apply of the Service without a selector) kept it.
    let services: Api<Service> = Api::namespaced(admin.clone(), &ns);
    eventually(
        "cache-master selecting cache-0",
        Duration::from_secs(20),
        || async { (selected_pod(&services).await.as_deref() == Some("cache-0")).then_some(()) },
    )
    .await;
    // A selector set back by hand (here: the role label an older
    // Valkyrie's apply wrote) is repaired like a label.
    services
        .patch(
            "cache-master",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "selector": {
                "statefulset.kubernetes.io/pod-name": null,
                "valkyrie.io/role": "master",
            } } })),
        )
        .await
        .unwrap();
    eventually(
        "the Service's selector repaired",
        Duration::from_secs(20),
        || async {
            let s = services.get("cache-master").await.ok()?;
            let selector = s.spec?.selector?;
            (selector
                .get("statefulset.kubernetes.io/pod-name")
                .map(String::as_str)
                == Some("cache-0")
                && !selector.contains_key("valkyrie.io/role"))
            .then_some(())
        },
    )
    .await;
    eventually(
        "a RoleLabelsRepaired event",
        Duration::from_secs(10),
        || async {
            let reasons = events(&admin, &ns, "cache").await;
            reasons
                .iter()
                .any(|(r, _)| r == "RoleLabelsRepaired")
                .then_some(())
        },
    )
    .await;
    let status = status_of_generation(&api, "cache").await.status.unwrap();
    assert_eq!(
        status.current_master.map(|m| m.pod).as_deref(),
        Some("cache-0")
    );

    input.shutdown().await;
    d.stop().await.unwrap();
}

/// The pod the `cache-master` Service's selector names, if any.
async fn selected_pod(services: &Api<Service>) -> Option<String> {
    let s = services.get("cache-master").await.ok()?;
    s.spec?
        .selector?
        .get("statefulset.kubernetes.io/pod-name")
        .cloned()
}
