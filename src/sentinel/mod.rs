//! The Sentinel protocol server: existing Sentinel-aware clients and
//! `valkey-cli SENTINEL …` talk to Valkyrie as they would to Sentinel.
//!
//! This module owns the listener ([`serve`]), the per-connection loop
//! ([`connection`]) and the commands (`cmd/`, one file per family). Replies
//! are byte-exact to Valkey 8's Sentinel (`sentinel-protocol.md`).
//!
//! Commands: `SENTINEL` (every subcommand of Valkey 8.0.1 with its
//! aliases), `PING`, `HELLO`, `AUTH`, `ACL` (users, rules enforced on
//! every request: [`acl`]), `CLIENT`, `INFO`,
//! `ROLE`, `COMMAND`, `PUBLISH`, `SHUTDOWN`, and the pub/sub commands; and
//! Valkyrie's own `VALKYRIE READINESS`, left out of the command listings
//! ([`commands`]). The connected clients are in [`clients`].

pub mod acl;
pub mod auth;
pub mod clients;
pub mod cmd;
pub mod commands;
pub mod connection;
pub mod protected;

use std::net::SocketAddr;

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::runtime::Handle;
use connection::Shared;

/// Accepts connections until the task is dropped; an accept error (out of
/// descriptors …) is retried after a back-off ([`crate::listen`]), never
/// the listener's end. Each client holds a permit of `shared.clients`
/// (`maxclients`, one count for every listen address of the daemon); past
/// it, a new client gets Valkey's error and is closed.
///
/// With `tls`, every connection is TLS: the handshake runs in the
/// connection's own task (bounded by [`crate::tls::HANDSHAKE_TIMEOUT`],
/// counting against `maxclients` meanwhile), with the certificates in use
/// when it starts.
pub async fn serve(
    listener: TcpListener,
    handle: Handle,
    shared: Arc<Shared>,
    tls: Option<Arc<crate::tls::TlsContext>>,
) {
    let mut acceptor = crate::listen::Acceptor::new(listener, "sentinel");
    loop {
        let (stream, peer) = acceptor.accept().await;
        let Some(permit) = shared.clients.try_acquire() else {
            crate::metrics::sentinel_rejected();
            connection::Totals::add(&shared.totals.rejected, 1);
            crate::tls::turn_away(
                tls.clone(),
                stream,
                "sentinel",
                bytes::Bytes::from_static(b"-ERR max number of clients reached\r\n"),
            )
            .await;
            continue;
        };
        let handle = handle.clone();
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let stream = match tls {
                None => crate::tls::Stream::Plain(stream),
                Some(tls) => match crate::tls::accept(&tls, stream, "sentinel").await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(%peer, "sentinel client: {e}");
                        return;
                    }
                },
            };
            if let Err(e) = connection::run(stream, handle, shared, permit).await {
                tracing::debug!(%peer, "sentinel client: {e}");
            }
        });
    }
}

/// Binds the Sentinel port, with Valkey's listen backlog (511).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::listen::bind(addr)
}
