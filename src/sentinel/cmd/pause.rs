//! `VALKYRIE PAUSE <pattern> …` and `VALKYRIE RESUME <pattern> …`: the
//! groups whose names match a pattern (a name, or a glob as `SENTINEL
//! RESET` takes; `*` for every group) are paused or resumed. The reply is
//! an array of their names, sent once the change is persisted.
//!
//! While paused, monitoring, events, pushes and the status page go on and
//! no promotion starts (`docs/readiness.md`, "Pause and resume").

use valkyrie_protocol::Frame;

use super::pubsub::glob_match;
use crate::runtime::Handle;

/// At most this many patterns per request: the work stays bounded
/// whatever a client sends.
const MAX_PATTERNS: usize = 64;

/// Runs `PAUSE` (`paused`) or `RESUME` over the groups `patterns` match.
pub(crate) async fn run(handle: &Handle, patterns: &[&[u8]], paused: bool) -> Frame {
    if patterns.len() > MAX_PATTERNS {
        return Frame::error(format!("ERR too many patterns: at most {MAX_PATTERNS}"));
    }
    let groups = matching(&handle.topology.borrow().clone(), patterns);
    match handle.pause(groups.clone(), paused).await {
        Ok(()) => Frame::Array(groups.into_iter().map(Frame::bulk).collect()),
        Err(e) => Frame::error(e.to_string()),
    }
}

/// The groups, in name order, whose names match any of `patterns`.
pub(crate) fn matching(topology: &crate::topology::Topology, patterns: &[&[u8]]) -> Vec<String> {
    topology
        .groups
        .keys()
        .filter(|name| patterns.iter().any(|p| glob_match(p, name.as_bytes())))
        .cloned()
        .collect()
}
