//! From the advertised topology to index snapshots: one encoded snapshot
//! per group, shared by every subscriber.
//!
//! Snapshots are built from the advertised [`Topology`] only — the value
//! the Sentinel port answers from — so the two doors never disagree on a
//! master. A group's version is its revision
//! ([`GroupView::revision`](crate::topology::GroupView::revision)), which
//! the read side counts when what the group advertises changes (master,
//! epoch, states, failover step, replica set, priorities); offsets alone
//! make no new version, they are reported as of the last one. Nothing is
//! compared here: a group whose revision did not move keeps its encoded
//! entry, and only the groups that moved are encoded again.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use valkyrie_protocol::index::GroupSnapshot;

use crate::topology::{GroupView, Topology};

/// One group's published snapshot and its encoding.
#[derive(Debug)]
pub struct Entry {
    /// The snapshot.
    pub snapshot: GroupSnapshot,
    /// Its lines, encoded once for every subscriber.
    pub bytes: Bytes,
}

/// Everything the index port publishes.
#[derive(Debug, Default, Clone)]
pub struct Published {
    /// Groups by name.
    pub groups: BTreeMap<String, Arc<Entry>>,
    /// Counts publications, so that a subscriber can tell an older one
    /// from a newer.
    pub sequence: u64,
}

/// The snapshot of one advertised group, at its revision.
pub fn snapshot(name: &str, g: &GroupView) -> GroupSnapshot {
    g.snapshot(name)
}

/// The next publication after `prev` for `topology`: groups at the
/// revision they were published at keep their entry, the others are
/// encoded at their new revision. Returns `None` when nothing a subscriber
/// can see changed.
pub fn publish(prev: &Published, topology: &Topology) -> Option<Published> {
    let mut changed = prev.groups.keys().ne(topology.groups.keys());
    let mut groups = BTreeMap::new();
    for (name, view) in &topology.groups {
        let entry = match prev.groups.get(name) {
            Some(old) if old.snapshot.version == view.revision => old.clone(),
            _ => {
                changed = true;
                let snapshot = snapshot(name, view);
                let mut buf = BytesMut::new();
                snapshot.encode(&mut buf);
                Arc::new(Entry {
                    snapshot,
                    bytes: buf.freeze(),
                })
            }
        };
        groups.insert(name.clone(), entry);
    }
    changed.then(|| Published {
        groups,
        sequence: prev.sequence + 1,
    })
}
