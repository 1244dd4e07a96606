//! The topology-push ("index") server: subscribers connect over TCP, say
//! which groups they watch, and receive a full snapshot of each on connect
//! and again on every change. The wire format and its rules are in
//! `docs/index-protocol.md`; the codec lives in
//! `valkyrie_protocol::index`.
//!
//! This module owns the listener ([`serve`]), the publisher that turns the
//! runtime's advertised topology into versioned, pre-encoded snapshots
//! ([`publish`]), and the per-subscriber loop ([`connection`]).
//!
//! Fan-out costs one encoding per change, not per subscriber: every
//! subscriber writes the same reference-counted bytes. A subscriber holds
//! no queue — it reads the latest publication when its socket can take
//! more — so a slow one is coalesced to the newest state, and one whose
//! socket does not drain within [`Limits::max_lag`] is disconnected.

pub mod connection;
mod limits;
pub mod publish;
#[cfg(test)]
mod tests;
pub mod tier;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::net::TcpListener;
use tokio::sync::watch;
use valkyrie_protocol::index::wire::ServerMessage;
use valkyrie_protocol::index::{Greeting, PROTOCOL_VERSION};

use crate::topology::Topology;
pub use limits::{Admission, DEFAULT_MAX_PER_ADDRESS, Limits, Permits, Stats};
pub use tier::{Feed, spawn_feed};

/// Pending connections the kernel queues for the index port. After a
/// daemon restart every subscriber reconnects at once; with the usual
/// backlog of 128 most of them would wait for SYN retransmissions (1 s,
/// 3 s, 7 s …) instead of a snapshot.
const BACKLOG: u32 = 4096;

/// Binds the index port.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::listen::bind_with_backlog(addr, BACKLOG)
}

/// Serves subscribers on `listener` with snapshots of `topology` until the
/// task is dropped; an accept error is retried after a back-off
/// ([`crate::listen`]), never the listener's end.
pub async fn serve(
    listener: TcpListener,
    topology: watch::Receiver<Arc<Topology>>,
    server_id: &str,
    limits: Limits,
    stats: Arc<Stats>,
) {
    let admission = Admission::new(&limits);
    serve_limited(
        listener,
        spawn_feed(topology),
        server_id,
        limits,
        stats,
        admission,
        None,
    )
    .await;
}

/// As [`serve`], from a feed shared with other listeners
/// ([`spawn_feed`]), with the subscribers counted in `admission` (its
/// total's `max` in place of [`Limits::max_subscribers`]), which the
/// listeners of every bind address share. Each subscriber holds a permit
/// of both limits from accept to close; past either a new one gets
/// `ERR busy` and is closed.
/// With `tls`, every connection is TLS (`index-tls yes`); the handshake
/// runs in the subscriber's task, holding its permit.
pub async fn serve_limited(
    listener: TcpListener,
    feed: Feed,
    server_id: &str,
    limits: Limits,
    stats: Arc<Stats>,
    admission: Admission,
    tls: Option<Arc<crate::tls::TlsContext>>,
) {
    let greeting = greeting(server_id, limits.heartbeat);
    let mut acceptor = crate::listen::Acceptor::new(listener, "index");
    loop {
        let (stream, peer) = acceptor.accept().await;
        let permit = admission.total.try_acquire().map(|total| {
            let per_address = admission.per_address.try_acquire(peer.ip());
            (total, per_address)
        });
        let permit = match permit {
            Some((total, Some(per_address))) => (total, per_address),
            refused => {
                let message = match refused {
                    None => "too many subscribers",
                    Some(_) => "too many subscribers from this address",
                };
                crate::metrics::index_refused(refused.is_some());
                let mut out = BytesMut::new();
                ServerMessage::Error {
                    code: "busy".into(),
                    message: message.into(),
                }
                .encode(&mut out);
                crate::tls::turn_away(tls.clone(), stream, "index", out.freeze()).await;
                continue;
            }
        };
        let feed = feed.clone();
        let greeting = greeting.clone();
        let stats = stats.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let stream = match tls {
                None => crate::tls::Stream::Plain(stream),
                Some(tls) => match crate::tls::accept(&tls, stream, "index").await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(%peer, "index subscriber: {e}");
                        return;
                    }
                },
            };
            let served = connection::run(stream, feed, greeting, limits, stats, permit);
            if let Err(e) = served.await {
                tracing::debug!(%peer, "index subscriber: {e}");
            }
        });
    }
}

/// A fresh run id; should the random source fail, one made of the
/// server id and the process id still differs from the last run's.
fn run_id(server_id: &str) -> String {
    crate::state::myid::random_id().unwrap_or_else(|_| {
        let mut id = format!("{:08x}", std::process::id());
        id.push_str(server_id.get(8..40).unwrap_or("0"));
        id
    })
}

/// The greeting of this server run. The run id changes with every start,
/// which tells consumers that versions have restarted.
fn greeting(server_id: &str, heartbeat: Duration) -> Bytes {
    let mut out = BytesMut::new();
    Greeting {
        version: PROTOCOL_VERSION,
        server: server_id.to_string(),
        run: run_id(server_id),
        heartbeat_ms: u64::try_from(heartbeat.as_millis()).unwrap_or(u64::MAX),
    }
    .encode(&mut out);
    out.freeze()
}
