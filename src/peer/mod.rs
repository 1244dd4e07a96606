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

pub use link::{ATTEMPT_GAP, PeerJob, PeerSpec, run};

#[cfg(test)]
mod tests;
