//! `VALKYRIE <subcommand>`: Valkyrie's own command on the Sentinel port,
//! the one a sentinel does not have (an extension row of the command
//! table, left out of its listings). A real sentinel answers
//! `-ERR unknown command 'VALKYRIE'`, so a script can tell the two apart.
//!
//! # Format
//!
//! ```text
//! VALKYRIE READINESS <name>       -> verdict map | -ERR No such master with that name
//! VALKYRIE READINESS [<name> …]   -> *N of verdict maps (every group, in name order, when none)
//! VALKYRIE PAUSE|RESUME <pattern> …          -> *N of group names
//! VALKYRIE PAUSE|RESUME SELECTOR <selector>  -> *N of group names | -ERR …
//! VALKYRIE HELP                   -> *N +lines
//! ```
//!
//! A verdict map (flat array in RESP2) holds bulk strings in a fixed
//! order ([`verdict_map`]), then `holds` (labels) and `replicas` (maps);
//! `docs/readiness.md` ("On the Sentinel port") lists the fields. It is
//! read from the advertised topology, as `SENTINEL MASTER` reads it: no
//! round trip to the core.

use valkyrie_protocol::Frame;

use super::call::{Call, Lower, unknown_subcommand, wrong_arity};
use super::sentinel::NO_SUCH_MASTER;
use crate::core::select::Skip;
use crate::core::{FenceView, Readiness, Reason, ReplicaVerdict};
use crate::sentinel::commands::{self, COMMANDS};
use crate::topology::{Topology, Verdict};

/// The help, in `SENTINEL HELP`'s style.
const HELP: [&str; 18] = [
    "VALKYRIE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "READINESS [<primary-name> ...]",
    "    Show whether a failover of each primary (or of the named ones) could",
    "    run now, which replica it would promote, and what would hold it back.",
    "    Valkyrie's own command: a Sentinel does not have it.",
    "PAUSE <pattern> [<pattern> ...]",
    "    Pause failovers of the primaries whose names match (globs, * for all):",
    "    monitoring goes on, no promotion starts. Replies with their names.",
    "RESUME <pattern> [<pattern> ...]",
    "    End the pause of the primaries whose names match.",
    "PAUSE SELECTOR <label-selector>",
    "    Pause failovers of the primaries of the ValkeyCluster resources whose",
    "    labels match (Kubernetes syntax: tier=cache,env in (a,b),!canary).",
    "    A primary named SELECTOR: use the glob [S]ELECTOR.",
    "RESUME SELECTOR <label-selector>",
    "    End the pause of the primaries of those resources.",
    "HELP",
    "    Print this help.",
];

/// A parsed `VALKYRIE` subcommand.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Subcommand<'a> {
    /// `READINESS [<name> …]`.
    Readiness { names: &'a [&'a [u8]] },
    /// `PAUSE <pattern> …` (`paused`) or `RESUME <pattern> …`.
    Pause {
        /// Group names, or globs of them.
        patterns: &'a [&'a [u8]],
        /// Pause or resume.
        paused: bool,
    },
    /// `PAUSE SELECTOR <selector>` or `RESUME SELECTOR <selector>`
    /// (`SELECTOR` in any case).
    PauseSelector {
        /// The selector's text: one argument, or several to be joined
        /// with spaces (`tier in (a,b)` unquoted); none is an error.
        selector: &'a [&'a [u8]],
        /// Pause or resume.
        paused: bool,
    },
    /// `HELP`.
    Help,
}

impl<'a> Subcommand<'a> {
    /// Parses `VALKYRIE <sub> <rest…>`; the subcommand's arity is the
    /// command table's, and the errors are those of the other containers.
    pub(crate) fn parse(args: &'a [&'a [u8]]) -> Result<Subcommand<'a>, Frame> {
        let Some(sub) = args.get(1) else {
            return Err(wrong_arity("valkyrie"));
        };
        let lower = Lower::new(sub);
        let name = lower.as_str();
        let Some(id) =
            commands::lookup(&format!("valkyrie|{name}")).filter(|_| !name.contains('|'))
        else {
            return Err(unknown_subcommand("VALKYRIE", sub));
        };
        if !COMMANDS[id].arity_ok(args.len()) {
            return Err(wrong_arity(COMMANDS[id].name));
        }
        Ok(match name {
            "readiness" => Subcommand::Readiness { names: &args[2..] },
            "pause" | "resume"
                if args
                    .get(2)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"selector")) =>
            {
                Subcommand::PauseSelector {
                    selector: args.get(3..).unwrap_or_default(),
                    paused: name == "pause",
                }
            }
            "pause" | "resume" => Subcommand::Pause {
                patterns: &args[2..],
                paused: name == "pause",
            },
            _ => Subcommand::Help,
        })
    }
}

/// Runs `VALKYRIE <subcommand> …`, parsed first ([`Subcommand`]).
pub async fn run(call: &mut Call<'_>) -> Frame {
    match Subcommand::parse(call.args) {
        Ok(Subcommand::Pause { patterns, paused }) => {
            super::pause::run(call.handle, patterns, paused).await
        }
        Ok(Subcommand::PauseSelector { selector, paused }) => {
            super::pause::by_selector(call.handle, selector, paused).await
        }
        Ok(Subcommand::Help) => Frame::Array(HELP.iter().map(|l| Frame::simple(*l)).collect()),
        Ok(Subcommand::Readiness { names }) => {
            // A clone of the `Arc`: the watch's guard is not held while
            // the reply is built.
            let topology = call.handle.topology.borrow().clone();
            readiness(&topology, names)
        }
        Err(reply) => reply,
    }
}

