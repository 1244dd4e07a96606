//! `SENTINEL <subcommand> …`, with Valkey 8's aliases.
//!
//! # Format
//!
//! ```text
//! SENTINEL get-master-addr-by-name <name>  -> *2 $ip $port | RESP2 *-1, RESP3 _
//! SENTINEL masters                         -> *N of instance maps (flat arrays in RESP2)
//! SENTINEL master <name>                   -> instance map | -ERR No such master with that name
//! SENTINEL replicas|slaves <name>          -> *N of replica maps
//! SENTINEL myid                            -> $40 hex
//! SENTINEL failover <name>                 -> +OK | -INPROG … | -NOGOODSLAVE …
//! SENTINEL help | info-cache [n…] | pending-scripts | simulate-failure …
//! SENTINEL debug [<param> <value> …]       (see `debug`)
//! SENTINEL sentinels|ckquorum|is-master-down-by-addr …  (see `peers`)
//! SENTINEL failover|monitor|remove|set|reset|flushconfig|config …  (see `admin`)
//! ```
//!
//! Every value in an instance description is a bulk string, numbers
//! included, in Valkey's field order (`describe`).
//!
//! A subcommand is parsed once, before anything runs ([`Subcommand`]):
//! each with its arguments named by role, or Sentinel's error for a wrong
//! arity or an unknown subcommand. Values keep their bytes where the
//! handler checks them, because Sentinel's error texts depend on the order
//! of those checks. Adding a subcommand is its row in the command table,
//! then its variant, its parse arm and its run arm here.

use std::time::Duration;

use valkyrie_protocol::Frame;

use super::call::Call;
use crate::runtime::Handle;
use crate::topology::Topology;

mod announced;
pub(crate) mod debug;
mod describe;

pub use describe::master_map;
use describe::{HELP, info_cache, replica_map};

pub(super) const NO_SUCH_MASTER: &str = "ERR No such master with that name";

/// The longest a question for a master's address waits out a
/// switchover's masterless moment (which takes milliseconds).
pub const MASTERLESS_HOLD: Duration = Duration::from_millis(500);

/// While a switchover has demoted group `name`'s old master and not yet
/// confirmed the new one, the answer would name a node that refuses
/// writes: a client just told `-READONLY` would be sent straight back to
/// it, and meet it again or back off. The question waits for the
/// confirmation, or the switchover's end, for at most
/// [`MASTERLESS_HOLD`]; the reply is the same bytes, only later.
async fn hold_while_masterless(handle: &Handle, name: &str) {
    let masterless = |t: &Topology| t.groups.get(name).is_some_and(|g| g.masterless);
    if !masterless(&handle.topology.borrow()) {
        return;
    }
    let mut topology = handle.topology.clone();
    let _ = tokio::time::timeout(MASTERLESS_HOLD, topology.wait_for(|t| !masterless(t))).await;
}

