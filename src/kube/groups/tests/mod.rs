//! The group a CR becomes: names, initial master, timers, quorum, owner.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;

use super::*;

mod retiring;

fn cr(extra: serde_json::Value) -> ValkeyCluster {
    let mut v = json!({
        "apiVersion": "valkyrie.io/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": { "name": "cache", "namespace": "shop", "uid": "u-1", "generation": 1 },
        "spec": { "image": "valkey/valkey:8.1" },
    });
    if let (Some(base), Some(more)) = (v.as_object_mut(), extra.as_object()) {
        for (k, val) in more {
            if k == "spec" {
                for (sk, sv) in val.as_object().unwrap() {
                    base["spec"][sk] = sv.clone();
                }
            } else {
                base.insert(k.clone(), val.clone());
            }
        }
    }
    serde_json::from_value(v).unwrap()
}

const POD0: &str = "cache-0.cache-headless.shop.svc.cluster.local";
const POD1: &str = "cache-1.cache-headless.shop.svc.cluster.local";
const POD2: &str = "cache-2.cache-headless.shop.svc.cluster.local";

#[test]
fn a_new_cr_starts_at_pod_0_by_its_dns_name_with_the_others_as_replicas() {
    let g = group_config(&cr(json!({})), &GroupSettings::default(), None, None).unwrap();
    assert_eq!(g.name, "shop.cache");
    assert_eq!((g.host.as_str(), g.port), (POD0, 6379));
    assert_eq!(
        g.known_replicas,
        vec![(POD1.to_string(), 6379), (POD2.to_string(), 6379)]
    );
    assert_eq!(g.quorum, 2);
    assert_eq!(g.down_after, Duration::from_secs(5));
    assert_eq!(g.failover_timeout, Duration::from_secs(60));
    assert_eq!(g.parallel_syncs, 1);
    assert_eq!(g.auth_pass, None);
    // A CR is a configuration Valkyrie writes: the write fence is on.
    assert_eq!(
        g.write_fence,
        crate::core::WriteFence {
            mode: crate::core::FenceMode::Auto,
            lag_secs: 1
        }
    );
    let strict = group_config(
        &cr(json!({"spec": {"monitoring": {"writeFence": "strict", "writeFenceLagSeconds": 3}}})),
        &GroupSettings::default(),
        None,
        None,
    )
    .unwrap();
    assert_eq!(strict.write_fence.mode, crate::core::FenceMode::Strict);
    assert_eq!(strict.write_fence.lag_secs, 3);
    assert_eq!(
        g.owner,
        GroupOwner::Kubernetes {
            namespace: "shop".into(),
            name: "cache".into(),
            labels: Default::default(),
        }
    );
}

#[test]
fn the_crs_labels_are_the_groups_and_no_part_of_who_owns_it() {
    let labelled = |labels: serde_json::Value| {
        let metadata = json!({ "name": "cache", "namespace": "shop", "labels": labels });
        group_config(
            &cr(json!({ "metadata": metadata })),
            &GroupSettings::default(),
            None,
            None,
        )
        .unwrap()
    };
    let cache = labelled(json!({ "tier": "cache", "team": "shop" }));
    let want: std::collections::BTreeMap<String, String> = [("team", "shop"), ("tier", "cache")]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
    assert_eq!(cache.owner.labels(), Some(&want));
    // Relabelled: the same owner, other labels.
    let queue = labelled(json!({ "tier": "queue" }));
    assert!(cache.owner.same_resource(&queue.owner));
    assert_ne!(cache.owner, queue.owner);
    assert!(!cache.owner.same_resource(&GroupOwner::Config));
    assert_eq!(GroupOwner::Config.labels(), None);
}

