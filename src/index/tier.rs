//! Who is written first when a change is published: subscribers that
//! proved they read.
//!
//! A subscriber that never reads costs a socket write per change until its
//! receive window closes, a few hundred changes later; until then the
//! server cannot tell it from a reader by its socket. So the protocol lets
//! a reader prove itself: in version 2 every batch of pushes ends with
//! `MARK <token>`, and a subscriber that answers `ACK <token>` before the
//! next batch is *proven*. The token is unpredictable, so only a client
//! that read up to the mark can answer it.
//!
//! A publication goes to proven subscribers first ([`Feed::first`]). It
//! goes to everyone else ([`Feed::then`]) once every proven subscriber has
//! written it, or after [`RELEASE_AFTER`] at most, so stalled, hostile or
//! version-1 subscribers can make a reader wait no more than that, however
//! many they are.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::publish::{self, Published};
use crate::topology::Topology;

/// How long the other subscribers wait, at most, for the proven ones to
/// write a publication.
pub const RELEASE_AFTER: Duration = Duration::from_millis(20);

/// One daemon's publications, as the two tiers of subscribers read them.
#[derive(Clone, Debug)]
pub struct Feed {
    /// Every publication as soon as it is made: what proven subscribers,
    /// `WATCH` and the status page read.
    pub first: watch::Receiver<Arc<Published>>,
    /// The same publications, released to the other subscribers once the
    /// proven ones have written them.
    pub then: watch::Receiver<Arc<Published>>,
    /// The proven subscribers' count and progress.
    pub proven: Arc<Proven>,
}

/// The proven tier: how many are in it, and how many have yet to write
/// the newest publication.
#[derive(Debug, Default)]
pub struct Proven {
    members: AtomicUsize,
    pending: AtomicUsize,
    written: Notify,
}

impl Proven {
    /// Enters the tier; the returned guard leaves it when dropped.
    pub fn join(self: &Arc<Self>) -> Membership {
        self.members.fetch_add(1, Ordering::Relaxed);
        crate::metrics::index_proven(1.0);
        Membership(self.clone())
    }

    /// How many subscribers are proven now.
    pub fn members(&self) -> usize {
        self.members.load(Ordering::Relaxed)
    }

    /// A member has written the newest publication it was given.
    pub fn wrote(&self) {
        let left = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if left == Ok(1) {
            self.written.notify_one();
        }
    }

    /// Waits until every member has written, or `bound` has passed.
    async fn settled(&self, bound: Duration) {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let written = self.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            if self.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, written).await.is_err() {
                return;
            }
        }
    }
}

/// A subscriber's place in the proven tier.
#[derive(Debug)]
pub struct Membership(Arc<Proven>);

impl Drop for Membership {
    fn drop(&mut self) {
        self.0.members.fetch_sub(1, Ordering::Relaxed);
        crate::metrics::index_proven(-1.0);
        // A member that leaves owes no write any more.
        self.0.wrote();
    }
}

/// The tokens of one connection's marks: a keyed hash of a counter, so
/// that a client cannot answer a mark it has not read. The keys are the
/// process's random hash keys (`RandomState`), different for every
/// connection; no token is a secret beyond that.
#[derive(Debug, Default)]
pub struct Marks {
    keys: std::collections::hash_map::RandomState,
    count: u64,
}

impl Marks {
    /// The next token.
    pub fn token(&mut self) -> u64 {
        self.count += 1;
        let mut h = self.keys.build_hasher();
        h.write_u64(self.count);
        h.finish()
    }
}

/// Follows the topology and publishes versioned snapshots, proven
/// subscribers first. The daemon starts one, shared by every index
/// listener and the status page, so snapshots and versions are computed
/// once and agree everywhere.
pub fn spawn_feed(mut topology: watch::Receiver<Arc<Topology>>) -> Feed {
    let first =
        publish::publish(&Published::default(), &topology.borrow_and_update()).unwrap_or_default();
    let first = Arc::new(first);
    let (first_tx, first_rx) = watch::channel(first.clone());
    let (then_tx, then_rx) = watch::channel(first);
    let proven = Arc::new(Proven::default());
    let tier = proven.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                r = topology.changed() => if r.is_err() { return },
                _ = first_tx.closed() => return,
            }
            let t = topology.borrow_and_update().clone();
            first_tx.send_if_modified(|p| match publish::publish(p, &t) {
                Some(next) => {
                    *p = Arc::new(next);
                    // Before the send wakes them: each member owes one write.
                    tier.pending.store(tier.members(), Ordering::Release);
                    true
                }
                None => false,
            });
        }
    });
    // The release runs apart from the publisher, so that waiting for the
    // proven tier never delays the next publication.
    let mut newest = first_rx.clone();
    let tier = proven.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                r = newest.changed() => if r.is_err() { return },
                _ = then_tx.closed() => return,
            }
            tier.settled(RELEASE_AFTER).await;
            let p = newest.borrow_and_update().clone();
            then_tx.send_replace(p);
        }
    });
    Feed {
        first: first_rx,
        then: then_rx,
        proven,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A publication made while `members` are proven.
    fn published(proven: &Proven) {
        proven.pending.store(proven.members(), Ordering::Release);
    }

    #[tokio::test(start_paused = true)]
    async fn the_rest_wait_until_every_member_wrote() {
        let proven = Arc::new(Proven::default());
        let (a, b) = (proven.join(), proven.join());
        published(&proven);
        let start = tokio::time::Instant::now();
        let settled = tokio::spawn({
            let proven = proven.clone();
            async move { proven.settled(RELEASE_AFTER).await }
        });
        tokio::time::sleep(Duration::from_millis(3)).await;
        proven.wrote();
        tokio::time::sleep(Duration::from_millis(3)).await;
        assert!(!settled.is_finished(), "one member still owes its write");
        proven.wrote();
        assert!(settled.await.is_ok(), "the wait panicked");
        assert_eq!(start.elapsed(), Duration::from_millis(6));
        drop((a, b));
    }

    #[tokio::test(start_paused = true)]
    async fn the_rest_wait_no_longer_than_the_bound() {
        let proven = Arc::new(Proven::default());
        let stuck = proven.join();
        published(&proven);
        let start = tokio::time::Instant::now();
        proven.settled(RELEASE_AFTER).await;
        assert_eq!(start.elapsed(), RELEASE_AFTER);
        // A member that leaves owes nothing: the next wait is short.
        published(&proven);
        drop(stuck);
        let start = tokio::time::Instant::now();
        proven.settled(RELEASE_AFTER).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(proven.members(), 0);
    }

    #[test]
    fn marks_differ_between_connections_and_never_repeat() {
        let (mut a, mut b) = (Marks::default(), Marks::default());
        let from_a: Vec<u64> = (0..100).map(|_| a.token()).collect();
        let from_b: Vec<u64> = (0..100).map(|_| b.token()).collect();
        let mut all: Vec<u64> = from_a.iter().chain(&from_b).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 200);
    }
}
