//! What `SENTINEL` describes: the instance maps of `MASTERS`, `MASTER`
//! and `REPLICAS`, `HELP` and `INFO-CACHE`.

use valkyrie_protocol::Frame;

use super::super::call::{kv, since};
use crate::core::Millis;
use crate::topology::{GroupView, InstanceView, Upstream};

/// Sentinel 8.0.1's text, verbatim.
pub(super) const HELP: [&str; 49] = [
    "SENTINEL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CKQUORUM <primary-name>",
    "    Check if the current Sentinel configuration is able to reach the quorum",
    "    needed to failover a primary and the majority needed to authorize the",
    "    failover.",
    "CONFIG SET param value [param value ...]",
    "    Set a global Sentinel configuration parameter.",
    "CONFIG GET <param> [param param param ...]",
    "    Get global Sentinel configuration parameter.",
    "DEBUG [<param> <value> ...]",
    "    Show a list of configurable time parameters and their values (milliseconds).",
    "    Or update current configurable parameters values (one or more).",
    "GET-PRIMARY-ADDR-BY-NAME <primary-name>",
    "    Return the ip and port number of the primary with that name.",
    "FAILOVER <primary-name>",
    "    Manually failover a primary node without asking for agreement from other",
    "    Sentinels",
    "FLUSHCONFIG",
    "    Force Sentinel to rewrite its configuration on disk, including the current",
    "    Sentinel state.",
    "INFO-CACHE <primary-name>",
    "    Return last cached INFO output from primaries and all its replicas.",
    "IS-PRIMARY-DOWN-BY-ADDR <ip> <port> <current-epoch> <runid>",
    "    Check if the primary specified by ip:port is down from current Sentinel's",
    "    point of view.",
    "PRIMARY <primary-name>",
    "    Show the state and info of the specified primary.",
    "PRIMARIES",
    "    Show a list of monitored primaries and their state.",
    "MONITOR <name> <ip> <port> <quorum>",
    "    Start monitoring a new primary with the specified name, ip, port and quorum.",
    "MYID",
    "    Return the ID of the Sentinel instance.",
    "PENDING-SCRIPTS",
    "    Get pending scripts information.",
    "REMOVE <primary-name>",
    "    Remove primary from Sentinel's monitor list.",
    "REPLICAS <primary-name>",
    "    Show a list of replicas for this primary and their states.",
    "RESET <pattern>",
    "    Reset primaries for specific primary name matching this pattern.",
    "SENTINELS <primary-name>",
    "    Show a list of Sentinel instances for this primary and their state.",
    "SET <primary-name> <option> <value> [<option> <value> ...]",
    "    Set configuration parameters for certain primaries.",
    "SIMULATE-FAILURE [CRASH-AFTER-ELECTION] [CRASH-AFTER-PROMOTION] [HELP]",
    "    Simulate a Sentinel crash.",
    "HELP",
    "    Print this help.",
];

/// `*2k` of `$name`, then `*(1+replicas)` of `[:age_ms, INFO]`: the last
/// INFO text each instance answered (the sections Valkyrie asks for:
/// `server`, `replication`, `keyspace`), with its age; `0` and null for
/// one that never answered, as Sentinel.
pub(super) fn info_cache(
    topology: &crate::topology::Topology,
    texts: &crate::link::InfoTexts,
    names: &[&[u8]],
) -> Frame {
    let mut out = Vec::new();
    for (name, g) in &topology.groups {
        if !names.is_empty() && !names.contains(&name.as_bytes()) {
            continue;
        }
        out.push(Frame::bulk(name.clone()));
        let entries = std::iter::once(&g.master_details)
            .chain(g.replicas.iter())
            .map(|i| match texts.get(name, &i.addr) {
                Some((age, text)) => Frame::Array(vec![
                    Frame::Integer(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)),
                    Frame::bulk(text.to_string()),
                ]),
                None => Frame::Array(vec![Frame::Integer(0), Frame::NullBulk]),
            })
            .collect();
        out.push(Frame::Array(entries));
    }
    Frame::Array(out)
}