/// Runs `SENTINEL <subcommand> …`, parsed first (`Subcommand`). The
/// connection's local address is our own Sentinel port, which `MONITOR`
/// refuses.
pub async fn run(call: &mut Call<'_>) -> Frame {
    let command = match Subcommand::parse(call.args, call.sub) {
        Ok(command) => command,
        Err(reply) => return reply,
    };
    let handle = call.handle;
    if let Subcommand::MasterAddr { name } = command {
        let name = std::str::from_utf8(name).ok();
        if let Some(n) = name {
            hold_while_masterless(handle, n).await;
        }
        // The port's most frequent request: answered under the watch's
        // read guard, without a clone of the topology or a clock read.
        let topology = handle.topology.borrow();
        return match name.and_then(|n| topology.groups.get(n)) {
            Some(g) => {
                let master = announced::master(handle, g);
                Frame::Array(vec![
                    Frame::bulk(master.host.clone()),
                    Frame::bulk(master.port.to_string()),
                ])
            }
            // RESP2 `*-1`, RESP3 `_`.
            None => Frame::NullArray,
        };
    }
    let topology = handle.topology.borrow().clone();
    let group = |name: &[u8]| {
        std::str::from_utf8(name)
            .ok()
            .and_then(|n| topology.groups.get(n))
            .map(|g| announced::view(handle, g))
    };
    let now = handle.now_ms();
    match command {
        Subcommand::MasterAddr { .. } => Frame::NullArray,
        Subcommand::Masters => Frame::Array(
            topology
                .groups
                .iter()
                .map(|(n, g)| master_map(n, &announced::view(handle, g), now))
                .collect(),
        ),
        Subcommand::Master { name } => match group(name) {
            Some(g) => master_map(&String::from_utf8_lossy(name), &g, now),
            None => Frame::error(NO_SUCH_MASTER),
        },
        Subcommand::Replicas { name } => match group(name) {
            Some(g) => {
                let n = String::from_utf8_lossy(name);
                // As Sentinel: a replica that says `replica-announced no`
                // is monitored but not listed.
                Frame::Array(
                    g.replicas
                        .iter()
                        .filter(|r| r.announced)
                        .map(|r| replica_map(&n, &g, r, now))
                        .collect(),
                )
            }
            None => Frame::error(NO_SUCH_MASTER),
        },
        Subcommand::Sentinels { name } => match group(name) {
            Some(g) => super::peers::sentinels(&g, now),
            None => Frame::error(NO_SUCH_MASTER),
        },
        Subcommand::Myid => Frame::bulk(handle.myid.clone()),
        Subcommand::Ckquorum { name } => match group(name) {
            Some(g) => super::peers::ckquorum(&g),
            None => Frame::error(NO_SUCH_MASTER),
        },
        Subcommand::Help => Frame::Array(HELP.iter().map(|l| Frame::simple(*l)).collect()),
        Subcommand::PendingScripts => pending_scripts(&handle.scripts.snapshot().await),
        Subcommand::SimulateFailure { flags } => simulate_failure(handle, flags).await,
        Subcommand::Debug { pairs } => debug::run(handle, pairs).await,
        Subcommand::InfoCache { names } => info_cache(&topology, &handle.texts, names),
        Subcommand::IsMasterDown { args } => {
            super::peers::is_master_down_by_addr(handle, args).await
        }
        Subcommand::Failover { name } => super::operator::failover(handle, name).await,
        Subcommand::Monitor { args } => {
            super::operator::monitor(handle, args, call.session.client.laddr).await
        }
        Subcommand::Remove { name } => super::operator::remove(handle, name).await,
        Subcommand::Set { args } => super::operator::set(handle, args).await,
        Subcommand::Reset { pattern } => super::operator::reset(handle, pattern).await,
        Subcommand::FlushConfig => super::operator::flushconfig(handle).await,
        Subcommand::Config { args } => super::operator::config(handle, args).await,
    }
}

/// A parsed `SENTINEL` subcommand.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Subcommand<'a> {
    /// `GET-MASTER-ADDR-BY-NAME` / `GET-PRIMARY-ADDR-BY-NAME <name>`.
    MasterAddr { name: &'a [u8] },
    /// `MASTERS` / `PRIMARIES`.
    Masters,
    /// `MASTER` / `PRIMARY <name>`.
    Master { name: &'a [u8] },
    /// `REPLICAS` / `SLAVES <name>`.
    Replicas { name: &'a [u8] },
    /// `SENTINELS <name>`.
    Sentinels { name: &'a [u8] },
    /// `MYID`.
    Myid,
    /// `CKQUORUM <name>`.
    Ckquorum { name: &'a [u8] },
    /// `HELP`.
    Help,
    /// `PENDING-SCRIPTS`.
    PendingScripts,
    /// `SIMULATE-FAILURE [<flag> …]` (checked by its handler, in order,
    /// as Sentinel does).
    SimulateFailure { flags: &'a [&'a [u8]] },
    /// `DEBUG [<param> <value> …]` (checked by its handler).
    Debug { pairs: &'a [&'a [u8]] },
    /// `INFO-CACHE [<name> …]`.
    InfoCache { names: &'a [&'a [u8]] },
    /// `IS-MASTER-DOWN-BY-ADDR` / `IS-PRIMARY-DOWN-BY-ADDR <ip> <port>
    /// <epoch> <runid>`.
    IsMasterDown {
        /// The four arguments, in that order.
        args: [&'a [u8]; 4],
    },
    /// `FAILOVER <name>`.
    Failover { name: &'a [u8] },
    /// `MONITOR <name> <ip> <port> <quorum>` (arity checked by its handler,
    /// after Sentinel's own order).
    Monitor { args: &'a [&'a [u8]] },
    /// `REMOVE <name>`.
    Remove { name: &'a [u8] },
    /// `SET <name> <option> <value> […]` (arity checked by its handler).
    Set { args: &'a [&'a [u8]] },
    /// `RESET <pattern>`.
    Reset { pattern: &'a [u8] },
    /// `FLUSHCONFIG`.
    FlushConfig,
    /// `CONFIG GET|SET …` (checked by its handler).
    Config { args: &'a [&'a [u8]] },
}

/// The subcommands of a fixed arity, whose wrong arity is Sentinel's
/// `wrong number of arguments` error.
const FIXED_ARITY: [&str; 17] = [
    "get-master-addr-by-name",
    "get-primary-addr-by-name",
    "masters",
    "primaries",
    "master",
    "primary",
    "replicas",
    "slaves",
    "sentinels",
    "myid",
    "ckquorum",
    "is-master-down-by-addr",
    "is-primary-down-by-addr",
    "failover",
    "remove",
    "reset",
    "flushconfig",
];

impl<'a> Subcommand<'a> {
    /// Parses `SENTINEL <sub> <rest…>`; `args` is the whole request and
    /// `sub` its subcommand lowercased.
    pub fn parse(args: &'a [&'a [u8]], sub: Option<&str>) -> Result<Subcommand<'a>, Frame> {
        let (Some(sub), Some(rest)) = (sub, args.get(2..)) else {
            return Err(super::call::wrong_arity("sentinel"));
        };
        Ok(match (sub, rest) {
            ("get-master-addr-by-name" | "get-primary-addr-by-name", [name]) => {
                Subcommand::MasterAddr { name }
            }
            ("masters" | "primaries", []) => Subcommand::Masters,
            ("master" | "primary", [name]) => Subcommand::Master { name },
            ("replicas" | "slaves", [name]) => Subcommand::Replicas { name },
            ("sentinels", [name]) => Subcommand::Sentinels { name },
            ("myid", []) => Subcommand::Myid,
            ("ckquorum", [name]) => Subcommand::Ckquorum { name },
            ("help", []) => Subcommand::Help,
            ("pending-scripts", []) => Subcommand::PendingScripts,
            ("simulate-failure", flags) => Subcommand::SimulateFailure { flags },
            ("debug", pairs) => Subcommand::Debug { pairs },
            ("info-cache", names) => Subcommand::InfoCache { names },
            ("is-master-down-by-addr" | "is-primary-down-by-addr", [ip, port, epoch, runid]) => {
                Subcommand::IsMasterDown {
                    args: [ip, port, epoch, runid],
                }
            }
            ("failover", [name]) => Subcommand::Failover { name },
            ("monitor", args) => Subcommand::Monitor { args },
            ("remove", [name]) => Subcommand::Remove { name },
            ("set", args) => Subcommand::Set { args },
            ("reset", [pattern]) => Subcommand::Reset { pattern },
            ("flushconfig", []) => Subcommand::FlushConfig,
            ("config", args) => Subcommand::Config { args },
            (sub, _) if FIXED_ARITY.contains(&sub) => {
                return Err(super::call::wrong_arity(&format!("sentinel|{sub}")));
            }
            _ => {
                return Err(super::call::unknown_subcommand("SENTINEL", args[1]));
            }
        })
    }
}

