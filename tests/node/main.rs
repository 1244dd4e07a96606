//! Tests on a real one-node Kubernetes cluster (`support::cluster`):
//! kubelet, containerd and runc run real pods from real images, next to
//! the control plane, kube-proxy and CoreDNS, all inside a network
//! namespace of the test's; Valkyrie installed on it from `deploy/`
//! with a ValkeyCluster (`install`); and faults with writers running,
//! Valkyrie beside the usual Sentinel layout (`faults`, `classic`,
//! `groups`, `writer`, `settle`); rolling operations (updates, scales, pod
//! deletion, a drain) beside the same layout (`operations`). Needs root, the binaries of
//! `VALKYRIE_KUBE_NODE=1 scripts/kube-testbin` and the images of
//! `scripts/images`; scripts/test provides them. Built with the
//! `kubernetes` feature only.
//!
//! A binary of its own because a node is a machine-wide resource: its
//! modules take turns on one lock, and scripts/run-tests.py runs them
//! alone, never beside another unit.

#![cfg(feature = "kubernetes")]

#[path = "../support/mod.rs"]
mod support;

mod classic;
mod cluster;
mod faults;
mod groups;
mod install;
mod operations;
mod settle;
mod setup;
mod writer;
