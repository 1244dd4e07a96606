//! Real client libraries (Python, Node, Rust, Java, Go and valkey-cli)
//! through the Sentinel port and a real failover, one module a
//! deployment: one Valkyrie, three Valkyries as peers, side by side with
//! real valkey-sentinels, a dotted master name, and over TLS. The drivers
//! are the scripts and projects next to this file (`tests/clients/`).
//!
//! One test binary for all of them, so that the daemon and `support` are
//! compiled once; scripts/run-tests.py still runs each module in a process
//! of its own (`clients <module>::`), as when each was a binary.

#[path = "../support/mod.rs"]
mod support;

mod failover;
mod java_go;
mod master_name;
mod peers;
mod tls;
mod tls_java_go;
