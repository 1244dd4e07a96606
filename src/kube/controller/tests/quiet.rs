//! When the reconciler's switchovers may go: the pods' stillness
//! (`quiet.rs`).

use std::time::Duration;

use ::kube::runtime::reflector::ObjectRef;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use tokio::time::Instant;

use super::super::quiet::Quiet;
use crate::kube::render::names::LABEL_ROLE;

fn pod(name: &str, ready: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { LABEL_ROLE: "replica" } },
        "status": {
            "podIP": "10.0.0.1",
            "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }],
        },
    }))
    .unwrap()
}

#[test]
fn a_change_restarts_the_wait_and_stillness_ends_it() {
    let quiet = Quiet::default();
    let cr = ObjectRef::new("cache").within("shop");
    let q = Duration::from_millis(1100);
    let t0 = Instant::now();
    let pods = [pod("cache-0", true), pod("cache-1", false)];
    // First seen: as if it changed now.
    assert_eq!(quiet.remaining(&cr, &pods, q, t0), q);
    let t1 = t0 + Duration::from_millis(600);
    assert_eq!(
        quiet.remaining(&cr, &pods, q, t1),
        Duration::from_millis(500)
    );
    // cache-1 becomes Ready: the wait starts again.
    let ready = [pod("cache-0", true), pod("cache-1", true)];
    assert_eq!(quiet.remaining(&cr, &ready, q, t1), q);
    // The order pods are listed in is no change.
    let reversed = [pod("cache-1", true), pod("cache-0", true)];
    let t2 = t1 + q;
    assert_eq!(quiet.remaining(&cr, &reversed, q, t2), Duration::ZERO);
    // Nothing to wait for when the setting is zero.
    let mut gone = reversed.clone();
    gone[0].metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    assert_eq!(
        quiet.remaining(&cr, &gone, Duration::ZERO, t2),
        Duration::ZERO
    );
    // The deletion was a change.
    assert_eq!(quiet.remaining(&cr, &gone, q, t2), q);
}
