//! The status computed from what the reconciler observed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::apps::v1::StatefulSetStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::core::Addr;
use crate::topology::InstanceView;

fn cr(generation: i64, status: serde_json::Value) -> ValkeyCluster {
    serde_json::from_value(json!({
        "apiVersion": "valkyrie.io/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": { "name": "cache", "namespace": "shop", "generation": generation },
        "spec": { "image": "valkey/valkey:8.1", "replicas": 3 },
        "status": status,
    }))
    .unwrap()
}

fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap())
}

fn view(host: &str, epoch: u64, down: bool) -> GroupView {
    let master = Addr::new(host, 6379);
    let mut details = InstanceView::new(master.clone());
    details.reports_master = !down;
    GroupView {
        revision: 1,
        config_epoch: epoch,
        master: master.clone(),
        master_down: down,
        failover_in_progress: false,
        replicas: Vec::new(),
        quorum: 2,
        down_after: 5000,
        failover_timeout: 60000,
        parallel_syncs: 1,
        odown: false,
        failover_state: None,
        masterless: false,
        at_risk: Vec::new(),
        fence: None,
        fence_sent: None,
        paused: false,
        managed: false,
        labels: Default::default(),
        master_details: details,
    }
}

fn sts(replicas: i32, ready: i32) -> StatefulSetStatus {
    StatefulSetStatus {
        replicas,
        ready_replicas: Some(ready),
        ..StatefulSetStatus::default()
    }
}

const POD1: &str = "cache-1.cache-headless.shop.svc.cluster.local";

#[test]
fn a_new_cr_is_pending_with_conditions_of_its_generation() {
    let vc = cr(3, json!({}));
    let names = Names::new("shop", "cache");
    let s = status(&Observed {
        vc: &vc,
        names: &names,
        valid: Ok(()),
        group: None,
        stateful_set: None,
        now: at(100),
        roll: None,
    });
    assert_eq!(s.phase, Some(Phase::Pending));
    assert_eq!(s.observed_generation, Some(3));
    assert_eq!(s.replicas, Some(0));
    assert_eq!(s.ready_replicas, Some(0));
    assert_eq!(
        s.selector.as_deref(),
        Some(
            "app.kubernetes.io/instance=cache,app.kubernetes.io/managed-by=valkyrie,app.kubernetes.io/name=valkey"
        )
    );
    let types: Vec<(&str, &str, Option<i64>)> = s
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str(), c.observed_generation))
        .collect();
    assert_eq!(
        types,
        vec![("Ready", "False", Some(3)), ("Valid", "True", Some(3))]
    );
    assert_eq!(s.current_master, None);
}

#[test]
fn the_master_and_epoch_come_from_the_topology_and_ready_pods_make_it_running() {
    let vc = cr(1, json!({}));
    let names = Names::new("shop", "cache");
    let g = view(POD1, 4, false);
    let s = status(&Observed {
        vc: &vc,
        names: &names,
        valid: Ok(()),
        group: Some(&g),
        stateful_set: Some(&sts(3, 3)),
        now: at(100),
        roll: None,
    });
    assert_eq!(s.phase, Some(Phase::Running));
    assert_eq!(
        s.current_master,
        Some(CurrentMaster {
            pod: "cache-1".into(),
            address: format!("{POD1}:6379")
        })
    );
    assert_eq!(s.config_epoch, Some(4));
    assert_eq!(s.conditions[0].status, "True");

    let degraded = status(&Observed {
        stateful_set: Some(&sts(3, 2)),
        ..Observed {
            vc: &vc,
            names: &names,
            valid: Ok(()),
            group: Some(&g),
            stateful_set: None,
            now: at(100),
            roll: None,
        }
    });
    assert_eq!(degraded.phase, Some(Phase::Degraded));
    let down = view(POD1, 4, true);
    let bootstrapping = status(&Observed {
        vc: &vc,
        names: &names,
        valid: Ok(()),
        group: Some(&down),
        stateful_set: Some(&sts(3, 1)),
        now: at(100),
        roll: None,
    });
    assert_eq!(bootstrapping.phase, Some(Phase::Bootstrapping));
}

#[test]
fn transition_times_move_only_when_a_condition_changes() {
    let names = Names::new("shop", "cache");
    let first = status(&Observed {
        vc: &cr(1, json!({})),
        names: &names,
        valid: Ok(()),
        group: None,
        stateful_set: None,
        now: at(100),
        roll: None,
    });
    let vc = cr(2, serde_json::to_value(&first).unwrap());
    let invalid = Invalid {
        reason: "TLSReplicationRequired".into(),
        message: "no TLS".into(),
    };
    let second = status(&Observed {
        vc: &vc,
        names: &names,
        valid: Err(invalid),
        group: None,
        stateful_set: None,
        now: at(200),
        roll: None,
    });
    assert_eq!(second.phase, Some(Phase::Failed));
    let ready = &second.conditions[0];
    let valid = &second.conditions[1];
    assert_eq!(
        (ready.status.as_str(), &ready.last_transition_time),
        ("False", &at(100))
    );
    assert_eq!(
        (
            valid.status.as_str(),
            valid.reason.as_str(),
            &valid.last_transition_time
        ),
        ("False", "TLSReplicationRequired", &at(200))
    );
    assert_eq!(valid.observed_generation, Some(2));
}

#[test]
fn without_a_group_the_last_master_stays() {
    let vc = cr(
        1,
        json!({ "currentMaster": { "pod": "cache-2", "address": "x:6379" }, "configEpoch": 7 }),
    );
    let names = Names::new("shop", "cache");
    let s = status(&Observed {
        vc: &vc,
        names: &names,
        valid: Ok(()),
        group: None,
        stateful_set: None,
        now: at(1),
        roll: None,
    });
    assert_eq!(s.current_master.map(|m| m.pod), Some("cache-2".into()));
    assert_eq!(s.config_epoch, Some(7));
    // A master that is not one of the CR's pods is named by its host.
    let g = view("10.0.0.9", 1, false);
    assert_eq!(current_master(&names, &g).pod, "10.0.0.9");
}
