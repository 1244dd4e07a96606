//! The index server's bounds ([`Limits`]), who may subscribe
//! ([`Admission`]) and its counters ([`Stats`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;

use crate::listen::{AddressLimit, ConnectionLimit};

/// Bounds of the index server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Subscribers served at once (a [`ConnectionLimit`]); past it a new
    /// one gets `ERR busy` and is closed.
    pub max_subscribers: usize,
    /// Subscribers one client address (IPv6: one /64) may hold at once
    /// (an [`AddressLimit`]; 0: no such limit); past it likewise.
    pub max_per_address: usize,
    /// How long a push may take to be accepted by a subscriber's socket
    /// before the subscriber is disconnected as too slow.
    pub max_lag: Duration,
    /// A subscriber that was sent nothing for this long gets `HEARTBEAT`.
    pub heartbeat: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_subscribers: 16_384,
            max_per_address: DEFAULT_MAX_PER_ADDRESS,
            max_lag: Duration::from_secs(10),
            heartbeat: Duration::from_secs(15),
        }
    }
}

/// Default of [`Limits::max_per_address`] (`index-max-subscribers-per-address`),
/// owned by the configuration.
pub use crate::config::DEFAULT_INDEX_MAX_PER_ADDRESS as DEFAULT_MAX_PER_ADDRESS;

/// Who may subscribe: the limits every index listener of a daemon shares.
#[derive(Clone, Debug)]
pub struct Admission {
    /// Subscribers in all.
    pub total: Arc<ConnectionLimit>,
    /// Subscribers per client address.
    pub per_address: Arc<AddressLimit>,
}

impl Admission {
    /// Fresh counters for `limits`.
    pub fn new(limits: &Limits) -> Admission {
        Admission::within(limits, ConnectionLimit::new(limits.max_subscribers))
    }

    /// Fresh counters for `limits`, the total one `total`.
    pub fn within(limits: &Limits, total: Arc<ConnectionLimit>) -> Admission {
        Admission {
            total,
            per_address: AddressLimit::new(limits.max_per_address),
        }
    }
}

/// What one subscriber holds from accept to close: its place in the total
/// and in its address's count.
pub type Permits = (crate::listen::Permit, crate::listen::AddressPermit);

/// Counters of one index server, for tests, logs and metrics.
#[derive(Debug, Default)]
pub struct Stats {
    /// Subscribers connected now (a gauge; the limit counts permits,
    /// taken at accept).
    pub subscribers: AtomicUsize,
    /// Snapshots written to subscribers.
    pub pushes: AtomicU64,
    /// Subscribers disconnected for not draining their socket.
    pub slow_disconnects: AtomicU64,
}
