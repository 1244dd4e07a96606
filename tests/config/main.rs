//! Configuration files and packaging, one module a subject:
//! `valkyrie check-config` on real files, and the sentinel.conf, ports,
//! paths and user that the Dockerfile and the manifests name.
//!
//! One test binary for both; scripts/run-tests.py still runs each module
//! in a process of its own (`config <module>::`), as when each was a
//! binary.

mod check_config;
mod packaging;
