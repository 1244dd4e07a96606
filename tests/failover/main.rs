//! Failover with real valkey-server processes, one module a subject: a
//! killed master, more scenarios, stale state at restart, renamed
//! commands, network partitions, the write fence (and what a switchover
//! under it answers writers), the readiness verdict,
//! why a failover was not done (`refusals`), trouble in one place
//! (`resilience`, CPU-bound: run alone) and the migration of a
//! three-sentinel deployment.
//!
//! One test binary for all of them, so that the daemon and `support` are
//! compiled once; scripts/run-tests.py still runs each module in a process
//! of its own (`failover <module>::`), as when each was a binary.

#[path = "../support/mod.rs"]
mod support;

mod master_killed;
mod migration;
mod partition;
mod pause;
mod plans;
mod readiness;
mod refusals;
mod renamed_commands;
mod resilience;
mod route;
mod scenarios;
mod scripts;
mod simulate_failure;
mod stale_state;
mod switchover_fence;
mod verdicts;
mod write_fence;
