//! What every listener (Sentinel, index, admin) shares: binding with
//! Valkey's listen backlog, an accept loop that never ends on an error,
//! and the open-file limit raised at start with `maxclients` clamped to
//! what fits, as Valkey does.
//!
//! Every port bounds the connections it serves with a [`ConnectionLimit`]:
//! the accept loop takes a [`Permit`] before the connection's task starts
//! (so a burst cannot pass the check all at once) and the permit is given
//! back when the connection ends, however it ends. What a port does at the
//! limit is its own: the Sentinel port answers `-ERR max number of clients
//! reached`, the index port `ERR busy`, the admin port evicts its oldest
//! connection and hands its permit to the new one.
//!
//! An accept error (`EMFILE`/`ENFILE` when descriptors run out,
//! `ENOBUFS`, `ECONNABORTED` …) is transient by nature: the listener backs
//! off (10 ms, doubling to 1 s, back to 10 ms after a success), logs at
//! most once per [`LOG_EVERY`], counts it in `valkyrie_accept_errors_total`
//! and accepts again. A listener that stopped while `/healthz` still said
//! 200 would be a port that never comes back.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::backoff::Backoff;

/// Valkey's `tcp-backlog` default: pending connections the kernel queues
/// (capped by `net.core.somaxconn`).
pub const BACKLOG: u32 = 511;

/// Descriptors Valkey keeps for itself beyond `maxclients`
/// (`CONFIG_MIN_RESERVED_FDS`); Valkyrie uses them for its links, the
/// state file, the index and admin ports.
pub const RESERVED_FDS: u64 = 32;

/// First pause after an accept error.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause.
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// At most one log line per listener this often.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Binds `addr` with `SO_REUSEADDR` and a listen backlog of `backlog`.
pub fn bind_with_backlog(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// Binds `addr` with [`BACKLOG`].
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    bind_with_backlog(addr, BACKLOG)
}

/// The pause after consecutive accept errors: 10 ms, doubling to 1 s, no
/// jitter (one listener, nothing to spread), reset by an accept.
pub fn accept_backoff() -> Backoff {
    Backoff::with_seed(BACKOFF_MIN, BACKOFF_MAX, 0, 1)
}

/// How many connections a port serves at once: at most `max` [`Permit`]s
/// are out at any time, and, with a parent, each also holds one of the
/// parent's (the descriptor budget the client ports share, [`budget`]).
#[derive(Debug)]
pub struct ConnectionLimit {
    max: AtomicUsize,
    live: AtomicUsize,
    parent: Option<Arc<ConnectionLimit>>,
}

impl ConnectionLimit {
    /// A limit of `max` connections (0 refuses every one).
    pub fn new(max: usize) -> Arc<ConnectionLimit> {
        Arc::new(ConnectionLimit {
            max: AtomicUsize::new(max),
            live: AtomicUsize::new(0),
            parent: None,
        })
    }

    /// A limit of `max` connections that also each take a permit of
    /// `parent`.
    pub fn within(max: usize, parent: Arc<ConnectionLimit>) -> Arc<ConnectionLimit> {
        Arc::new(ConnectionLimit {
            max: AtomicUsize::new(max),
            live: AtomicUsize::new(0),
            parent: Some(parent),
        })
    }

    /// A permit, or `None` when `max` are out already (here or in the
    /// parent). Checking and counting are one atomic step: concurrent
    /// callers never pass the limit together.
    pub fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max.load(Ordering::Acquire)).then_some(n + 1)
            })
            .ok()?;
        let parent = match &self.parent {
            None => None,
            Some(p) => match p.try_acquire() {
                Some(permit) => Some(Box::new(permit)),
                None => {
                    self.live.fetch_sub(1, Ordering::AcqRel);
                    return None;
                }
            },
        };
        Some(Permit {
            limit: self.clone(),
            _parent: parent,
        })
    }

    /// Changes the limit; permits already out stay valid.
    pub fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Release);
    }

    /// Permits out now.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::Acquire)
    }
}

