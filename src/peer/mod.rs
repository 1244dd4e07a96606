//! Peer links: one command connection per peer sentinel (by run id,
//! shared by every group that knows the peer), as Sentinel keeps them.
//!
//! On connect: `AUTH` when credentials apply, `CLIENT SETNAME
//! sentinel-<first 8 of our id>-cmd`, `PING`. Then `PING` every
//! `min(down-after, 1 s)`, our hellos (`PUBLISH __sentinel__:hello …`) and
//! `SENTINEL is-master-down-by-addr` as the runtime asks. Replies go back
//! to the runtime as core inputs: [`Input::PeerPing`],
//! [`Input::PeerLinkDown`], [`Input::DownReply`]. Reconnects at most once
//! a second.
//!
//! [`Input::PeerPing`]: crate::core::Input::PeerPing
//! [`Input::PeerLinkDown`]: crate::core::Input::PeerLinkDown
//! [`Input::DownReply`]: crate::core::Input::DownReply

mod link;

use std::time::Duration;

use crate::config::Secret;
use crate::core::Addr;
use crate::link::HelloJob;

pub use link::{ATTEMPT_GAP, run};

/// How one peer link behaves.
#[derive(Clone, Debug)]
pub struct PeerSpec {
    /// The peer's run id.
    pub runid: String,
    /// Its address.
    pub addr: Addr,
    /// Our run id (for `CLIENT SETNAME`).
    pub myid: String,
    /// `AUTH <user> <pass>` (user set) or `AUTH <pass>`: `sentinel-user`
    /// and `sentinel-pass`, or else our `requirepass`, as Sentinel.
    pub auth_user: Option<String>,
    /// See `auth_user`.
    pub auth_pass: Option<Secret>,
    /// PING period: `min(down-after, 1 s)` over the groups sharing it.
    pub ping_period: Duration,
    /// How long a reply may take.
    pub reply_timeout: Duration,
    /// `tls-replication yes`: the link speaks TLS.
    pub tls: Option<crate::tls::Outbound>,
}

/// What the runtime asks a peer link to do.
#[derive(Clone, Debug)]
pub enum PeerJob {
    /// Publish a hello to the peer (`PUBLISH __sentinel__:hello …`).
    Hello(HelloJob),
    /// `SENTINEL is-master-down-by-addr <ip> <port> <epoch> <candidate|*>`.
    Ask {
        /// The group (to route the answer).
        group: String,
        /// The master's address as we know it.
        master: Addr,
        /// Our current epoch.
        epoch: u64,
        /// Our run id when asking for a vote.
        candidate: Option<String>,
    },
}

#[cfg(test)]
mod tests;
