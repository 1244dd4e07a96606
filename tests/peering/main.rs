//! Valkyries and real valkey-sentinels as peers (sentinel-peering.md
//! §11), one module a subject: the peer-facing commands, the wire with a
//! scripted fake peer, three Valkyries, mixed deployments, the race
//! (ignored: `scripts/test --slow`), attacks and the trust rules.
//!
//! One test binary for all of them, so that the daemon and `support` are
//! compiled once; scripts/run-tests.py still runs each module in a process
//! of its own (`peering <module>::`), as when each was a binary.

#[path = "../support/mod.rs"]
mod support;

mod attacks;
mod commands;
mod mixed;
mod race;
mod trio;
mod trust;
mod verdict;
mod wire;
