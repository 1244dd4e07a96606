//! The retiring pods a CR's status names, read as hostile input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::retiring::{MAX_RETIRING, retiring};
use crate::core::Addr;
use crate::kube::crd::ValkeyCluster;
use serde_json::json;
use std::collections::BTreeSet;

fn vc(pods: serde_json::Value) -> ValkeyCluster {
    serde_json::from_value(json!({
        "apiVersion": "valkyrie.io/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": { "name": "cache", "namespace": "ns" },
        "spec": { "image": "valkey/valkey:8.1", "replicas": 3 },
        "status": { "retiringPods": pods },
    }))
    .unwrap()
}

fn hosts(set: &BTreeSet<Addr>) -> Vec<String> {
    set.iter().map(|a| format!("{a}")).collect()
}

#[test]
fn the_named_pods_of_this_cr_are_its_groups_addresses() {
    let got = retiring(&vc(json!(["cache-2", "cache-0"])), "cluster.local");
    assert_eq!(
        hosts(&got),
        [
            "cache-0.cache-headless.ns.svc.cluster.local:6379",
            "cache-2.cache-headless.ns.svc.cluster.local:6379",
        ]
    );
}

#[test]
fn anything_else_is_left_out() {
    let hostile = json!([
        "other-1",
        "cache-",
        "cache-01",
        "cache-+1",
        "cache--1",
        "cache-1x",
        "cache-64",
        "cache-4294967296",
        "cache-1.evil",
        "cache",
        "",
        "cache-1 "
    ]);
    assert!(retiring(&vc(hostile), "cluster.local").is_empty());
    let none = serde_json::from_value::<ValkeyCluster>(json!({
        "apiVersion": "valkyrie.io/v1alpha1", "kind": "ValkeyCluster",
        "metadata": { "name": "cache", "namespace": "ns" },
        "spec": { "image": "valkey/valkey:8.1" },
    }))
    .unwrap();
    assert!(retiring(&none, "cluster.local").is_empty());
}

#[test]
fn at_most_fifteen_names_are_read() {
    let many: Vec<String> = (0..40).map(|n| format!("cache-{n}")).collect();
    let got = retiring(&vc(json!(many)), "cluster.local");
    assert_eq!(got.len(), MAX_RETIRING);
}
