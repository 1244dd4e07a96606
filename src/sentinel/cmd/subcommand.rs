//! `SENTINEL <subcommand> …` parsed once, before anything runs: each
//! subcommand with its arguments named by role, or Sentinel's error for a
//! wrong arity or an unknown subcommand. Values keep their bytes where the
//! handler checks them, because Sentinel's error texts depend on the
//! order of those checks.

use valkyrie_protocol::Frame;

/// A parsed `SENTINEL` subcommand.
#[derive(Debug, PartialEq, Eq)]
pub enum Subcommand<'a> {
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
    /// `SIMULATE-FAILURE HELP`.
    SimulateFailureHelp,
    /// `SIMULATE-FAILURE …`: accepted, never acted on.
    SimulateFailure,
    /// `DEBUG`.
    Debug,
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
            ("simulate-failure", [flag]) if flag.eq_ignore_ascii_case(b"help") => {
                Subcommand::SimulateFailureHelp
            }
            ("simulate-failure", _) => Subcommand::SimulateFailure,
            ("debug", []) => Subcommand::Debug,
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
                return Err(Frame::error(format!(
                    "ERR unknown subcommand '{}'. Try SENTINEL HELP.",
                    String::from_utf8_lossy(args[1])
                )));
            }
        })
    }
}
