//! The index (topology-push) port, one module a subject: against real
//! valkey-server processes through a failover and a daemon restart, and
//! slow subscribers and limits on the index server itself.
//!
//! One test binary for both, so that the daemon and `support` are
//! compiled once; scripts/run-tests.py still runs each module in a process
//! of its own (`index <module>::`), as when each was a binary.

#[path = "../support/mod.rs"]
mod support;

mod real_servers;
mod slow;