/// `SENTINEL PENDING-SCRIPTS`: each job a map of Sentinel's five fields
/// (a flat array in RESP2), oldest first.
fn pending_scripts(jobs: &[crate::scripts::Pending]) -> Frame {
    use crate::scripts::Field;
    Frame::Array(
        jobs.iter()
            .map(|job| {
                Frame::Map(
                    job.fields()
                        .into_iter()
                        .map(|(name, value)| {
                            let value = match value {
                                Field::Strings(argv) => Frame::Array(
                                    argv.iter().map(|a| Frame::bulk(a.clone())).collect(),
                                ),
                                Field::Text(t) => Frame::bulk(t),
                            };
                            (Frame::bulk(name), value)
                        })
                        .collect(),
                )
            })
            .collect(),
    )
}

/// `SENTINEL SIMULATE-FAILURE [<flag> …]`, as Sentinel 8.0.1: the flags
/// are cleared, then each argument in turn sets its crash point; `help`
/// answers the names at once and an unknown one the error, both keeping
/// the flags set before them.
async fn simulate_failure(handle: &Handle, flags: &[&[u8]]) -> Frame {
    use crate::core::CrashPoint;
    let mut bits = 0u8;
    let mut reply = Frame::simple("OK");
    for flag in flags {
        let point = [CrashPoint::AfterElection, CrashPoint::AfterPromotion]
            .into_iter()
            .find(|p| flag.eq_ignore_ascii_case(p.name().as_bytes()));
        match point {
            Some(p) => {
                tracing::warn!("Failure simulation: {} enabled", p.name());
                bits |= p.bit();
            }
            None if flag.eq_ignore_ascii_case(b"help") => {
                reply = Frame::Array(vec![
                    Frame::simple(CrashPoint::AfterElection.name()),
                    Frame::simple(CrashPoint::AfterPromotion.name()),
                ]);
                break;
            }
            None => {
                reply = Frame::error("ERR Unknown failure simulation specified");
                break;
            }
        }
    }
    match handle.simulate_failure(bits).await {
        Ok(()) => reply,
        Err(e) => Frame::error(e.to_string()),
    }
}