#[test]
fn the_status_master_wins_over_the_config_map_which_wins_over_pod_0() {
    let settings = GroupSettings {
        quorum: 1,
        cluster_domain: "example.org".into(),
        ..GroupSettings::default()
    };
    let from_cm = group_config(&cr(json!({})), &settings, Some("cache-2.x:6380"), None).unwrap();
    assert_eq!((from_cm.host.as_str(), from_cm.port), ("cache-2.x", 6380));
    assert_eq!(from_cm.quorum, 1);
    assert_eq!(
        from_cm.known_replicas.len(),
        3,
        "cache-2.x is not a pod's name"
    );

    let with_status = cr(json!({ "status": { "currentMaster": {
        "pod": "cache-1",
        "address": "cache-1.cache-headless.shop.svc.example.org:6379" } } }));
    let g = group_config(&with_status, &settings, Some("cache-2.x:6380"), None).unwrap();
    assert_eq!(g.host, "cache-1.cache-headless.shop.svc.example.org");
    assert!(g.known_replicas.iter().all(|(h, _)| h != &g.host));
    assert_eq!(g.known_replicas.len(), 2);

    // An address that does not parse is not used.
    let g = group_config(&cr(json!({})), &settings, Some("no-port"), None).unwrap();
    assert_eq!(g.host, "cache-0.cache-headless.shop.svc.example.org");
}

#[test]
fn monitoring_auth_and_master_name_come_from_the_spec() {
    let vc = cr(json!({ "spec": {
        "replicas": 5,
        "monitoring": { "masterName": "orders", "downAfterMilliseconds": 1500,
                        "failoverTimeoutMilliseconds": 9000, "parallelSyncs": 2 },
        "auth": { "monitorUser": "sentinel",
                  "monitorPasswordSecretRef": { "name": "mon", "key": "pw" },
                  "passwordSecretRef": { "name": "main", "key": "password" } },
    }}));
    let g = group_config(
        &vc,
        &GroupSettings::default(),
        None,
        Some(Secret::new("s3cret")),
    )
    .unwrap();
    assert_eq!(g.name, "orders");
    assert_eq!(g.down_after, Duration::from_millis(1500));
    assert_eq!(g.failover_timeout, Duration::from_millis(9000));
    assert_eq!(g.parallel_syncs, 2);
    assert_eq!(g.known_replicas.len(), 4);
    assert_eq!(g.auth_user.as_deref(), Some("sentinel"));
    assert_eq!(g.auth_pass.as_ref().map(Secret::expose), Some("s3cret"));
    assert!(
        !format!("{g:?}").contains("s3cret"),
        "a password is never printed"
    );
    assert_eq!(
        password_ref(&vc),
        SecretKeyRef {
            name: "mon".into(),
            key: "pw".into()
        }
    );
}

#[test]
fn the_password_is_the_monitor_one_else_the_default_users_else_the_generated_one() {
    let main = cr(json!({ "spec": { "auth": {
        "passwordSecretRef": { "name": "main", "key": "password" } } } }));
    assert_eq!(password_ref(&main).name, "main");
    let generated = password_ref(&cr(json!({})));
    assert_eq!(
        (generated.name.as_str(), generated.key.as_str()),
        ("cache-auth", "password")
    );
}

#[test]
fn tls_is_valid_with_tls_replication_and_refused_without() {
    let on = cr(json!({ "spec": { "tls": { "enabled": true, "secretName": "t" } } }));
    assert!(validate(&on).is_ok());
    let plain_replication = cr(json!({ "spec": { "tls": {
        "enabled": true, "secretName": "t", "replication": false
    } } }));
    let e = group_config(&plain_replication, &GroupSettings::default(), None, None).unwrap_err();
    assert_eq!(e.event_reason(), "TLSReplicationRequired");
    let off = cr(json!({ "spec": { "tls": { "enabled": false, "replication": false } } }));
    assert!(validate(&off).is_ok());
}

#[test]
fn addresses_parse_as_host_and_port() {
    assert_eq!(parse_addr("a.b:6379"), Some(("a.b".into(), 6379)));
    assert_eq!(parse_addr("a.b"), None);
    assert_eq!(parse_addr(":6379"), None);
    assert_eq!(parse_addr("a:0"), None);
    assert_eq!(parse_addr("a:x"), None);
}
