//! The topology-push ("index") protocol: a line-oriented text protocol over
//! which Valkyrie pushes a full snapshot of each watched group on connect
//! and again on every change. The specification is `docs/index-protocol.md`.
//!
//! This module owns the wire format of version 1 — the message types,
//! their encoding ([`wire`]), a nom parser for every line, a decoder that
//! assembles multi-line snapshots ([`ServerDecoder`]), the glob patterns of
//! `WATCH` ([`Pattern`]), the consumer-side ordering rule ([`View`]) and,
//! with the `client` feature, an async client ([`IndexClient`]).
//!
//! # Format
//!
//! ```text
//! server: VALKYRIE-INDEX 2 server=<id> run=<run-id> heartbeat=<ms>
//! client: HELLO 2
//! server: HELLO 2
//! client: WATCH mymaster cache-*
//! server: WATCHING 2
//! server: SNAPSHOT mymaster epoch=3 version=7
//! server: MASTER 127.0.0.1 6380 state=up failover=none
//! server: REPLICA 127.0.0.1 6381 state=up offset=1234 priority=100
//! server: END mymaster
//! server: MARK 3f09c2d1a7b4e865
//! client: ACK 3f09c2d1a7b4e865
//! ```

#[cfg(feature = "client")]
mod client;
mod error;
mod glob;
mod view;
pub mod wire;

#[cfg(feature = "client")]
pub use client::{ClientError, IndexClient, Update};
pub use error::IndexError;
pub use glob::Pattern;
pub use view::{Outcome, View};
pub use wire::{ClientCommand, ServerDecoder, ServerMessage, parse_command};

/// The highest protocol version this crate speaks (it speaks every version
/// from 1 up to this one).
pub const PROTOCOL_VERSION: u32 = 2;

/// The default TCP port of the index protocol.
pub const DEFAULT_PORT: u16 = 12120;

/// The longest command line a server accepts (terminator included).
pub const MAX_COMMAND_LINE: usize = 4096;

/// The most patterns one connection may watch.
pub const MAX_PATTERNS: usize = 256;

/// The longest line a client accepts from a server.
pub const MAX_SERVER_LINE: usize = 64 * 1024;

/// The most replicas a client accepts in one snapshot.
pub const MAX_REPLICAS: usize = 4096;

/// The server's first line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Greeting {
    /// The highest protocol version the server speaks.
    pub version: u32,
    /// The server's id (stable for the life of the process).
    pub server: String,
    /// This run of the server: versions restart when it changes.
    pub run: String,
    /// The server sends `HEARTBEAT` after this many idle milliseconds.
    pub heartbeat_ms: u64,
}

/// One group, in full.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// The group's name.
    pub group: String,
    /// The failover epoch the master was adopted in; never decreases.
    pub epoch: u64,
    /// Per-group change counter of this server run; grows with every
    /// published change.
    pub version: u64,
    /// The advertised master.
    pub master: Master,
    /// The replicas, in the server's order.
    pub replicas: Vec<Replica>,
}

impl GroupSnapshot {
    /// Whether `self` and `other` advertise the same thing, ignoring the
    /// version and the replication offsets (which move all the time and
    /// are only reported as of the snapshot).
    pub fn same_content(&self, other: &GroupSnapshot) -> bool {
        self.group == other.group
            && self.epoch == other.epoch
            && self.master == other.master
            && self.replicas.len() == other.replicas.len()
            && self.replicas.iter().zip(&other.replicas).all(|(a, b)| {
                (&a.host, a.port, a.state, a.priority) == (&b.host, b.port, b.state, b.priority)
            })
    }
}

/// The advertised master of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Master {
    /// Host (IP address or name, as Sentinel would report it).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Its health as seen by the server.
    pub state: MasterState,
    /// The failover step while one runs (Sentinel's names, e.g.
    /// `wait_promotion`), or `None`.
    pub failover: Option<String>,
}

/// A master's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MasterState {
    /// Answering.
    Up,
    /// Subjectively down: no valid reply for `down-after-milliseconds`.
    Sdown,
    /// Objectively down: a failover has been decided.
    Odown,
}

/// One replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replica {
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Its health.
    pub state: ReplicaState,
    /// Replication offset at the time of the snapshot.
    pub offset: u64,
    /// `replica-priority` (0: never promoted).
    pub priority: u32,
}

/// A replica's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaState {
    /// Answering.
    Up,
    /// The link to it failed recently (not yet down).
    Disconnected,
    /// Subjectively down.
    Down,
}

impl MasterState {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            MasterState::Up => "up",
            MasterState::Sdown => "sdown",
            MasterState::Odown => "odown",
        }
    }
}

impl ReplicaState {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaState::Up => "up",
            ReplicaState::Disconnected => "disconnected",
            ReplicaState::Down => "down",
        }
    }
}
