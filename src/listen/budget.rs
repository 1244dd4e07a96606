//! The descriptor budget: every consumer of file descriptors counted
//! against the open-file limit, so that no flood of clients can take what
//! a failover needs.
//!
//! Kept out of the clients' reach: Valkey's [`RESERVED_FDS`] (the state
//! file's write and rename, TLS files, DNS, the runtime), [`ADMIN`]
//! connections for the admin port (`/healthz` stays answerable), and the
//! links — two per monitored instance (commands and hellos) and one per
//! peer, `Topology::link_descriptors` — recounted whenever the topology
//! changes. What is left is the
//! client budget, which the Sentinel port's clients and the index port's
//! subscribers share: each holds a permit of its port's own limit and one
//! of the budget ([`super::ConnectionLimit::within`]). A client refused
//! by the budget gets its port's refusal (`-ERR max number of clients
//! reached`, `ERR busy`), exactly as at the port's own limit.

use super::RESERVED_FDS;

/// Admin-port connections kept out of the client budget.
pub const ADMIN: u64 = 16;

/// The client budget under an open-file limit of `limit` with `links`
/// link descriptors: at least 1, so a daemon with a tiny limit still
/// answers (its ports then refuse nearly everyone, as the limit says).
pub fn clients(limit: u64, links: u64) -> usize {
    let kept = RESERVED_FDS.saturating_add(ADMIN).saturating_add(links);
    usize::try_from(limit.saturating_sub(kept).max(1)).unwrap_or(usize::MAX)
}

/// The process's open-file limit (its soft `RLIMIT_NOFILE`), or
/// `u64::MAX` when unlimited.
pub fn nofile() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}
