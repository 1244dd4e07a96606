//! `VALKYRIE PAUSE <pattern> …` and `VALKYRIE RESUME <pattern> …`: the
//! groups whose names match a pattern (a name, or a glob as `SENTINEL
//! RESET` takes; `*` for every group) are paused or resumed. The reply is
//! an array of their names, sent once the change is persisted.
//!
//! `VALKYRIE PAUSE SELECTOR <selector>` and `RESUME SELECTOR <selector>`
//! do the same for the groups of the `ValkeyCluster` resources whose
//! labels a Kubernetes label selector matches
//! ([`Selection`](crate::topology::Selection)); a selector that matches
//! nothing, or does not parse, is an error. A group literally named
//! `SELECTOR` is still reached with a glob such as `[S]ELECTOR`.
//!
//! While paused, monitoring, events, pushes and the status page go on and
//! no promotion starts (`docs/readiness.md`, "Pause and resume").

use valkyrie_protocol::Frame;

use super::pubsub::glob_match;
use crate::runtime::Handle;
use crate::topology::{LabelSelector, Selection};

/// At most this many patterns per request: the work stays bounded
/// whatever a client sends.
const MAX_PATTERNS: usize = 64;

/// Runs `PAUSE` (`paused`) or `RESUME` over the groups `patterns` match.
pub(crate) async fn run(handle: &Handle, patterns: &[&[u8]], paused: bool) -> Frame {
    if patterns.len() > MAX_PATTERNS {
        return Frame::error(format!("ERR too many patterns: at most {MAX_PATTERNS}"));
    }
    let groups = matching(&handle.topology.borrow().clone(), patterns);
    apply(handle, groups, paused).await
}

/// Runs `PAUSE SELECTOR` (`paused`) or `RESUME SELECTOR` over the groups
/// the selector in `words` (joined with spaces) selects.
pub(crate) async fn by_selector(handle: &Handle, words: &[&[u8]], paused: bool) -> Frame {
    // The watch's guard is dropped before the request is awaited.
    let topology = handle.topology.borrow().clone();
    match selected(&topology, words) {
        Ok(groups) => apply(handle, groups, paused).await,
        Err(reply) => reply,
    }
}

/// Pauses or resumes `groups`; replies with their names.
async fn apply(handle: &Handle, groups: Vec<String>, paused: bool) -> Frame {
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

/// The groups, in name order, that the selector in `words` selects, or
/// the error reply: no selector, too many words, not UTF-8, not a
/// selector, or nothing selected.
pub(crate) fn selected(
    topology: &crate::topology::Topology,
    words: &[&[u8]],
) -> Result<Vec<String>, Frame> {
    if words.is_empty() {
        return Err(Frame::error(
            "ERR SELECTOR needs a label selector, such as tier=cache \
             (a group named SELECTOR: use the glob [S]ELECTOR)",
        ));
    }
    if words.len() > MAX_PATTERNS {
        return Err(Frame::error(format!(
            "ERR too many arguments: at most {MAX_PATTERNS} (quote the selector)"
        )));
    }
    let mut text = Vec::new();
    for w in words {
        if !text.is_empty() {
            text.push(b' ');
        }
        text.extend_from_slice(w);
    }
    let text = String::from_utf8(text)
        .map_err(|_| Frame::error("ERR bad label selector: it is not UTF-8"))?;
    let selector: LabelSelector = text.parse().map_err(|e| Frame::error(format!("ERR {e}")))?;
    Selection {
        selector: Some(selector),
        ..Selection::default()
    }
    .resolve(topology)
    .map_err(|e| Frame::error(format!("ERR {e}")))
}
