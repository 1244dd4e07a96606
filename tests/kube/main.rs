//! The Kubernetes input against a real kube-apiserver and etcd
//! (`support::kube`), one module a subject: the CRD, the reconciler and
//! its TLS, role labels, the Lease elector in process and between two
//! daemon processes, failover of pods, the endpoints benchmark (ignored),
//! what the RBAC allows, pausing by label selector, and the container
//! images that a node runs (`scripts/images`). Built with the
//! `kubernetes` feature only.
//!
//! One test binary for all of them, so that the daemon and `support` are
//! compiled once; scripts/run-tests.py still runs each module in a process
//! of its own (`kube <module>::`), as when each was a binary.

#![cfg(feature = "kubernetes")]

#[path = "../support/mod.rs"]
mod support;

mod helpers;

mod crd;
mod endpoints;
mod failover;
mod images;
mod labels;
mod lease;
mod processes;
mod rbac;
mod reconcile;
mod retiring;
mod selector;
mod tls;
