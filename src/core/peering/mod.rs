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
//! - [`liveness`]: peer PINGs, peer SDOWN, ageing of peers' answers.
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
pub mod vote;

use super::types::{Addr, HostError, Millis, check_host};

/// How far ahead of our current epoch an epoch from a peer may be: one
/// crafted request must not be able to push the epoch to its end (Sentinel
/// 8.0.1 accepts `-1` as 2^64-1 and can then never fail over again).
pub const MAX_EPOCH_JUMP: u64 = 1 << 32;

/// The largest epoch: Sentinel replies epochs as signed 64-bit integers.
pub const MAX_EPOCH: u64 = i64::MAX as u64;

/// Sentinel's `ask_period × 5`: a peer's "master down" answer and the vote
/// it reported are forgotten this long after its last answer.
pub const ANSWER_TTL: Millis = 5_000;

/// The most peers one group keeps. A new run id beyond it evicts the
/// unverified peer heard from least recently; when every peer is
/// verified, the newcomer is refused. Either is counted
/// (`valkyrie_peers_refused_total`).
pub const MAX_PEERS: usize = 32;

/// Sentinel's hello period (`publish-period`).
pub const HELLO_PERIOD: Millis = 2_000;

/// In peer mode, no corrective `REPLICAOF` for this long after the daemon
/// started: a daemon restarted with a stale configuration hears the
/// newer hellos first (Sentinel's 4 × publish period).
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
    /// It said, within [`ANSWER_TTL`], that the master is down.
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

/// Why a hello was ignored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// Not 8 comma-separated fields.
    #[error("not 8 comma-separated fields")]
    Fields,
    /// A port is not a number from 1 to 65535.
    #[error("bad port {0:?}")]
    Port(String),
    /// An address is not printable ASCII, too long, or not an IP address
    /// while `resolve-hostnames` is off.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The config epoch is above the sender's own current epoch: no
    /// sentinel can have adopted a configuration from an epoch it has not
    /// reached.
    #[error("config epoch {config} is above the sender's current epoch {current}")]
    ConfigAhead {
        /// The config epoch offered.
        config: u64,
        /// The sender's current epoch.
        current: u64,
    },
    /// The run id is not 40 hex digits.
    #[error("bad run id {0:?}")]
    RunId(String),
    /// An epoch is not a plain decimal of at most `i64::MAX`.
    #[error(transparent)]
    Epoch(#[from] EpochError),
}

/// Why an epoch from a peer was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EpochError {
    /// Not plain decimal digits (a sign, a space, an exponent…).
    #[error("epoch {0:?} is not a plain decimal number")]
    NotDecimal(String),
    /// Larger than `i64::MAX` (Sentinel replies epochs as signed).
    #[error("epoch {0:?} is out of range")]
    OutOfRange(String),
    /// More than [`MAX_EPOCH_JUMP`] ahead of ours.
    #[error("epoch {epoch} is too far ahead of the current epoch {current}")]
    TooFarAhead {
        /// The epoch offered.
        epoch: u64,
        /// Ours.
        current: u64,
    },
}

/// Parses an epoch from a peer: plain ASCII digits, at most `i64::MAX`.
/// Sentinel 8.0.1 accepts `-1` (as 2^64-1) here; we refuse it.
pub fn parse_epoch(text: &[u8]) -> Result<u64, EpochError> {
    // Shown in logs and errors: never more than a few characters of what
    // a peer sent.
    let shown = || String::from_utf8_lossy(&text[..text.len().min(24)]).into_owned();
    if text.is_empty() || text.len() > 20 || !text.iter().all(u8::is_ascii_digit) {
        return Err(EpochError::NotDecimal(shown()));
    }
    let mut n: u64 = 0;
    for d in text {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or_else(|| EpochError::OutOfRange(shown()))?;
    }
    if n > MAX_EPOCH {
        return Err(EpochError::OutOfRange(shown()));
    }
    Ok(n)
}

/// Refuses an epoch more than [`MAX_EPOCH_JUMP`] ahead of `current`.
pub fn within_reach(epoch: u64, current: u64) -> Result<u64, EpochError> {
    if epoch > current.saturating_add(MAX_EPOCH_JUMP) {
        return Err(EpochError::TooFarAhead { epoch, current });
    }
    Ok(epoch)
}

/// Whether `s` is a run id: 40 hexadecimal digits.
pub fn is_runid(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Hello {
    /// Parses `ip,port,runid,current_epoch,name,master_ip,master_port,config_epoch`;
    /// both hosts must pass [`check_host`] with `resolve_hostnames`.
    pub fn parse(payload: &str, resolve_hostnames: bool) -> Result<Hello, HelloError> {
        let f: Vec<&str> = payload.split(',').collect();
        let [ip, port, runid, current, name, mip, mport, config] = f[..] else {
            return Err(HelloError::Fields);
        };
        let port_of = |p: &str| match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
            _ => Err(HelloError::Port(p.chars().take(16).collect())),
        };
        check_host(ip, resolve_hostnames)?;
        check_host(mip, resolve_hostnames)?;
        if !is_runid(runid) {
            return Err(HelloError::RunId(runid.chars().take(64).collect()));
        }
        let current_epoch = parse_epoch(current.as_bytes())?;
        let config_epoch = parse_epoch(config.as_bytes())?;
        if config_epoch > current_epoch {
            return Err(HelloError::ConfigAhead {
                config: config_epoch,
                current: current_epoch,
            });
        }
        Ok(Hello {
            addr: Addr::new(ip, port_of(port)?),
            runid: runid.to_ascii_lowercase(),
            current_epoch,
            name: name.to_string(),
            master: Addr::new(mip, port_of(mport)?),
            config_epoch,
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
