//! A connection's state ([`Session`]), what the connections of one
//! daemon's Sentinel port share ([`Shared`], [`Totals`]), and the pause
//! after a failed `AUTH`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use valkyrie_protocol::{Limits, Protocol};

use super::super::clients::{Client, Registry};
use crate::config::OutputLimit;
use crate::listen::ConnectionLimit;

/// Request limits once a client is authenticated: generous for the
/// Sentinel command set, still bounded.
pub(super) const AUTHENTICATED: Limits = Limits {
    max_frame: 1024 * 1024,
    max_bulk: 512 * 1024,
    max_aggregate: 1024,
    ..Limits::DEFAULT
};

/// Per-connection state the commands may change.
#[derive(Debug)]
pub struct Session {
    /// The protocol replies are encoded in.
    pub protocol: Protocol,
    /// `CLIENT ID`.
    pub id: u64,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// Subscribed channels.
    pub channels: std::collections::BTreeSet<Vec<u8>>,
    /// Subscribed patterns.
    pub patterns: std::collections::BTreeSet<Vec<u8>>,
    /// Authenticated as this user (`None`: not yet).
    pub user: Option<String>,
    /// What every connection shares.
    pub shared: Arc<Shared>,
    /// This connection's registry entry.
    pub client: Arc<Client>,
    /// `CLIENT REPLY ON` (the default) or `OFF`.
    pub reply_on: bool,
    /// `CLIENT REPLY SKIP`: drop the next command's reply.
    pub skip_next: bool,
    /// The current command sends no reply (`CLIENT REPLY OFF|SKIP`).
    pub suppress: bool,
    /// Close once the replies so far are written (`CLIENT KILL` of
    /// oneself).
    pub close_after_reply: bool,
    /// Close now, without a reply (`SHUTDOWN`).
    pub close_now: bool,
    /// The last command was a failed login: the connection pauses for
    /// [`AUTH_FAILURE_DELAY`] before its reply.
    pub auth_failed: bool,
}

impl Session {
    /// Subscribed to a channel or pattern.
    pub fn subscribed(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty()
    }
}

/// What all connections of one daemon's Sentinel port (every listen
/// address) share.
#[derive(Debug)]
pub struct Shared {
    /// Who may connect.
    pub security: Arc<super::super::auth::Security>,
    /// Connected clients.
    pub registry: Arc<Registry>,
    /// When a subscriber that does not read is disconnected.
    pub pubsub_limit: OutputLimit,
    /// `maxclients`: a permit per client, taken at accept.
    pub clients: Arc<ConnectionLimit>,
    /// Totals since start, for `INFO stats`.
    pub totals: Totals,
    /// The next `CLIENT ID`.
    next_id: AtomicU64,
}

impl Shared {
    /// A port of `maxclients` clients, none connected yet; each client
    /// also takes a permit of `budget` when given (the descriptor budget,
    /// `listen::budget`).
    pub fn new(
        security: Arc<super::super::auth::Security>,
        pubsub_limit: OutputLimit,
        maxclients: usize,
        budget: Option<Arc<ConnectionLimit>>,
    ) -> Shared {
        Shared {
            security,
            registry: Arc::default(),
            pubsub_limit,
            clients: match budget {
                Some(b) => ConnectionLimit::within(maxclients, b),
                None => ConnectionLimit::new(maxclients),
            },
            totals: Totals::default(),
            next_id: AtomicU64::new(1),
        }
    }

    /// `maxclients`.
    pub fn maxclients(&self) -> usize {
        self.clients.max()
    }

    /// A fresh `CLIENT ID` (from 1, per daemon).
    pub(super) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// Totals since start, for `INFO stats`.
#[derive(Debug, Default)]
pub struct Totals {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused past `maxclients`.
    pub rejected: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Bytes read.
    pub net_in: AtomicU64,
    /// Bytes written.
    pub net_out: AtomicU64,
    /// Subscribers closed past the pub/sub output limit.
    pub output_limit_disconnections: AtomicU64,
}

impl Totals {
    /// Adds `n` to one of the totals.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// After a failed login the connection neither reads, runs nor writes
/// anything for this long (its `-WRONGPASS` included): a brute force gets
/// one guess per connection per pause, however deeply it pipelines.
/// (A Valkey 8.0.1 sentinel checks every guess of a pipeline, and only
/// leaves the failures after the first one unanswered.)
pub const AUTH_FAILURE_DELAY: std::time::Duration = std::time::Duration::from_millis(100);
