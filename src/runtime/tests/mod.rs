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

mod promotion;

fn failing_over(phase: &'static str) -> Topology {
    let master = Addr::new("127.0.0.1", 7000);
    let group = GroupView {
        config_epoch: 1,
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
        at_risk: Vec::new(),
        fence: None,
        master_details: InstanceView::new(master),
    };
    Topology {
        peer_links: 0,
        tilt: false,
        tilt_since: None,
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

/// Which state writes go together in one write: each group's first
/// `Persist`, unless an output of its own comes first, up to the first
/// daemon-wide output.
#[test]
fn persists_of_different_groups_are_written_together_never_ahead_of_their_own_group() {
    use super::execute::hoistable_persists;
    use crate::core::{Command, GroupState, Output};
    let persist = |g: &str| Output::Persist {
        group: g.into(),
        state: GroupState {
            epoch: 0,
            config_epoch: 0,
            master: Addr::new("127.0.0.1", 6379),
            demoted: Vec::new(),
            master_lost: None,
            failover: None,
            leader: None,
            leader_epoch: 0,
            known_peers: Vec::new(),
            peered: false,
            replicas: Vec::new(),
        },
    };
    let send = |g: &str| Output::Send {
        group: g.into(),
        to: Addr::new("127.0.0.1", 6380),
        token: 1,
        command: Command::ReplicaOfNoOne,
    };
    // A tick that starts three failovers: one write for the three.
    let tick = [
        persist("a"),
        send("a"),
        persist("b"),
        send("b"),
        persist("c"),
        send("c"),
    ];
    assert_eq!(hoistable_persists(&tick), [0, 2, 4]);
    // A group's second write, or one after its own command, stays put.
    let own = [
        persist("a"),
        send("a"),
        persist("a"),
        send("b"),
        persist("b"),
    ];
    assert_eq!(hoistable_persists(&own), [0]);
    // Nothing goes ahead of a daemon-wide output.
    let wide = [persist("a"), Output::Peers, persist("b")];
    assert_eq!(hoistable_persists(&wide), [0]);
}
