//! Groups owned by custom resources, through the runtime's managed-group
//! seam (what the Kubernetes input calls), with a real daemon, a real
//! valkey-server and the Sentinel port: created and updated only by their
//! owner, `SENTINEL REMOVE`/`SET` refused with a clear error, kept with
//! their owner across a restart, removed when their resource is gone, and
//! never mixed with groups sentinel.conf defines; their resource's labels
//! select them (`VALKYRIE PAUSE SELECTOR`), a relabel and a restart
//! included.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use support::*;
use valkyrie::config::{GroupConfig, GroupOwner};
use valkyrie::daemon::Daemon;
use valkyrie::runtime::Refusal;
use valkyrie_protocol::Frame;

const NAME: &str = "shop.cache";

fn managed(master: u16, quorum: u32) -> GroupConfig {
    let mut g = GroupConfig::new(NAME, "127.0.0.1", master, quorum);
    g.down_after = Duration::from_millis(1000);
    g.failover_timeout = Duration::from_millis(10_000);
    g.owner = GroupOwner::Kubernetes {
        namespace: "shop".into(),
        name: "cache".into(),
        labels: Default::default(),
    };
    g
}

fn error(f: Frame) -> String {
    match f {
        Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

async fn sentinel(port: u16, args: &'static [&'static str]) -> Frame {
    tokio::task::spawn_blocking(move || call(port, args))
        .await
        .unwrap()
}

async fn quorum(port: u16) -> Option<String> {
    tokio::task::spawn_blocking(move || master_field_of(port, NAME, "quorum"))
        .await
        .unwrap()
}

/// Field `field` of `SENTINEL MASTER <name>`.
fn master_field_of(port: u16, name: &str, field: &str) -> Option<String> {
    match try_call(port, &["SENTINEL", "MASTER", name]).ok()? {
        Frame::Array(kv) => kv
            .chunks(2)
            .find(|p| p[0].as_bytes().map(|b| &b[..]) == Some(field.as_bytes()))
            .and_then(|p| p[1].as_bytes())
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_groups_belong_to_their_resource() {
    let tmp = TempDir::new("managed-groups");
    let server = Server::start(&valkey_server(), &tmp.0, free_port(), None);
    let config = daemon_config(&tmp.0, vec![fast_group(server.port)]);
    let d = Daemon::start(config.clone()).await.unwrap();
    let sp = d.sentinel_addrs[0].port();

    // Created by its owner, monitored like any group.
    d.handle
        .apply_managed(managed(server.port, 1))
        .await
        .unwrap();
    assert_eq!(quorum(sp).await.as_deref(), Some("1"));

    // The Sentinel commands that would change or remove it are refused.
    let want = "ERR group is managed by Kubernetes (valkeyclusters.valkyrie.io shop/cache): \
                change the resource instead";
    assert_eq!(
        error(sentinel(sp, &["SENTINEL", "REMOVE", NAME]).await),
        want
    );
    assert_eq!(
        error(sentinel(sp, &["SENTINEL", "SET", NAME, "quorum", "3"]).await),
        want
    );
    assert_eq!(
        error(sentinel(sp, &["SENTINEL", "MONITOR", NAME, "127.0.0.1", "6379", "2"]).await),
        "ERR Duplicate master name."
    );
    assert_eq!(quorum(sp).await.as_deref(), Some("1"));

    // Its owner updates it.
    d.handle
        .apply_managed(managed(server.port, 2))
        .await
        .unwrap();
    assert_eq!(quorum(sp).await.as_deref(), Some("2"));

    // A resource never takes over a group sentinel.conf defines, and the
    // Sentinel commands still work on that one.
    let mut clash = managed(server.port, 1);
    clash.name = "mymaster".into();
    assert_eq!(
        d.handle.apply_managed(clash).await,
        Err(Refusal::NotManaged("mymaster".into()))
    );
    assert_eq!(
        sentinel(sp, &["SENTINEL", "SET", "mymaster", "quorum", "1"]).await,
        Frame::simple("OK")
    );

    // A restart keeps it, with its owner.
    d.stop().await.unwrap();
    let d = Daemon::start(config).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    assert_eq!(quorum(sp).await.as_deref(), Some("2"));
    assert!(error(sentinel(sp, &["SENTINEL", "REMOVE", NAME]).await).contains("shop/cache"));

    // Its resource is gone: removed; sentinel.conf's group stays.
    let removed = d.handle.retain_managed(BTreeSet::new()).await.unwrap();
    assert_eq!(removed, vec![NAME.to_string()]);
    assert_eq!(quorum(sp).await, None);
    assert_eq!(
        tokio::task::spawn_blocking(move || advertised_master(sp))
            .await
            .unwrap(),
        Some(server.port)
    );
    d.stop().await.unwrap();
}

/// The labels and the flag the group's view shows (`None`: no such group).
fn labels_of(d: &Daemon, name: &str) -> Option<(bool, Vec<(String, String)>)> {
    let t = d.handle.topology.borrow();
    let g = t.groups.get(name)?;
    Some((
        g.managed,
        g.labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ))
}

fn labelled(master: u16, pairs: &[(&str, &str)]) -> GroupConfig {
    let mut g = managed(master, 1);
    if let GroupOwner::Kubernetes { labels, .. } = &mut g.owner {
        *labels = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }
    g
}

async fn paused_within(d: &Daemon, name: &str, paused: bool) {
    let shown = || d.handle.topology.borrow().groups[name].paused == paused;
    eventually(
        "the pause shown",
        Duration::from_secs(2),
        Duration::from_millis(10),
        || async { shown().then_some(()) },
    )
    .await;
}

fn pair(k: &str, v: &str) -> (String, String) {
    (k.to_string(), v.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resources_labels_select_its_group_and_follow_a_relabel_and_a_restart() {
    let tmp = TempDir::new("managed-labels");
    let server = Server::start(&valkey_server(), &tmp.0, free_port(), None);
    let config = daemon_config(&tmp.0, vec![fast_group(server.port)]);
    let d = Daemon::start(config.clone()).await.unwrap();
    let sp = d.sentinel_addrs[0].port();

    d.handle
        .apply_managed(labelled(server.port, &[("tier", "cache")]))
        .await
        .unwrap();
    assert_eq!(
        labels_of(&d, NAME),
        Some((true, vec![pair("tier", "cache")]))
    );
    // sentinel.conf's group: no labels, never selected.
    assert_eq!(labels_of(&d, "mymaster"), Some((false, vec![])));
    let paused = sentinel(sp, &["VALKYRIE", "PAUSE", "selector", "!canary"]).await;
    assert_eq!(paused, Frame::Array(vec![Frame::bulk(NAME)]));
    // The view shows the pause within its refresh period.
    paused_within(&d, NAME, true).await;
    assert!(!d.handle.topology.borrow().groups["mymaster"].paused);
    assert_eq!(
        error(sentinel(sp, &["VALKYRIE", "RESUME", "SELECTOR", "tier=queue"]).await),
        "ERR no group matches the label selector \"tier=queue\""
    );

    // A change of labels alone reaches the view at once.
    d.handle
        .apply_managed(labelled(server.port, &[("tier", "queue")]))
        .await
        .unwrap();
    assert_eq!(
        labels_of(&d, NAME),
        Some((true, vec![pair("tier", "queue")]))
    );
    assert_eq!(
        sentinel(sp, &["VALKYRIE", "RESUME", "SELECTOR", "tier in (queue)"]).await,
        Frame::Array(vec![Frame::bulk(NAME)])
    );
    paused_within(&d, NAME, false).await;

    // The state file keeps them: selected from the start after a restart.
    d.stop().await.unwrap();
    let d = Daemon::start(config).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    assert_eq!(
        labels_of(&d, NAME),
        Some((true, vec![pair("tier", "queue")]))
    );
    assert_eq!(
        sentinel(sp, &["VALKYRIE", "PAUSE", "SELECTOR", "tier=queue"]).await,
        Frame::Array(vec![Frame::bulk(NAME)])
    );

    // Gone with its resource: a group of that name would have none.
    d.handle.retain_managed(BTreeSet::new()).await.unwrap();
    assert_eq!(labels_of(&d, NAME), None);
    d.stop().await.unwrap();
}