/// `READINESS`'s reply: one map for one name, an array of maps for none
/// (every group) or several (in the order given). Any unknown name fails
/// the whole request; so do more names than there are groups, which
/// bounds the reply whatever a client sends.
pub(crate) fn readiness(topology: &Topology, names: &[&[u8]]) -> Frame {
    let verdict = |name: &str| topology.readiness.get(name).map(|v| &**v);
    if names.is_empty() {
        return Frame::Array(
            topology
                .groups
                .keys()
                .map(|name| verdict_map(name, verdict(name)))
                .collect(),
        );
    }
    let most = topology.groups.len().max(1);
    if names.len() > most {
        return Frame::error(format!(
            "ERR too many names: at most {most} (the number of groups) per request"
        ));
    }
    let mut maps = Vec::with_capacity(names.len());
    for raw in names {
        let Some(name) = std::str::from_utf8(raw)
            .ok()
            .filter(|n| topology.groups.contains_key(*n))
        else {
            return Frame::error(NO_SUCH_MASTER);
        };
        maps.push(verdict_map(name, verdict(name)));
    }
    if maps.len() == 1
        && let Some(one) = maps.pop()
    {
        return one;
    }
    Frame::Array(maps)
}

/// One group's verdict map. A group with no verdict yet (just
/// monitored) is not ready, for the reason `unknown`, with every other
/// field empty or zero.
pub(crate) fn verdict_map(name: &str, verdict: Option<&Verdict>) -> Frame {
    let mut out = Vec::with_capacity(20);
    let mut kv = |k: &str, v: String| out.push((Frame::bulk(k.to_string()), Frame::bulk(v)));
    kv("name", name.to_string());
    let Some(verdict) = verdict else {
        kv("ready", "0".into());
        kv("reason", "unknown".into());
        kv("text", "no verdict yet".into());
        for k in [
            "trigger",
            "candidate",
            "candidate-priority",
            "candidate-offset",
            "candidate-lag-bytes",
        ] {
            kv(k, String::new());
        }
        kv("until-ms", "0".into());
        kv("tilt", "0".into());
        for k in ["usable-sentinels", "quorum", "votes-needed", "fence"] {
            kv(k, String::new());
        }
        kv("fence-replicas", "0".into());
        kv("switchover-ready", "0".into());
        kv("switchover-to", String::new());
        out.push((Frame::bulk("holds"), Frame::Array(vec![])));
        out.push((Frame::bulk("replicas"), Frame::Array(vec![])));
        return Frame::Map(out);
    };
    let r = &verdict.readiness;
    kv("ready", flag(r.ready));
    kv("reason", r.label().into());
    kv("text", verdict.text());
    kv("trigger", r.trigger.label().into());
    let candidate = r.candidate.as_ref();
    kv("candidate", shown(candidate.map(|c| &c.addr)));
    kv("candidate-priority", shown(candidate.map(|c| c.priority)));
    kv("candidate-offset", shown(candidate.map(|c| c.offset)));
    kv(
        "candidate-lag-bytes",
        shown(candidate.and_then(|c| c.lag_bytes)),
    );
    kv("until-ms", until_ms(r, verdict.at).to_string());
    kv(
        "tilt",
        flag(r.holds.iter().any(|h| matches!(h, Reason::Tilt { .. }))),
    );
    // Alone (no peers), no quorum applies: empty, rather than a quorum
    // of sentinels that is never asked.
    kv("usable-sentinels", shown(r.quorum.map(|q| q.usable)));
    kv("quorum", shown(r.quorum.map(|q| q.quorum)));
    kv("votes-needed", shown(r.quorum.map(|q| q.needed)));
    kv("fence", r.fence.label().into());
    kv("fence-replicas", fence_replicas(r.fence).to_string());
    kv("switchover-ready", flag(r.manual.is_ok()));
    kv("switchover-to", shown(r.manual.as_ref().ok()));
    let holds = r.holds.iter().map(|h| Frame::bulk(h.label())).collect();
    out.push((Frame::bulk("holds"), Frame::Array(holds)));
    let replicas = r.replicas.iter().map(replica_map).collect();
    out.push((Frame::bulk("replicas"), Frame::Array(replicas)));
    Frame::Map(out)
}

/// One replica of the verdict: `addr`, `eligible`, `reason` (why not),
/// `priority`, `offset` (empty until reported).
fn replica_map(r: &ReplicaVerdict) -> Frame {
    Frame::Map(
        [
            ("addr", r.addr.to_string()),
            ("eligible", flag(r.skip.is_none())),
            ("reason", shown(r.skip.map(Skip::label))),
            ("priority", shown(r.priority)),
            ("offset", shown(r.offset)),
        ]
        .into_iter()
        .map(|(k, v)| (Frame::bulk(k), Frame::bulk(v)))
        .collect(),
    )
}

/// The time left, as of the verdict, of its first hold that ends at a
/// known time (a back-off window, a pending configuration, the wait for
/// the witnesses); 0 when none does.
fn until_ms(r: &Readiness, at: crate::core::Millis) -> u64 {
    r.holds
        .iter()
        .find_map(|h| match h {
            Reason::Window { until }
            | Reason::PendingConfig { until, .. }
            | Reason::WitnessWait { until } => Some(until.saturating_sub(at)),
            _ => None,
        })
        .unwrap_or(0)
}

/// The replicas the write fence requires in force: 0 when it is off, not
/// in force or refused.
fn fence_replicas(fence: FenceView) -> u64 {
    match fence {
        FenceView::InForce { replicas } => replicas,
        FenceView::Relaxed { in_force, .. } => in_force,
        FenceView::Off | FenceView::NotInForce | FenceView::Refused => 0,
    }
}

/// `1` or `0`.
fn flag(on: bool) -> String {
    if on { "1" } else { "0" }.into()
}

/// A value, or empty when unknown.
fn shown(v: Option<impl ToString>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}
