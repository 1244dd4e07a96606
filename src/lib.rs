//! Valkyrie: a failover and discovery daemon for Valkey that speaks the
//! Sentinel protocol.
//!
//! # Layout
//!
//! - `valkyrie_protocol` (the `protocol/` package): RESP2/RESP3 frames,
//!   decoders, encoder and codecs.
//! - [`config`]: `sentinel.conf` parsing, validation and overrides.
//! - [`core`]: the sans-IO decision core (failure detection, failover).
//! - [`state`]: the atomically written state file.
//! - [`link`]: one task per Valkey instance (PING, INFO, commands).
//! - [`runtime`]: the shell that drives the core and carries out its
//!   decisions.
//! - [`sentinel`]: the Sentinel protocol server.
//! - [`admin`]: the admin HTTP port (`/metrics`, `/healthz`, `/readyz`);
//!   [`metrics`]: metric names, descriptions and recording helpers;
//!   [`telemetry`]: logging setup.
//! - [`index`]: the topology-push ("index") server.
//! - [`tls`]: TLS on the ports and links, certificates reloaded live.
//! - [`daemon`]: listeners, signals; [`demo`]: `valkyrie demo`;
//!   [`watch`]: `valkyrie watch`.
//!
//! The failover engine, the Sentinel protocol server and the topology-push
//! server are built on it (see `docs/architecture.md`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admin;
pub mod backoff;
pub mod config;
pub mod core;
pub mod daemon;
pub mod demo;
pub mod events;
pub mod index;
#[cfg(feature = "kubernetes")]
pub mod kube;
pub mod link;
pub mod listen;
pub mod metrics;
pub mod peer;
pub mod runtime;
pub mod sentinel;
pub mod state;
pub mod telemetry;
pub mod tls;
pub mod watch;

pub use valkyrie_protocol as protocol;
