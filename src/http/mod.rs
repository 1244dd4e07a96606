//! The admin HTTP port (default 9126):
//!
//! - `GET /metrics`: Prometheus text format, rendered by
//!   `metrics-exporter-prometheus` (see [`crate::metrics`]);
//! - `GET /healthz`: 200 while the process serves requests and its
//!   runtime runs (liveness), with the body `ok`, or `degraded: state file
//!   not writable: …` while decisions wait for the state file (a restart
//!   would not free the disk: the metric `valkyrie_state_file_writable`
//!   is what to alert on); 503 once the runtime has stopped (the process
//!   then exits, see `daemon.rs`);
//! - `GET /readyz`: 200 once the readiness latch is released —
//!   configuration loaded, state restored, every configured instance
//!   probed once (`runtime::Handle::ready`) — while the runtime runs; 503
//!   otherwise.
//!
//! `HEAD` works on the same paths. The same port serves the status page
//! (`GET /`, [`page`]) and its JSON API (`/api/v1/groups`,
//! `/api/v1/events`, [`api`]; `/api/v1/stream`, [`sse`]), all fed by one
//! [`hub::Hub`], optionally behind basic or bearer auth ([`auth`]).
//!
//! This module owns the port's state, bounds and routes; [`server`] owns
//! the listener and each connection (its request head read and checked
//! before axum and hyper answer it), [`probes`] the three paths above.
//!
//! Slow clients cannot starve health probes: each connection is served by
//! its own task; the whole request head must arrive within
//! [`Limits::read_timeout`] (2 s); and past [`Limits::max_connections`]
//! (counted by a [`ConnectionLimit`], as on the other ports) a new
//! connection is not refused but takes the place, and the permit, of the
//! oldest one (preferably one still sending its head), which is closed at
//! once. A probe sends its head at once and is answered in microseconds,
//! so a flood of slow connections only ever evicts itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::watch;

#[cfg(test)]
use tokio::io::{AsyncReadExt, AsyncWriteExt};
#[cfg(test)]
use tokio::net::TcpStream;

#[cfg(doc)]
use crate::listen::ConnectionLimit;

mod api;
pub mod auth;
pub mod hub;
mod page;
mod probes;
mod server;
mod sse;

pub use server::serve;
#[cfg(test)]
use server::{Request, Slots, find_head_end, parse_request_line};

/// Bounds on what one admin client may cost.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request head (request line and headers) read.
    pub max_head: usize,
    /// Time allowed to send the whole request head.
    pub read_timeout: Duration,
    /// Time allowed to take the response.
    pub write_timeout: Duration,
    /// Connections served at once; a new one past it evicts the oldest.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head: 8 * 1024,
            read_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(10),
            max_connections: 64,
        }
    }
}

/// What the admin port serves from.
#[derive(Clone, Debug)]
pub struct AdminState {
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The readiness latch; its sender lives as long as the runtime.
    pub ready: watch::Receiver<bool>,
    /// Trouble the runtime reports without stopping.
    pub health: watch::Receiver<crate::runtime::Health>,
    /// `admin-tls yes`: every connection is HTTPS, the handshake bounded
    /// by the read timeout.
    pub tls: Option<Arc<crate::tls::TlsContext>>,
    /// The status page's and API's source (`None`: they answer 404).
    pub status: Option<Arc<hub::Hub>>,
    /// Credentials the status page and API ask for (`None`: open).
    pub auth: Option<Arc<auth::Auth>>,
}

/// Why a request could not be answered normally.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The head did not fit in [`Limits::max_head`].
    #[error("request head larger than {0} bytes")]
    TooLarge(usize),
    /// The client did not send a whole head in time.
    #[error("request head not received in time")]
    Timeout,
    /// The request line is not `METHOD SP TARGET SP HTTP/1.x`.
    #[error("malformed request line")]
    Malformed,
    /// The connection closed before a whole head arrived.
    #[error("connection closed before the request was complete")]
    Closed,
    /// Reading failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Binds the admin port, with Valkey's listen backlog (511).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::listen::bind(addr)
}

/// Every path the admin port answers once the head was read and checked:
/// the probes, open to all; the status page and API, behind
/// [`auth::require`].
fn router(state: AdminState) -> axum::Router {
    use axum::routing::get;
    let status = axum::Router::new()
        .route("/", get(page::index))
        .route("/app.css", get(page::css))
        .route("/app.js", get(page::js))
        .route("/api/v1/groups", get(api::groups))
        .route("/api/v1/events", get(api::events))
        .route(server::STREAM_PATH, get(sse::stream))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require,
        ));
    axum::Router::new()
        .route("/metrics", get(probes::metrics))
        .route("/healthz", get(probes::healthz))
        .route("/readyz", get(probes::readyz))
        .merge(status)
        .fallback(probes::not_found)
        .with_state(state)
}

/// Runs the recorder's upkeep every [`crate::metrics::UPKEEP_PERIOD`]
/// until dropped, so histograms are drained between scrapes.
pub async fn upkeep(handle: PrometheusHandle) {
    let mut every = tokio::time::interval(crate::metrics::UPKEEP_PERIOD);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        handle.run_upkeep();
    }
}

#[cfg(test)]
mod tests;
