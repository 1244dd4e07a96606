//! The publisher: when a group gets a new version, and what it carries.

mod tier;

use std::sync::Arc;

use valkyrie_protocol::index::{MasterState, ReplicaState};

use crate::index::publish::{Published, publish};
use crate::topology::{GroupView, Topology};

/// The read side's fixture, at revision 1.
fn group(epoch: u64, master: u16, replicas: &[u16]) -> GroupView {
    GroupView {
        revision: 1,
        ..crate::topology::tests::group(epoch, master, replicas)
    }
}

fn topo(groups: &[(&str, GroupView)]) -> Topology {
    Topology {
        peer_links: 0,
        tilt: false,
        tilt_since: None,
        groups: groups
            .iter()
            .map(|(n, g)| (n.to_string(), Arc::new(g.clone())))
            .collect(),
        readiness: Default::default(),
    }
}

fn version(p: &Published, name: &str) -> u64 {
    p.groups[name].snapshot.version
}

#[test]
fn versions_are_revisions_and_only_new_ones_are_encoded() {
    let a = group(0, 7000, &[7001, 7002]);
    let p1 = publish(&Published::default(), &topo(&[("a", a.clone())])).unwrap();
    assert_eq!(version(&p1, "a"), 1);
    // The same revision: nothing to publish, whatever else moved.
    let mut moved = a.clone();
    moved.replicas[0].offset = 999;
    assert!(publish(&p1, &topo(&[("a", moved)])).is_none());
    // A new group: a new publication, the same entry for the others.
    let b = group(3, 8000, &[]);
    let p2 = publish(&p1, &topo(&[("a", a.clone()), ("b", b.clone())])).unwrap();
    assert_eq!((version(&p2, "a"), version(&p2, "b")), (1, 1));
    assert_eq!(p2.sequence, p1.sequence + 1);
    assert!(Arc::ptr_eq(&p1.groups["a"], &p2.groups["a"]));
    // A new revision is encoded again, the others are shared.
    let mut down = a.clone();
    down.replicas[1].down = true;
    down.revision = 2;
    let p3 = publish(&p2, &topo(&[("a", down), ("b", b.clone())])).unwrap();
    assert_eq!(version(&p3, "a"), 2);
    assert_eq!(
        p3.groups["a"].snapshot.replicas[1].state,
        ReplicaState::Down
    );
    assert!(Arc::ptr_eq(&p2.groups["b"], &p3.groups["b"]));
    // A failover: new master and epoch, in the snapshot and its bytes.
    let mut failed = group(1, 7001, &[7002]);
    failed.revision = 3;
    let p4 = publish(&p3, &topo(&[("a", failed), ("b", b.clone())])).unwrap();
    let s = &p4.groups["a"].snapshot;
    assert_eq!((s.epoch, s.version, s.master.port), (1, 3, 7001));
    assert_eq!(s.master.state, MasterState::Up);
    let text = String::from_utf8(p4.groups["a"].bytes.to_vec()).unwrap();
    assert!(
        text.starts_with("SNAPSHOT a epoch=1 version=3\nMASTER 127.0.0.1 7001 state=up"),
        "{text}"
    );
    // Removed: a publication without it.
    let p5 = publish(&p4, &topo(&[("b", b)])).unwrap();
    assert!(!p5.groups.contains_key("a"));
}

#[test]
fn master_and_replica_states() {
    let mut g = group(2, 7000, &[7001, 7002]);
    g.master_down = true;
    g.failover_in_progress = true;
    g.failover_state = Some("wait_promotion");
    g.replicas[0].disconnected = true;
    g.replicas[1].priority = 0;
    let s = crate::index::publish::snapshot("g", &g);
    assert_eq!(s.master.state, MasterState::Sdown);
    assert_eq!(s.master.failover.as_deref(), Some("wait_promotion"));
    assert_eq!(s.replicas[0].state, ReplicaState::Disconnected);
    assert_eq!(s.replicas[1].priority, 0);
    g.odown = true;
    assert_eq!(
        crate::index::publish::snapshot("g", &g).master.state,
        MasterState::Odown
    );
}