/// Fields every instance has, up to `last-ping-reply` (and the down
/// times), in Valkey's order.
fn common(
    out: &mut Vec<(Frame, Frame)>,
    name: &str,
    i: &InstanceView,
    flags: &str,
    failover_state: Option<&str>,
    g: &GroupView,
    now: Millis,
) {
    let odown = g.odown && i.addr == g.master;
    kv(out, "name", name);
    kv(out, "ip", &i.addr.host);
    kv(out, "port", i.addr.port);
    kv(out, "runid", &i.run_id);
    kv(out, "flags", flags);
    kv(out, "link-pending-commands", 0);
    kv(out, "link-refcount", 1);
    if let Some(state) = failover_state {
        kv(out, "failover-state", state);
    }
    let silent = since(now, i.last_ok);
    // A PING is outstanding only while the instance is not answering.
    kv(
        out,
        "last-ping-sent",
        if i.down || i.disconnected { silent } else { 0 },
    );
    kv(out, "last-ok-ping-reply", silent);
    kv(out, "last-ping-reply", silent);
    if i.down {
        let down_for = silent.saturating_sub(g.down_after);
        kv(out, "s-down-time", down_for);
        if odown {
            kv(out, "o-down-time", down_for);
        }
    }
    kv(out, "down-after-milliseconds", g.down_after);
    kv(
        out,
        "info-refresh",
        if i.info_at == 0 {
            0
        } else {
            since(now, i.info_at)
        },
    );
}

/// `SENTINEL MASTER <name>`'s reply for one group, as of `now`.
pub fn master_map(name: &str, g: &GroupView, now: Millis) -> Frame {
    let m = &g.master_details;
    let mut flags = Vec::new();
    if m.down {
        flags.push("s_down");
    }
    if g.odown {
        flags.push("o_down");
    }
    flags.push("master");
    if m.disconnected {
        flags.push("disconnected");
    }
    if g.failover_in_progress {
        flags.push("failover_in_progress");
    }
    let mut out = Vec::with_capacity(24);
    common(
        &mut out,
        name,
        m,
        &flags.join(","),
        g.failover_state,
        g,
        now,
    );
    kv(
        &mut out,
        "role-reported",
        if m.reports_master || m.run_id.is_empty() {
            "master"
        } else {
            "slave"
        },
    );
    kv(&mut out, "role-reported-time", since(now, m.role_since));
    kv(&mut out, "config-epoch", g.config_epoch);
    kv(&mut out, "num-slaves", g.replicas.len());
    kv(&mut out, "num-other-sentinels", m.sentinels.len());
    kv(&mut out, "quorum", g.quorum);
    kv(&mut out, "failover-timeout", g.failover_timeout);
    kv(&mut out, "parallel-syncs", g.parallel_syncs);
    Frame::Map(out)
}

pub(super) fn replica_map(_group: &str, g: &GroupView, r: &InstanceView, now: Millis) -> Frame {
    let mut flags = Vec::new();
    if r.down {
        flags.push("s_down");
    }
    flags.push("slave");
    if r.disconnected {
        flags.push("disconnected");
    }
    let mut out = Vec::with_capacity(21);
    let name = format!("{}:{}", r.addr.host, r.addr.port);
    common(&mut out, &name, r, &flags.join(","), None, g, now);
    kv(
        &mut out,
        "role-reported",
        if r.reports_master { "master" } else { "slave" },
    );
    kv(&mut out, "role-reported-time", since(now, r.role_since));
    let upstream = r.upstream.clone().unwrap_or_else(|| Upstream {
        master: g.master.clone(),
        link_up: false,
        link_down_ms: 0,
    });
    kv(&mut out, "master-link-down-time", upstream.link_down_ms);
    kv(
        &mut out,
        "master-link-status",
        if upstream.link_up { "ok" } else { "err" },
    );
    kv(&mut out, "master-host", &upstream.master.host);
    kv(&mut out, "master-port", upstream.master.port);
    kv(&mut out, "slave-priority", r.priority);
    kv(&mut out, "slave-repl-offset", r.offset);
    kv(&mut out, "replica-announced", u8::from(r.announced));
    Frame::Map(out)
}
