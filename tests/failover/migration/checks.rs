//! What the migration test checks, by polling with a bound: the checks
//! docs/peering.md's procedure makes before it starts and after each
//! swap, a completed failover as every monitor reports it, and the data
//! nodes' roles (`ROLE`).

use std::collections::BTreeSet;
use std::time::Duration;

use valkyrie_protocol::Frame;

use super::monitors::Monitor;
use crate::support::peers::{kv, poll, text};
use crate::support::{advertised_master, info_field, master_field, try_call};

/// `(port, run id)` of every sentinel `SENTINEL sentinels mymaster` lists
/// on `port`.
pub fn listed(port: u16) -> Result<BTreeSet<(u16, String)>, String> {
    match try_call(port, &["SENTINEL", "SENTINELS", "mymaster"]) {
        Ok(Frame::Array(v)) => Ok(v
            .iter()
            .map(kv)
            .map(|e| {
                let p = e.get("port").and_then(|p| p.parse().ok()).unwrap_or(0);
                (p, e.get("runid").cloned().unwrap_or_default())
            })
            .collect()),
        other => Err(format!("{port}: SENTINEL sentinels: {other:?}")),
    }
}

/// The procedure's checks, all at once on every monitor: it lists each
/// of the others at its port with its run id (`SENTINEL sentinels`), and
/// `num-other-sentinels` is 2; `CKQUORUM` answers `OK 3 usable
/// Sentinels…`; no failover is in progress (`flags`); all advertise the
/// same master with the same `config-epoch`, and that node reports the
/// master role. Returns `(master, config epoch)`.
pub fn quorum_healthy(monitors: &[Monitor], limit: Duration) -> Result<(u16, u64), String> {
    poll(limit, || {
        let mut views = Vec::new();
        for m in monitors {
            let label = m.label();
            let want: BTreeSet<(u16, String)> = monitors
                .iter()
                .filter(|o| o.idx != m.idx)
                .map(|o| (o.port, o.myid.clone()))
                .collect();
            let got = listed(m.port)?;
            if got != want {
                return Err(format!("{label} lists {got:?}, not {want:?}"));
            }
            let others = master_field(m.port, "num-other-sentinels");
            if others.as_deref() != Some("2") {
                return Err(format!("{label}: num-other-sentinels {others:?}"));
            }
            let ck = try_call(m.port, &["SENTINEL", "CKQUORUM", "mymaster"])
                .map_err(|e| format!("{label}: CKQUORUM: {e}"))?;
            if !matches!(&ck, Frame::Simple(_))
                || !text(&ck).starts_with("OK 3 usable Sentinels. Quorum and failover")
            {
                return Err(format!("{label}: CKQUORUM {ck:?}"));
            }
            let flags = master_field(m.port, "flags").unwrap_or_default();
            if flags.contains("failover") {
                return Err(format!("{label}: flags {flags}"));
            }
            views.push((label, advertised_master(m.port), config_epoch(m.port)));
        }
        agreed(&views)
    })
}

/// After the master `old` (advertised with config epoch `epoch`) was
/// killed: every monitor advertises one new master with one config epoch
/// above `epoch`, none reports a failover in progress, and that node
/// reports the master role. Returns `(master, config epoch)`.
pub fn failed_over(
    monitors: &[Monitor],
    old: u16,
    epoch: u64,
    limit: Duration,
) -> Result<(u16, u64), String> {
    poll(limit, || {
        let mut views = Vec::new();
        for m in monitors {
            let flags = master_field(m.port, "flags").unwrap_or_default();
            if flags.contains("failover") {
                return Err(format!("{}: flags {flags}", m.label()));
            }
            views.push((m.label(), advertised_master(m.port), config_epoch(m.port)));
        }
        let (master, e) = agreed(&views)?;
        if master == old || e <= epoch {
            return Err(format!(
                "all still advertise {master} with config epoch {e} (before: {old}, {epoch})"
            ));
        }
        Ok((master, e))
    })
}

/// One `(master, config epoch)` in every view, its node a master.
fn agreed(views: &[(String, Option<u16>, Option<u64>)]) -> Result<(u16, u64), String> {
    let first = views.first().map(|v| (v.1, v.2));
    let same = views.iter().all(|v| Some((v.1, v.2)) == first);
    match first {
        Some((Some(p), Some(e))) if same => match role(p) {
            Ok(Role::Master) => Ok((p, e)),
            other => Err(format!("all advertise {p} (epoch {e}), which is {other:?}")),
        },
        _ => Err(format!("monitors disagree: {views:?}")),
    }
}

/// `config-epoch` of `SENTINEL master mymaster`.
pub fn config_epoch(port: u16) -> Option<u64> {
    master_field(port, "config-epoch").and_then(|v| v.parse().ok())
}

/// A data node's `ROLE`.
#[derive(Debug, PartialEq, Eq)]
pub enum Role {
    Master,
    /// Replicating the node at this port, in this link state
    /// (`connected` once in sync).
    Replica(u16, String),
    Other(String),
}

/// `ROLE` of the data node at `port`.
pub fn role(port: u16) -> Result<Role, String> {
    match try_call(port, &["ROLE"]) {
        Ok(Frame::Array(v)) if !v.is_empty() => match text(&v[0]).as_str() {
            "master" => Ok(Role::Master),
            "slave" if v.len() >= 4 => {
                let up = match &v[2] {
                    Frame::Integer(p) => u16::try_from(*p).unwrap_or(0),
                    f => text(f).parse().unwrap_or(0),
                };
                Ok(Role::Replica(up, text(&v[3])))
            }
            r => Ok(Role::Other(r.to_string())),
        },
        other => Err(format!("ROLE on {port}: {other:?}")),
    }
}

/// Exactly one master among the data nodes at `ports`, and every other
/// one a connected replica of it. Returns the master.
pub fn one_master(ports: &[u16], limit: Duration) -> Result<u16, String> {
    poll(limit, || {
        let roles: Vec<(u16, Result<Role, String>)> = ports.iter().map(|&p| (p, role(p))).collect();
        let masters: Vec<u16> = roles
            .iter()
            .filter(|(_, r)| matches!(r, Ok(Role::Master)))
            .map(|(p, _)| *p)
            .collect();
        let [m] = masters[..] else {
            return Err(format!("{} masters: {roles:?}", masters.len()));
        };
        let all_follow = roles.iter().all(|(p, r)| {
            *p == m || matches!(r, Ok(Role::Replica(up, state)) if *up == m && state == "connected")
        });
        if all_follow {
            Ok(m)
        } else {
            Err(format!("not every replica follows {m}: {roles:?}"))
        }
    })
}

/// Every replica in `replicas` has applied the master's whole stream
/// (`slave_repl_offset` equal to the master's `master_repl_offset`).
pub fn in_sync(master: u16, replicas: &[u16], limit: Duration) -> Result<(), String> {
    poll(limit, || {
        let want = info_field(master, "master_repl_offset");
        let got: Vec<Option<String>> = replicas
            .iter()
            .map(|&r| info_field(r, "slave_repl_offset"))
            .collect();
        if want.is_some() && got.iter().all(|g| *g == want) {
            Ok(())
        } else {
            Err(format!(
                "master {master} at offset {want:?}, replicas {replicas:?} at {got:?}"
            ))
        }
    })
}
