//! The rule that decides when the runtime wakes the index publisher, end
//! to end: a change the index shows reaches a subscriber by itself.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use valkyrie_protocol::index::{GroupSnapshot, IndexClient, Update};

use super::view::{advertise, advertised_differs};
use super::{GroupView, InstanceView, Topology};
use crate::core::Addr;

fn failing_over(phase: &'static str) -> Topology {
    let master = Addr::new("127.0.0.1", 7000);
    let group = GroupView {
        epoch: 1,
        master: master.clone(),
        master_down: true,
        failover_in_progress: true,
        replicas: vec![InstanceView::new(Addr::new("127.0.0.1", 7001))],
        quorum: 1,
        down_after: 1000,
        failover_timeout: 10_000,
        parallel_syncs: 1,
        odown: true,
        failover_state: Some(phase),
        master_details: InstanceView::new(master),
    };
    Topology {
        tilt: false,
        groups: [("g".to_string(), group)].into_iter().collect(),
    }
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

#[test]
fn what_the_index_does_not_show_is_no_change() {
    let a = failing_over("wait_promotion");
    let mut b = a.clone();
    let g = b.groups.get_mut("g").unwrap();
    g.replicas[0].offset = 999;
    g.replicas[0].last_ok = 5;
    g.master_details.last_ok = 5;
    assert!(!advertised_differs(&a, &b));
    assert!(advertised_differs(&a, &failing_over("reconf_slaves")));
}

#[tokio::test]
async fn a_failover_phase_change_alone_reaches_index_subscribers() {
    let first = failing_over("send_slaveof_noone");
    let (tx, rx) = watch::channel(Arc::new(first.clone()));
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
    let second = failing_over("wait_promotion");
    assert!(advertised_differs(&first, &second));
    advertise(&tx, Arc::new(second));
    let after = next_snapshot(&mut c).await;
    assert_eq!(after.master.failover.as_deref(), Some("wait_promotion"));
    assert!(after.version > before.version, "{before:?} then {after:?}");
    server.abort();
}
