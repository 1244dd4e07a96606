//! The consumer's side of the ordering rule: which snapshot of a group is
//! the newest one seen, across reconnects and server restarts.

use std::collections::BTreeMap;

use super::GroupSnapshot;

/// What [`View::apply`] did with a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Older than (or the same as) what is held: ignored.
    Stale,
    /// Newer, but advertises what was already held (a reconnect, or only
    /// offsets moved).
    Unchanged,
    /// Newer and different: the consumer should act on it.
    Changed,
}

#[derive(Clone, Debug)]
struct Held {
    run: String,
    snapshot: GroupSnapshot,
}

/// The newest snapshot of every group a consumer has seen.
///
/// Within one server run, `(epoch, version)` orders snapshots. When the run
/// changes (the greeting carries it), versions have restarted, so the
/// first snapshot of the new run is taken if its epoch is not lower than
/// the held one; epochs never decrease, so an older state can never
/// replace a newer one.
#[derive(Clone, Debug, Default)]
pub struct View {
    run: String,
    groups: BTreeMap<String, Held>,
}

impl View {
    /// An empty view.
    pub fn new() -> View {
        View::default()
    }

    /// Records the run id of the server now connected (from its greeting).
    pub fn set_run(&mut self, run: &str) {
        run.clone_into(&mut self.run);
    }

    /// Offers a snapshot received from the current run.
    pub fn apply(&mut self, snapshot: GroupSnapshot) -> Outcome {
        let outcome = match self.groups.get(&snapshot.group) {
            None => Outcome::Changed,
            Some(h) => {
                let newer = if h.run == self.run {
                    (snapshot.epoch, snapshot.version) > (h.snapshot.epoch, h.snapshot.version)
                } else {
                    snapshot.epoch >= h.snapshot.epoch
                };
                if !newer {
                    return Outcome::Stale;
                }
                if h.snapshot.same_content(&snapshot) {
                    Outcome::Unchanged
                } else {
                    Outcome::Changed
                }
            }
        };
        self.groups.insert(
            snapshot.group.clone(),
            Held {
                run: self.run.clone(),
                snapshot,
            },
        );
        outcome
    }

    /// Forgets a group the server reported `GONE`; whether it was held.
    pub fn remove(&mut self, group: &str) -> bool {
        self.groups.remove(group).is_some()
    }

    /// The newest snapshot of `group`.
    pub fn get(&self, group: &str) -> Option<&GroupSnapshot> {
        self.groups.get(group).map(|h| &h.snapshot)
    }

    /// Every held snapshot, by group name.
    pub fn groups(&self) -> impl Iterator<Item = &GroupSnapshot> {
        self.groups.values().map(|h| &h.snapshot)
    }
}
