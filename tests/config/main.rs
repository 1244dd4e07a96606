//! Configuration files and packaging, one module a subject:
//! `valkyrie check-config` on real files, the sentinel.conf, ports,
//! paths and user that the Dockerfile and the manifests name, and daemons
//! started from ordinary files (ports, `logfile`).
//!
//! One test binary for both; scripts/run-tests.py still runs each module
//! in a process of its own (`config <module>::`), as when each was a
//! binary.

mod check_config;
mod daemon_start;
mod packaging;
