//! The read side: what the protocol servers show of the core.
//!
//! - `views.rs`: the advertised values — [`Topology`], one [`GroupView`]
//!   per group, [`InstanceView`], [`PeerView`] — and the one rule saying
//!   whether a group's view changed ([`GroupView::advertises_same`]);
//! - `build.rs`: one group's view from the core's group;
//! - `advertiser.rs`: the [`Advertiser`], fed the groups each step
//!   changed, which rebuilds only those, counts their revisions and wakes
//!   the readers;
//! - `readiness.rs`: each group's readiness [`Verdict`], judged by the
//!   core whenever its view is rebuilt;
//! - `selection.rs`: which groups an operator means ([`Selection`]: names,
//!   globs, a Kubernetes [`LabelSelector`] over the resources' labels),
//!   resolved against the [`Topology`].
//!
//! The Sentinel, index and HTTP ports and the Kubernetes status read a
//! `watch::Receiver<Arc<Topology>>` and nothing else of the runtime. The
//! index port publishes a group's revision as its version, so nothing
//! downstream compares views again.

mod advertiser;
mod build;
mod readiness;
mod selection;
#[cfg(test)]
pub(crate) mod tests;
mod views;

pub use advertiser::{Advertiser, Changed, Revisions, VIEW_REFRESH};
pub use readiness::{Verdict, hold_data, wall_ms};
pub use selection::{
    LabelSelector, MAX_GLOB_BYTES, MAX_GLOBS, MAX_NAMES, MAX_REQUIREMENTS, MAX_SELECTOR_BYTES,
    Selection, SelectionError,
};
pub use views::{GroupView, InstanceView, PeerView, Topology, Upstream};
