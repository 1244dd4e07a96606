//! From the advertised topology to index snapshots: one encoded snapshot
//! per group, shared by every subscriber, and the per-group version
//! counter.
//!
//! Snapshots are built from the runtime's advertised [`Topology`] only —
//! the value the Sentinel port answers from — so the two doors never
//! disagree on a master. A group's version is bumped when what it
//! advertises changes ([`GroupSnapshot::same_content`]: master, epoch,
//! states, failover step, replica set, priorities); offsets alone do not
//! make a new version, they are reported as of the last one. The runtime
//! wakes the publisher by the same rule (`runtime::advertised_differs`),
//! so no change a subscriber would see waits for an unrelated one.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use valkyrie_protocol::index::GroupSnapshot;

use crate::runtime::{GroupView, Topology};

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
    /// The last version given to each name, kept after a group is removed
    /// so that a group monitored again continues its sequence.
    counters: BTreeMap<String, u64>,
}

/// The snapshot of one advertised group (version 0; [`publish`] sets it).
pub fn snapshot(name: &str, g: &GroupView) -> GroupSnapshot {
    g.snapshot(name)
}

/// The next publication after `prev` for `topology`: unchanged groups keep
/// their entry (and version), changed or new ones get the next version.
/// Returns `None` when nothing a subscriber can see changed.
pub fn publish(prev: &Published, topology: &Topology) -> Option<Published> {
    let mut next = Published {
        groups: BTreeMap::new(),
        sequence: prev.sequence + 1,
        counters: prev.counters.clone(),
    };
    let mut changed = prev.groups.len() != topology.groups.len();
    for (name, view) in &topology.groups {
        let mut snap = snapshot(name, view);
        match prev.groups.get(name) {
            Some(old) if old.snapshot.same_content(&snap) => {
                next.groups.insert(name.clone(), old.clone());
            }
            _ => {
                changed = true;
                let counter = next.counters.entry(name.clone()).or_insert(0);
                *counter += 1;
                snap.version = *counter;
                let mut buf = BytesMut::new();
                snap.encode(&mut buf);
                next.groups.insert(
                    name.clone(),
                    Arc::new(Entry {
                        snapshot: snap,
                        bytes: buf.freeze(),
                    }),
                );
            }
        }
    }
    // A removed group with the same count of groups: names differ.
    changed |= prev.groups.keys().ne(next.groups.keys());
    changed.then_some(next)
}
