//! Kubernetes input: `ValkeyCluster` custom resources (`valkeyclusters.valkyrie.io`)
//! reconciled into a Valkey StatefulSet and its Services, and turned into
//! failover groups of the core; the Lease that elects the one reconciler.
//!
//! Failover decisions never come from here: they come from peering, as
//! everywhere (`docs/peering.md`). The Lease elects only the reconciler,
//! the single writer of child objects and CR status.

pub mod controller;
pub mod crd;
pub mod elector;
pub mod error;
pub mod groups;
pub mod input;
pub mod labels;
pub mod metrics;
pub mod render;
#[cfg(test)]
mod tests;
