//! `VALKYRIE PAUSE SELECTOR` over the groups of `ValkeyCluster`s, against
//! a real kube-apiserver and etcd (`tests/support/kube.rs`; needs
//! `VALKYRIE_KUBE_BIN`, fails without it).
//!
//! Two resources labelled `tier: cache` and `tier: queue` become groups
//! carrying their labels; `PAUSE SELECTOR tier=cache` on the Sentinel port
//! pauses the first only. Relabelling the second (a change that leaves
//! the generation alone) reaches its group's labels, and the same
//! selector then takes both. The status API and its page carry the
//! labels too. No valkey-server is needed: a pause holds whether the pods
//! answer or not (they do not exist here).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::helpers::*;
use crate::support::http::http_get;
use crate::support::kube::{admin_client, namespace};
use crate::support::{TempDir, daemon_config, free_port};

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use valkyrie::daemon::Daemon;
use valkyrie::kube::crd::ValkeyCluster;
use valkyrie_protocol::Frame;

/// Group `group`'s labels and pause, as its view shows them.
fn view(d: &Daemon, group: &str) -> Option<(BTreeMap<String, String>, bool)> {
    let t = d.handle.topology.borrow();
    let g = t.groups.get(group)?;
    Some(((*g.labels).clone(), g.paused))
}

/// Group `group`'s labels as the status API's groups document gives them.
fn api_labels(port: u16, group: &str) -> serde_json::Value {
    let (code, body) = http_get(port, "/api/v1/groups").unwrap();
    assert_eq!(code, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == group)
        .map(|g| g["labels"].clone())
        .unwrap_or_default()
}

fn labels(tier: &str) -> BTreeMap<String, String> {
    [("tier".to_string(), tier.to_string())].into()
}

fn bulks(names: &[&str]) -> Frame {
    Frame::Array(names.iter().map(|n| Frame::bulk(n.to_string())).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_selector_pauses_the_groups_of_the_matching_resources() {
    let admin = admin_client().await;
    install_crd(&admin).await;
    let ns = namespace("selector").await;
    let tmp = TempDir::new("kube-selector");
    valkyrie::telemetry::init_logging("warning", false);
    let mut config = daemon_config(&tmp.0, Vec::new());
    let status_port = free_port();
    config.admin_port = status_port;
    let d = Daemon::start(config).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    let input = input(&d, admin.clone(), &ns, &ns, "valkyrie-0").await;

    let api: Api<ValkeyCluster> = Api::namespaced(admin.clone(), &ns);
    for (name, tier) in [("cache", "cache"), ("queue", "queue")] {
        let mut vc = cr(name, 1);
        vc.metadata.labels = Some(labels(tier));
        api.create(&PostParams::default(), &vc).await.unwrap();
    }
    let (cache, queue) = (format!("{ns}.cache"), format!("{ns}.queue"));
    for (group, tier) in [(&cache, "cache"), (&queue, "queue")] {
        let shown = eventually(
            "the group with its labels",
            Duration::from_secs(20),
            || async { view(&d, group).filter(|(l, _)| *l == labels(tier)) },
        )
        .await;
        assert!(!shown.1, "{group} paused before anyone asked");
        let shown = tokio::task::spawn_blocking({
            let group = group.clone();
            move || api_labels(status_port, &group)
        })
        .await
        .unwrap();
        assert_eq!(shown, json!({ "tier": tier }), "the status API's labels");
    }

    let reply = sentinel(sp, &["VALKYRIE", "PAUSE", "SELECTOR", "tier=cache"]).await;
    assert_eq!(reply, bulks(&[&cache]));
    eventually("cache paused", Duration::from_secs(5), || async {
        view(&d, &cache).filter(|(_, paused)| *paused)
    })
    .await;
    assert_eq!(view(&d, &queue).map(|v| v.1), Some(false));

    // A label change: no new generation, still applied.
    let generation = api.get("queue").await.unwrap().metadata.generation;
    api.patch(
        "queue",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "tier": "cache" } } })),
    )
    .await
    .unwrap();
    assert_eq!(
        api.get("queue").await.unwrap().metadata.generation,
        generation
    );
    eventually("queue relabelled", Duration::from_secs(20), || async {
        view(&d, &queue).filter(|(l, _)| *l == labels("cache"))
    })
    .await;
    let reply = sentinel(sp, &["VALKYRIE", "PAUSE", "selector", "tier in (cache)"]).await;
    assert_eq!(reply, bulks(&[&cache, &queue]));
    eventually("queue paused", Duration::from_secs(5), || async {
        view(&d, &queue).filter(|(_, paused)| *paused)
    })
    .await;
    let reply = sentinel(sp, &["VALKYRIE", "RESUME", "SELECTOR", "tier=queue"]).await;
    assert_eq!(
        reply,
        Frame::error("ERR no group matches the label selector \"tier=queue\"")
    );

    input.shutdown().await;
    d.stop().await.unwrap();
}
