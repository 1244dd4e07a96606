//! Valkyrie: a failover and discovery daemon for Valkey that speaks the
//! Sentinel protocol.
//!
//! # Layout
//!
//! - `valkyrie_protocol` (the `protocol/` package): RESP2/RESP3 frames,
//!   decoders, encoder and codecs.
//! - [`config`]: `sentinel.conf` parsing, validation and overrides.
//! - [`core`] (the `core/` package, `valkyrie-core`): the sans-IO
//!   decision core (failure detection, failover, the peer protocol's
//!   rules, the write fence); a crate of its own, so it cannot reach
//!   anything of the daemon.
//! - [`state`]: the atomically written state file.
//! - [`link`]: one task per Valkey instance (PING, INFO, commands, hellos).
//! - [`peer`]: links to peer sentinels (Valkyries and valkey-sentinels).
//! - [`runtime`]: the shell that drives the core and carries out its
//!   decisions; [`events`]: the event bus it publishes to; [`plan`]:
//!   planned switchovers across many groups, carried out.
//! - [`topology`]: the read side — what the ports show of the core, one
//!   revision per group.
//! - [`sentinel`]: the Sentinel protocol server and its ACL.
//! - [`index`]: the topology-push ("index") server.
//! - [`http`]: the admin HTTP port (`/metrics`, `/healthz`, `/readyz`,
//!   the status page and its JSON API); [`metrics`]: metric names,
//!   descriptions and recording helpers; [`telemetry`]: logging setup.
//! - [`listen`]: listeners, per-address and descriptor limits.
//! - [`scripts`]: Sentinel's notification and client-reconfig scripts,
//!   queued, run, retried and killed as Sentinel does.
//! - [`tls`]: TLS on the ports and links, certificates reloaded live.
//! - `kube` (the `kubernetes` feature): `ValkeyCluster` resources as a
//!   second input, their reconciler and its Lease.
//! - [`daemon`]: start, signals; [`demo`]: `valkyrie demo`;
//!   [`watch`]: `valkyrie watch`; [`backoff`]: retry delays.
//!
//! The modules stand on floors — foundations, links, the read side, the
//! shell, the ports, the daemon — and import only their own floor and
//! those below (`src/tests/layering.rs` checks it; see
//! `docs/architecture.md`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod backoff;
pub mod config;
pub mod http;
/// The sans-IO decision core, a crate of its own (`core/`): see
/// [`valkyrie_core`].
pub use valkyrie_core as core;
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
pub mod plan;
pub mod runtime;
pub mod scripts;
pub mod sentinel;
pub mod state;
pub mod telemetry;
#[cfg(test)]
mod tests;
pub mod tls;
pub mod topology;
pub mod watch;

pub use valkyrie_protocol as protocol;
