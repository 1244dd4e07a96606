//! Peering: Sentinel's peer protocol, as pure rules. Several Valkyries and
//! real `valkey-sentinel` processes monitoring the same masters find each
//! other through hellos, agree that a master is down, elect one leader per
//! epoch and converge on the configuration with the highest config epoch.
//!
//! This module owns the peer table's data ([`Peer`]), the wire values the
//! rules take as input (hellos, epochs, `is-master-down-by-addr` answers)
//! and their validation; the rules themselves live next to it:
//!
//! - [`hello`]: discovery, address switches, invalid addresses, adoption of
//!   a higher current epoch and of a higher configuration;
//! - [`vote`]: answering `is-master-down-by-addr` and granting votes;
//! - [`election`]: asking peers, ODOWN by quorum, candidacy, counting
//!   votes, timeouts and back-off;
//! - [`liveness`]: peer PINGs, peer SDOWN, ageing of peers' answers;
//! - [`quorum`]: the voters, the quorum, the votes an election needs.
//!
//! Deliberate differences from Sentinel 8.0.1 (`docs/peering.md`,
//! `docs/security.md`): epochs must be plain decimal, at most `i64::MAX`
//! and at most [`MAX_EPOCH_JUMP`] ahead of ours, and a hello's config epoch
//! may not exceed its own current epoch; votes are counted for the
//! failover's own epoch; no vote is granted while TILT holds; a peer is
//! learnt only from a hello on a data node's channel and votes only once
//! it answered a PING on its announced address ([`Peer::verified`]); a
//! hello's higher configuration is adopted only for a node with a history
//! in the group, once it is seen reporting the master role; every address
//! is printable ASCII, and an IP address unless `resolve-hostnames yes`.

pub mod election;
pub mod hello;
pub mod liveness;
pub mod quorum;
pub mod vote;

pub use valkyrie_protocol::peer::{
    EpochError, HelloError, HelloFields, MAX_EPOCH, MAX_EPOCH_JUMP, is_runid, parse_epoch,
    within_reach,
};

use super::types::{Addr, Millis};

/// Whether a failover can still take an epoch of its own after
/// `current`: none can at [`MAX_EPOCH`].
pub fn epoch_available(current: u64) -> bool {
    current < MAX_EPOCH
}

/// Sentinel's `ask_period × 5` with the default `ask-period`: a peer's
/// "master down" answer and the vote it reported are forgotten this long
/// after its last answer ([`Timers::answer_ttl`](crate::Timers::answer_ttl)).
pub const ANSWER_TTL: Millis = 5_000;

/// The most peers one group keeps. A new run id beyond it evicts the
/// unverified peer heard from least recently; when every peer is
/// verified, the newcomer is refused. Either is counted
/// (`valkyrie_peers_refused_total`).
pub const MAX_PEERS: usize = 32;

/// Sentinel's default hello period (`publish-period`,
/// [`Timers::publish_period`](crate::Timers::publish_period)).
pub const HELLO_PERIOD: Millis = 2_000;

/// The stale window with the default `publish-period` (Sentinel's 4 ×
/// publish period, [`Timers::stale_window`](crate::Timers::stale_window)):
/// in peer mode, no corrective `REPLICAOF` for this long after the daemon
/// started, so that a daemon restarted with a stale configuration hears
/// the newer hellos first.
pub const STALE_WINDOW: Millis = 4 * HELLO_PERIOD;

/// A peer sentinel of one group, keyed by its run id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Peer {
    /// Its run id (40 hex).
    pub runid: String,
    /// The address its hellos announce.
    pub addr: Addr,
    /// When a hello from it about this group was last processed (0: never).
    pub last_hello: Millis,
    /// Its command link is connected.
    pub link_up: bool,
    /// Last valid PING reply (`PONG`, `-LOADING`, `-MASTERDOWN`), or when
    /// it was first known.
    pub last_ok_ping: Millis,
    /// Last PING reply of any kind (0: never).
    pub last_ping_reply: Millis,
    /// Subjectively down: no valid PING reply for `down-after`.
    pub sdown: bool,
    /// When it went SDOWN.
    pub sdown_since: Millis,
    /// It said, within five `ask-period`s, that the master is down.
    pub master_down: bool,
    /// When it last answered `is-master-down-by-addr` (0: never).
    pub answered_at: Millis,
    /// When it was last asked.
    pub asked_at: Millis,
    /// The vote it reported (cleared with its answer's age).
    pub leader: Option<String>,
    /// The epoch of the vote it reported (kept when `leader` is cleared).
    pub leader_epoch: u64,
    /// It answered a PING on its announced address (it was learnt from a
    /// hello on a data node's channel): only a verified peer votes,
    /// counts towards the quorum and the majority, is asked, is granted
    /// our vote, is persisted and puts the group in peer mode. Peers
    /// restored from the state file were verified before they were saved.
    pub verified: bool,
}

impl Peer {
    /// A peer first known at `now` at `addr`.
    pub fn new(runid: String, addr: Addr, now: Millis) -> Peer {
        Peer {
            runid,
            addr,
            last_hello: 0,
            link_up: false,
            last_ok_ping: now,
            last_ping_reply: 0,
            sdown: false,
            sdown_since: 0,
            master_down: false,
            answered_at: 0,
            asked_at: 0,
            leader: None,
            leader_epoch: 0,
            verified: false,
        }
    }
}

/// A peer as persisted (Sentinel's `known-sentinel` line).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KnownPeer {
    /// Its run id.
    pub runid: String,
    /// Its address.
    pub addr: Addr,
}

/// Where a hello came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HelloVia {
    /// The `__sentinel__:hello` channel of a master or replica (our own
    /// hellos already filtered out by the shell).
    Channel,
    /// `PUBLISH __sentinel__:hello …` on our Sentinel port.
    SentinelPort,
}

/// A hello, parsed and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The sender's announced address.
    pub addr: Addr,
    /// The sender's run id.
    pub runid: String,
    /// The sender's current epoch.
    pub current_epoch: u64,
    /// The master's name.
    pub name: String,
    /// The master the sender advertises.
    pub master: Addr,
    /// The epoch of that configuration.
    pub config_epoch: u64,
}

impl Hello {
    /// Parses `ip,port,runid,current_epoch,name,master_ip,master_port,config_epoch`
    /// ([`HelloFields::parse`]); both hosts must be IP addresses unless
    /// `resolve_hostnames`.
    pub fn parse(payload: &str, resolve_hostnames: bool) -> Result<Hello, HelloError> {
        let f = HelloFields::parse(payload, resolve_hostnames)?;
        Ok(Hello {
            addr: Addr::new(f.ip, f.port),
            runid: f.runid.to_ascii_lowercase(),
            current_epoch: f.current_epoch,
            name: f.name.to_string(),
            master: Addr::new(f.master_ip, f.master_port),
            config_epoch: f.config_epoch,
        })
    }
}

/// The answer to `SENTINEL is-master-down-by-addr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DownAnswer {
    /// We see that master down (our own SDOWN, not vetoed, no TILT).
    pub down: bool,
    /// Whom we voted for (`*` on the wire when `None`).
    pub leader: Option<String>,
    /// The epoch of that vote.
    pub leader_epoch: u64,
}

impl DownAnswer {
    /// "Not down, no vote": the answer about an address we do not monitor.
    pub fn unknown() -> DownAnswer {
        DownAnswer {
            down: false,
            leader: None,
            leader_epoch: 0,
        }
    }
}
