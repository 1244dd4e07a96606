//! Revisions: when a group's view counts as a change, and that a new
//! revision alone reaches an index subscriber; label selectors
//! (`selection.rs`) and resolving selections (`resolve.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use valkyrie_protocol::index::{GroupSnapshot, IndexClient, Update};

use crate::core::Addr;
use crate::topology::{GroupView, InstanceView, Revisions, Topology};

mod resolve;
mod selection;

fn instance(port: u16) -> InstanceView {
    InstanceView {
        offset: 10,
        ..InstanceView::new(Addr::new("127.0.0.1", port))
    }
}

/// A group at revision 0: its master and replicas on loopback, offset 10.
pub(crate) fn group(epoch: u64, master: u16, replicas: &[u16]) -> GroupView {
    GroupView {
        revision: 0,
        config_epoch: epoch,
        master: Addr::new("127.0.0.1", master),
        master_down: false,
        failover_in_progress: false,
        replicas: replicas.iter().map(|&p| instance(p)).collect(),
        quorum: 1,
        down_after: 1000,
        failover_timeout: 10_000,
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
        master_details: instance(master),
    }
}

/// Stamps `next` after `old`; returns it and whether it was a new revision.
fn stamp(r: &mut Revisions, old: Option<&GroupView>, mut next: GroupView) -> (GroupView, bool) {
    let new = r.stamp("a", old, &mut next);
    (next, new)
}

#[test]
fn revisions_count_advertised_changes_only() {
    let mut r = Revisions::default();
    let (a, new) = stamp(&mut r, None, group(0, 7000, &[7001, 7002]));
    assert_eq!((a.revision, new), (1, true));
    // The same content: the same revision.
    let (same, new) = stamp(&mut r, Some(&a), group(0, 7000, &[7001, 7002]));
    assert_eq!((same.revision, new), (1, false));
    // Offsets and ages alone: no new revision either.
    let mut moved = group(0, 7000, &[7001, 7002]);
    moved.replicas[0].offset = 999;
    moved.replicas[1].last_ok = 5_000;
    let (moved, new) = stamp(&mut r, Some(&a), moved);
    assert_eq!((moved.revision, new), (1, false));
    // A replica goes down.
    let mut down = group(0, 7000, &[7001, 7002]);
    down.replicas[1].down = true;
    let (down, new) = stamp(&mut r, Some(&moved), down);
    assert_eq!((down.revision, new), (2, true));
    // A failover step, then a new master and epoch.
    let mut failing = down.clone();
    failing.failover_in_progress = true;
    failing.failover_state = Some("wait_promotion");
    let (failing, new) = stamp(&mut r, Some(&down), failing);
    assert_eq!((failing.revision, new), (3, true));
    let (failed, new) = stamp(&mut r, Some(&failing), group(1, 7001, &[7002]));
    assert_eq!((failed.revision, new), (4, true));
    // Priorities count; the master's own flags too.
    let mut lower = failed.clone();
    lower.replicas[0].priority = 0;
    assert!(stamp(&mut r, Some(&failed), lower).1);
    let mut sdown = failed.clone();
    sdown.master_down = true;
    assert!(stamp(&mut r, Some(&failed), sdown).1);
}

#[test]
fn a_group_monitored_again_goes_on_from_its_last_revision() {
    let mut r = Revisions::default();
    let (a, _) = stamp(&mut r, None, group(0, 7000, &[]));
    let (b, _) = stamp(&mut r, Some(&a), group(1, 7001, &[]));
    assert_eq!(b.revision, 2);
    // Removed: no view before the next one.
    let (again, new) = stamp(&mut r, None, group(1, 7001, &[]));
    assert_eq!((again.revision, new), (3, true));
    // Another name has a count of its own.
    let mut other = group(0, 8000, &[]);
    assert!(r.stamp("b", None, &mut other));
    assert_eq!(other.revision, 1);
}

fn failing_over(phase: &'static str) -> GroupView {
    GroupView {
        master_down: true,
        failover_in_progress: true,
        odown: true,
        failover_state: Some(phase),
        masterless: false,
        ..group(1, 7000, &[7001])
    }
}

fn topology(g: GroupView) -> Arc<Topology> {
    Arc::new(Topology {
        groups: [("g".to_string(), Arc::new(g))].into_iter().collect(),
        ..Topology::default()
    })
}

async fn next_snapshot(c: &mut IndexClient) -> GroupSnapshot {
    let update = tokio::time::timeout(Duration::from_secs(5), c.next())
        .await
        .expect("no snapshot pushed in time")
        .unwrap();
    match update {
        Update::Snapshot(s) => s,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_failover_phase_change_alone_reaches_index_subscribers() {
    let mut r = Revisions::default();
    let (first, _) = stamp(&mut r, None, failing_over("send_slaveof_noone"));
    let (tx, rx) = watch::channel(topology(first.clone()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        crate::index::serve(
            listener,
            rx,
            "0123456789abcdef0123456789abcdef01234567",
            crate::index::Limits::default(),
            Arc::default(),
        )
        .await;
    });
    let mut c = IndexClient::connect(addr).await.unwrap();
    c.watch(&["g"]).await.unwrap();
    let before = next_snapshot(&mut c).await;
    assert_eq!(
        before.master.failover.as_deref(),
        Some("send_slaveof_noone")
    );

    // Only the phase changes: same master, epoch, states and replicas.
    let (second, new) = stamp(&mut r, Some(&first), failing_over("wait_promotion"));
    assert!(new);
    tx.send_replace(topology(second));
    let after = next_snapshot(&mut c).await;
    assert_eq!(after.master.failover.as_deref(), Some("wait_promotion"));
    assert!(after.version > before.version, "{before:?} then {after:?}");
    server.abort();
}
