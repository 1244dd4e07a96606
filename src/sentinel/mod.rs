//! The Sentinel protocol server: existing Sentinel-aware clients and
//! `valkey-cli SENTINEL …` talk to Valkyrie as they would to Sentinel.
//!
//! This module owns the listener ([`serve`]), the per-connection loop
//! ([`connection`]) and the commands (`cmd/`, one file per family). Replies
//! are byte-exact to Valkey 8's Sentinel (`sentinel-protocol.md`).
//!
//! So far: `PING`, `ROLE`, `SENTINEL get-master-addr-by-name` (and
//! `get-primary-addr-by-name`), `SENTINEL failover`, and Sentinel's exact
//! errors for everything else. The rest of the command set is the work of
//! the Sentinel-protocol issue.

pub mod auth;
pub mod cmd;
pub mod connection;

use std::net::SocketAddr;

use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::runtime::Handle;
use auth::Security;

/// Accepts connections until the listener fails or the task is dropped.
/// Past `maxclients`, a new client gets Valkey's error and is closed.
pub async fn serve(
    listener: TcpListener,
    handle: Handle,
    security: Arc<Security>,
    maxclients: usize,
) -> std::io::Result<()> {
    loop {
        let (mut stream, peer) = listener.accept().await?;
        if connection::CONNECTED.load(std::sync::atomic::Ordering::Relaxed) >= maxclients {
            crate::metrics::sentinel_rejected();
            tokio::spawn(async move {
                let _ = stream
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
            });
            continue;
        }
        let handle = handle.clone();
        let security = security.clone();
        tokio::spawn(async move {
            if let Err(e) = connection::run(stream, handle, security).await {
                tracing::debug!(%peer, "sentinel client: {e}");
            }
        });
    }
}

/// Binds the Sentinel port.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}
