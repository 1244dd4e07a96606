//! The event bus: the one place the runtime publishes Sentinel events to,
//! and the queues that carry them to each receiver.
//!
//! Two kinds of receivers:
//!
//! - Sentinel-port subscribers ([`EventBus::subscriber`]): each has its
//!   own unbounded FIFO and a filter (its channels and patterns). An event
//!   is queued only for the subscribers it matches, and its size is added
//!   to that subscriber's queued bytes. Nothing is ever dropped or skipped
//!   for being "behind": a subscriber that reads gets every event of its
//!   channels, in order, however large the burst. The only bound is the
//!   subscriber's own output-buffer limit in bytes
//!   (`client-output-buffer-limit pubsub`), which counts only what it
//!   subscribed to: past the hard limit the bus stops queueing for it and
//!   marks it overflowed, and its connection closes it (as Valkey does).
//! - In-process observers ([`EventBus::subscribe`]): a bounded
//!   `tokio::sync::broadcast` receiver of every event (the demo, tests),
//!   which may report `Lagged` if it falls behind.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, broadcast, mpsc};

use crate::core::Event;
use valkyrie_protocol::glob::matches as glob_match;

/// Capacity of the in-process observers' broadcast channel.
const OBSERVER_CAPACITY: usize = 1024;

/// Where the runtime publishes events. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventBus {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    observers: broadcast::Sender<Event>,
    subscribers: Mutex<BTreeMap<u64, Arc<Shared>>>,
    next: AtomicU64,
}

/// The prefix of Valkyrie's own channels (`valkyrie:failover-reason`).
const OWN_PREFIX: &[u8] = b"valkyrie:";

/// Whether a subscriber's `pattern` matches `channel`: Valkey's glob,
/// except that Valkyrie's own channels match only a pattern that itself
/// starts with `valkyrie:`. Sentinel clients that `PSUBSCRIBE *` (and
/// operators' `psubscribe '*'`) keep seeing Sentinel's events only; an
/// exact `SUBSCRIBE` is unaffected (`docs/compatibility.md`).
pub fn pattern_matches(pattern: &[u8], channel: &[u8]) -> bool {
    if channel.starts_with(OWN_PREFIX) && !pattern.starts_with(OWN_PREFIX) {
        return false;
    }
    glob_match(pattern, channel)
}

/// What one subscriber matches.
#[derive(Debug, Default, Clone)]
struct Filter {
    channels: BTreeSet<Vec<u8>>,
    patterns: BTreeSet<Vec<u8>>,
}

impl Filter {
    /// The bytes the event becomes on this subscriber's wire (RESP2
    /// sizes, an upper bound for RESP3 pushes too), 0 when it matches
    /// nothing.
    fn cost(&self, e: &Event) -> usize {
        let channel = e.channel.as_str().as_bytes();
        let body = channel.len() + e.payload.len();
        let mut n = 0;
        if self.channels.contains(channel) {
            // *3 $7 message $len ch $len payload, with their CRLFs.
            n += body + 40;
        }
        for p in &self.patterns {
            if pattern_matches(p, channel) {
                n += body + p.len() + 56;
            }
        }
        n
    }
}

#[derive(Debug)]
struct Shared {
    filter: Mutex<Filter>,
    queue: mpsc::UnboundedSender<Arc<Event>>,
    /// Bytes of matching events queued and not yet taken.
    queued: AtomicUsize,
    /// Past this many queued bytes the bus stops queueing (0: no limit).
    hard: usize,
    /// Set once `hard` was passed; the connection then closes.
    overflowed: AtomicBool,
    wake: Notify,
}

impl Default for EventBus {
    fn default() -> EventBus {
        EventBus::new()
    }
}

impl EventBus {
    /// A bus with no receivers.
    pub fn new() -> EventBus {
        let (observers, _) = broadcast::channel(OBSERVER_CAPACITY);
        EventBus {
            inner: Arc::new(Inner {
                observers,
                subscribers: Mutex::new(BTreeMap::new()),
                next: AtomicU64::new(1),
            }),
        }
    }

    fn subscribers(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Shared>>> {
        self.inner
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes an event to every matching subscriber and every
    /// observer; returns how many subscribers it was queued for.
    pub fn send(&self, event: Event) -> usize {
        let mut queued = 0;
        {
            let subs = self.subscribers();
            if !subs.is_empty() {
                let event = Arc::new(event.clone());
                for s in subs.values() {
                    let cost = s
                        .filter
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .cost(&event);
                    if cost == 0 || s.overflowed.load(Ordering::Relaxed) {
                        continue;
                    }
                    let now = s.queued.fetch_add(cost, Ordering::Relaxed) + cost;
                    if s.hard > 0 && now > s.hard {
                        s.overflowed.store(true, Ordering::Relaxed);
                        s.wake.notify_one();
                        continue;
                    }
                    if s.queue.send(event.clone()).is_ok() {
                        queued += 1;
                    }
                }
            }
        }
        let _ = self.inner.observers.send(event);
        queued
    }

    /// A receiver of every event, bounded (it may lag); for in-process
    /// observers, not for the Sentinel port.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.observers.subscribe()
    }

    /// A Sentinel-port subscriber with no channels yet; `hard` is its
    /// output limit in bytes (0: none). It leaves the bus when dropped.
    pub fn subscriber(&self, hard: u64) -> Subscriber {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            filter: Mutex::new(Filter::default()),
            queue: tx,
            queued: AtomicUsize::new(0),
            hard: usize::try_from(hard).unwrap_or(usize::MAX),
            overflowed: AtomicBool::new(false),
            wake: Notify::new(),
        });
        self.subscribers().insert(id, shared.clone());
        Subscriber {
            bus: self.clone(),
            id,
            shared,
            rx,
        }
    }
}

