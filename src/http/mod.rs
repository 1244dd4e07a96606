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
//! [`hub::Hub`], optionally behind basic or bearer auth ([`auth`]), and
//! the API's writes — planned switchovers, pause and resume ([`plans`]) —
//! taken only with credentials configured.
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

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;

#[cfg(test)]
use tokio::io::{AsyncReadExt, AsyncWriteExt};
#[cfg(test)]
use tokio::net::TcpStream;

#[cfg(doc)]
use crate::listen::ConnectionLimit;

mod api;
pub mod auth;
mod document;
pub mod hub;
mod page;
mod plans;
mod probes;
mod records;
mod reply;
mod routes;
mod server;
mod sse;
mod state;
mod verdict;

pub use server::serve;
#[cfg(test)]
use server::{Request, Slots, find_head_end, parse_request_line};
pub use state::{AdminState, Limits, RequestError};

/// Binds the admin port, with Valkey's listen backlog (511).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::listen::bind(addr)
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