/// One connection counted in its [`ConnectionLimit`] (and its parent's)
/// until dropped.
#[derive(Debug)]
pub struct Permit {
    limit: Arc<ConnectionLimit>,
    _parent: Option<Box<Permit>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limit.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A listener whose [`accept`](Acceptor::accept) only ever returns a
/// connection.
#[derive(Debug)]
pub struct Acceptor {
    listener: TcpListener,
    port: &'static str,
    backoff: Backoff,
    last_log: Option<Instant>,
    unlogged: u64,
}

impl Acceptor {
    /// Wraps `listener`; `port` names it in logs and in the metric's
    /// `port` label (`sentinel`, `index`, `admin`).
    pub fn new(listener: TcpListener, port: &'static str) -> Acceptor {
        Acceptor {
            listener,
            port,
            backoff: accept_backoff(),
            last_log: None,
            unlogged: 0,
        }
    }

    /// The next connection; errors are counted, logged (rate-limited)
    /// and retried after a back-off.
    pub async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            match self.listener.accept().await {
                Ok(conn) => {
                    self.backoff.reset();
                    return conn;
                }
                Err(e) => {
                    crate::metrics::accept_error(self.port);
                    let pause = self.backoff.next_delay();
                    let now = Instant::now();
                    if self.last_log.is_none_or(|t| now - t >= LOG_EVERY) {
                        tracing::error!(
                            port = self.port,
                            errors_not_logged = self.unlogged,
                            "accept failed: {e}; retrying in {pause:?}{}",
                            hint(&e)
                        );
                        self.last_log = Some(now);
                        self.unlogged = 0;
                    } else {
                        self.unlogged += 1;
                    }
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

fn hint(e: &std::io::Error) -> &'static str {
    // EMFILE 24, ENFILE 23.
    match e.raw_os_error() {
        Some(23 | 24) => {
            " (out of file descriptors: raise the open-file limit or lower maxclients)"
        }
        _ => "",
    }
}

/// What [`plan_nofile`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NofilePlan {
    /// The soft limit to set, if it must be raised.
    pub raise_to: Option<u64>,
    /// `maxclients` that fits in the limit.
    pub maxclients: usize,
}

/// Valkey's `adjustOpenFilesLimit`: `maxclients` plus [`RESERVED_FDS`]
/// descriptors are wanted; the soft limit is raised toward the hard one
/// (`None`: unlimited) if it is lower; if even that does not fit,
/// `maxclients` becomes the limit less the reserve (at least 1).
pub fn plan_nofile(soft: u64, hard: Option<u64>, maxclients: usize) -> NofilePlan {
    let want = u64::try_from(maxclients)
        .unwrap_or(u64::MAX)
        .saturating_add(RESERVED_FDS);
    if soft >= want {
        return NofilePlan {
            raise_to: None,
            maxclients,
        };
    }
    let reachable = hard.map_or(want, |h| h.min(want)).max(soft);
    let fits = if reachable >= want {
        maxclients
    } else {
        usize::try_from(reachable.saturating_sub(RESERVED_FDS).max(1)).unwrap_or(usize::MAX)
    };
    NofilePlan {
        raise_to: (reachable > soft).then_some(reachable),
        maxclients: fits,
    }
}

/// Raises the process's soft `RLIMIT_NOFILE` toward the hard limit so that
/// `maxclients` fits, and returns the `maxclients` that does fit; logs
/// what it did.
pub fn adjust_nofile(maxclients: usize) -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let current = getrlimit(Resource::Nofile);
    let Some(soft) = current.current else {
        return maxclients;
    };
    let plan = plan_nofile(soft, current.maximum, maxclients);
    let mut limit = soft;
    if let Some(to) = plan.raise_to {
        let mut raised = current;
        raised.current = Some(to);
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => {
                tracing::info!("open-file limit raised from {soft} to {to}");
                limit = to;
            }
            Err(e) => tracing::warn!("cannot raise the open-file limit from {soft} to {to}: {e}"),
        }
    }
    let fits = if limit == soft && plan.raise_to.is_some() {
        plan_nofile(soft, Some(soft), maxclients).maxclients
    } else {
        plan.maxclients
    };
    if fits < maxclients {
        tracing::warn!(
            "maxclients lowered from {maxclients} to {fits}: the open-file limit is {limit} \
             and {RESERVED_FDS} descriptors are kept for the daemon itself (raise the limit, \
             e.g. LimitNOFILE= or ulimit -n, to serve more)"
        );
    }
    fits
}

pub mod budget;
pub mod per_address;

pub use per_address::{AddressLimit, AddressPermit};
#[cfg(test)]
mod tests;
