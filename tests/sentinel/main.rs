//! The Sentinel port, one module a subject: its commands and their exact
//! bytes next to a real valkey-sentinel, authentication and ACL, bad and
//! malformed input, protected mode, event bursts, descriptor limits, the
//! names, identity and managed groups it shows, and Valkyrie's own
//! `VALKYRIE READINESS`.
//!
//! One test binary for all of them, so that the daemon and `support` are
//! compiled once; scripts/run-tests.py still runs each module in a process
//! of its own (`sentinel <module>::`), as when each was a binary.

#[path = "../support/mod.rs"]
mod support;

mod acl_differential;
mod admin;
mod announced;
mod auth;
mod bad_input;
mod bounds_differential;
mod command_differential;
mod debug_differential;
mod debug_timers;
mod hostnames;
mod managed_groups;
mod names_identity;
mod odd_names;
mod per_daemon;
mod ports_survive;
mod protected_mode;
mod protocol_errors;
mod pubsub_burst;
mod readiness;
mod refusals;
mod wire;