/// One Sentinel-port subscriber's queue.
#[derive(Debug)]
pub struct Subscriber {
    bus: EventBus,
    id: u64,
    shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<Arc<Event>>,
}

/// What [`Subscriber::next`] yields.
#[derive(Debug)]
pub enum Delivery {
    /// The next event of its channels, in order.
    Event(Arc<Event>),
    /// Its queue passed its output limit: it must be closed.
    Overflowed,
}

impl Subscriber {
    /// Sets the channels and patterns events are queued for.
    pub fn set_filter(&self, channels: &BTreeSet<Vec<u8>>, patterns: &BTreeSet<Vec<u8>>) {
        let mut f = self
            .shared
            .filter
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if f.channels != *channels {
            f.channels.clone_from(channels);
        }
        if f.patterns != *patterns {
            f.patterns.clone_from(patterns);
        }
    }

    /// Bytes queued and not yet taken.
    pub fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed)
    }

    /// Whether the queue passed the output limit.
    pub fn overflowed(&self) -> bool {
        self.shared.overflowed.load(Ordering::Relaxed)
    }

    fn taken(&self, e: &Event) {
        let cost = self
            .shared
            .filter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .cost(e);
        // The filter may have changed since the event was queued: never
        // below zero.
        let _ = self
            .shared
            .queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                Some(q.saturating_sub(cost))
            });
    }

    /// The next event, waiting for one; or the news that the queue
    /// overflowed. Never ends otherwise (the bus lives as long as the
    /// daemon).
    pub async fn next(&mut self) -> Delivery {
        if self.overflowed() {
            return Delivery::Overflowed;
        }
        tokio::select! {
            biased;
            _ = self.shared.wake.notified() => Delivery::Overflowed,
            e = self.rx.recv() => match e {
                Some(e) => {
                    self.taken(&e);
                    Delivery::Event(e)
                }
                None => std::future::pending().await,
            },
        }
    }

    /// The next event if one is queued now.
    pub fn try_next(&mut self) -> Option<Arc<Event>> {
        let e = self.rx.try_recv().ok()?;
        self.taken(&e);
        Some(e)
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.bus.subscribers().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Channel;

    fn sets(v: &[&str]) -> BTreeSet<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[tokio::test]
    async fn a_burst_reaches_a_subscriber_whole_and_in_order() {
        let bus = EventBus::new();
        let mut sdown = bus.subscriber(0);
        sdown.set_filter(&sets(&["+sdown"]), &sets(&[]));
        let quiet = bus.subscriber(1000);
        quiet.set_filter(&sets(&["+switch-master"]), &sets(&[]));
        // Far more than any broadcast capacity, without a yield.
        for i in 0..10_000 {
            bus.send(Event::new(
                Channel::Sdown,
                format!("master m{i} 127.0.0.1 6379"),
            ));
        }
        for i in 0..10_000 {
            match sdown.try_next() {
                Some(e) => assert_eq!(e.payload, format!("master m{i} 127.0.0.1 6379")),
                None => panic!("event {i} missing"),
            }
        }
        assert_eq!(sdown.queued(), 0);
        // Events of channels it did not subscribe to cost it nothing.
        assert_eq!(quiet.queued(), 0);
        assert!(!quiet.overflowed());
    }

    #[test]
    fn own_channels_match_only_own_patterns() {
        let own = Channel::FailoverReason.as_str().as_bytes();
        assert!(!pattern_matches(b"*", own));
        assert!(!pattern_matches(b"*reason", own));
        assert!(pattern_matches(b"valkyrie:*", own));
        assert!(pattern_matches(b"valkyrie:failover-reason", own));
        assert!(pattern_matches(b"*", b"+switch-master"));
        let mut f = Filter {
            patterns: sets(&["*"]),
            ..Filter::default()
        };
        let e = Event::new(Channel::FailoverReason, "{}".into());
        assert_eq!(f.cost(&e), 0, "PSUBSCRIBE * does not get it");
        f.channels = sets(&["valkyrie:failover-reason"]);
        assert!(f.cost(&e) > 0, "SUBSCRIBE does");
    }

    #[tokio::test]
    async fn past_the_hard_limit_the_queue_stops_and_overflows() {
        let bus = EventBus::new();
        let mut s = bus.subscriber(1000);
        s.set_filter(&sets(&[]), &sets(&["*"]));
        for _ in 0..100 {
            bus.send(Event::new(Channel::Sdown, "x".repeat(50)));
        }
        assert!(s.overflowed());
        assert!(matches!(s.next().await, Delivery::Overflowed));
        drop(s);
        assert!(bus.subscribers().is_empty(), "a dropped subscriber leaves");
    }
}
