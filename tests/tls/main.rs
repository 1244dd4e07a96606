//! TLS with real processes, one module a subject: every link and port
//! end to end, certificate checks and reloads, `valkyrie watch --tls`,
//! and the benchmark against a real valkey-sentinel (ignored). The client
//! libraries over TLS are in the `clients` binary.
//!
//! One test binary for all of them, so that the daemon and `support` are
//! compiled once; scripts/run-tests.py still runs each module in a process
//! of its own (`tls <module>::`), as when each was a binary.

#[path = "../support/mod.rs"]
mod support;

mod bench;
mod end_to_end;
mod reload;
mod watch;
