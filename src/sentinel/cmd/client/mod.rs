//! `CLIENT …`: what connecting clients send, and what operators use to
//! see and drop connections.
//!
//! # Format
//!
//! ```text
//! CLIENT SETNAME <name>             -> +OK
//! CLIENT GETNAME                    -> $name | null
//! CLIENT SETINFO lib-name|lib-ver v -> +OK
//! CLIENT ID                         -> :id
//! CLIENT INFO                       -> $line\n  (RESP3: =txt:…)
//! CLIENT LIST [TYPE t] [ID id…]     -> $lines, one per client, each ending in \n (RESP3: =txt:…)
//! CLIENT KILL <ip:port>             -> +OK | -ERR No such client
//! CLIENT KILL <filter> <value> …    -> :killed  (ID ADDR LADDR TYPE USER SKIPME MAXAGE)
//! CLIENT REPLY ON|OFF|SKIP          -> +OK | (nothing)
//! CLIENT NO-EVICT|TRACKING|PAUSE|UNPAUSE|CAPA|GETREDIR|TRACKINGINFO|UNBLOCK|CACHING|HELP
//! CLIENT <other>                    -> -ERR unknown subcommand '<other>'. Try CLIENT HELP.
//! ```
//!
//! Replies are those of a Valkey 8.0.1 sentinel, observed on the wire;
//! there are no keys here, so tracking and pauses change nothing but what
//! is reported.
//!
//! A subcommand is parsed once, before anything runs ([`Subcommand`]);
//! the connections it lists and drops are `listing`'s.

use std::sync::Arc;

use tokio::time::Instant;
use valkyrie_protocol::Frame;

use super::super::clients::Client;
use super::call::{Call, SYNTAX, is, long, switch, text};

mod help;
mod listing;

use help::HELP;

/// Valkey's rule for names and library attributes (`validateClientName`,
/// `validateClientAttr`): every byte within `!`..`~`, so no spaces,
/// newlines, control characters or non-ASCII. `CLIENT LIST` lines stay
/// one line with one `key=value` per space-separated field.
pub(super) fn valid_attr(v: &[u8]) -> bool {
    v.iter().all(|b| (b'!'..=b'~').contains(b))
}

/// Valkey 8.0.1's reply to a name that breaks [`valid_attr`], for
/// `CLIENT SETNAME` and `HELLO … SETNAME`.
pub(super) const BAD_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

/// A parsed `CLIENT` subcommand, its arguments named by role. Values keep
/// their bytes where the handler checks them: Valkey's error texts depend
/// on the order of those checks.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Subcommand<'a> {
    /// `SETNAME <name>`.
    SetName { name: &'a [u8] },
    /// `GETNAME`.
    GetName,
    /// `SETINFO <attribute> <value>`.
    SetInfo { attr: &'a [u8], value: &'a [u8] },
    /// `ID`.
    Id,
    /// `INFO`.
    Info,
    /// `LIST [TYPE t] [ID id …]`.
    List { filters: &'a [&'a [u8]] },
    /// `KILL <ip:port>`, the old form.
    KillAddr { addr: &'a [u8] },
    /// `KILL <filter> <value> …`.
    Kill { filters: &'a [&'a [u8]] },
    /// `REPLY ON|OFF|SKIP`.
    Reply { mode: &'a [u8] },
    /// `NO-EVICT ON|OFF`.
    NoEvict { on: &'a [u8] },
    /// `TRACKING ON|OFF [options …]`.
    Tracking { on: &'a [u8] },
    /// `GETREDIR`.
    GetRedir,
    /// `TRACKINGINFO`.
    TrackingInfo,
    /// `CACHING YES|NO`.
    Caching,
    /// `UNBLOCK <id> [TIMEOUT|ERROR]`.
    Unblock {
        id: &'a [u8],
        reason: Option<&'a [u8]>,
    },
    /// `PAUSE <timeout> [WRITE|ALL]`.
    Pause {
        timeout: &'a [u8],
        mode: Option<&'a [u8]>,
    },
    /// `UNPAUSE`.
    Unpause,
    /// `CAPA <capability> …`.
    Capa,
    /// `HELP`.
    Help,
}

/// The subcommands whose wrong arity is Valkey's `wrong number of
/// arguments` error (the others answer a syntax error).
const FIXED_ARITY: [&str; 16] = [
    "setname",
    "getname",
    "setinfo",
    "id",
    "info",
    "reply",
    "no-evict",
    "tracking",
    "getredir",
    "trackinginfo",
    "caching",
    "unblock",
    "pause",
    "unpause",
    "capa",
    "help",
];

impl<'a> Subcommand<'a> {
    /// Parses `CLIENT <sub> <rest…>`; `args` is the whole request and
    /// `sub` its subcommand lowercased.
    pub(crate) fn parse(args: &'a [&'a [u8]], sub: Option<&str>) -> Result<Subcommand<'a>, Frame> {
        let (Some(sub), Some(rest)) = (sub, args.get(2..)) else {
            return Err(super::call::wrong_arity("client"));
        };
        Ok(match (sub, rest) {
            ("setname", [name]) => Subcommand::SetName { name },
            ("getname", []) => Subcommand::GetName,
            ("setinfo", [attr, value]) => Subcommand::SetInfo { attr, value },
            ("id", []) => Subcommand::Id,
            ("info", []) => Subcommand::Info,
            ("list", filters) => Subcommand::List { filters },
            ("kill", [addr]) => Subcommand::KillAddr { addr },
            ("kill", filters) if !filters.is_empty() => Subcommand::Kill { filters },
            ("kill", _) => return Err(Frame::error(SYNTAX)),
            ("reply", [mode]) => Subcommand::Reply { mode },
            ("no-evict", [on]) => Subcommand::NoEvict { on },
            ("tracking", [on, ..]) => Subcommand::Tracking { on },
            ("getredir", []) => Subcommand::GetRedir,
            ("trackinginfo", []) => Subcommand::TrackingInfo,
            ("caching", [_]) => Subcommand::Caching,
            ("unblock", [id, reason @ ..]) if reason.len() <= 1 => Subcommand::Unblock {
                id,
                reason: reason.first().copied(),
            },
            ("pause", [timeout, mode @ ..]) if mode.len() <= 1 => Subcommand::Pause {
                timeout,
                mode: mode.first().copied(),
            },
            ("unpause", []) => Subcommand::Unpause,
            ("capa", [_, ..]) => Subcommand::Capa,
            ("help", []) => Subcommand::Help,
            (sub, _) if FIXED_ARITY.contains(&sub) => {
                return Err(super::call::wrong_arity(&format!("client|{sub}")));
            }
            _ => {
                return Err(super::call::unknown_subcommand("CLIENT", args[1]));
            }
        })
    }
}

/// Runs `CLIENT <subcommand> …`, parsed first ([`Subcommand`]).
pub async fn run(call: &mut Call<'_>) -> Frame {
    let command = match Subcommand::parse(call.args, call.sub) {
        Ok(command) => command,
        Err(reply) => return reply,
    };
    let session = &mut *call.session;
    match command {
        Subcommand::SetName { name } => {
            if !valid_attr(name) {
                return Frame::error(BAD_NAME);
            }
            session.name = (!name.is_empty()).then(|| name.to_vec());
            Frame::simple("OK")
        }
        Subcommand::GetName => match &session.name {
            Some(n) => Frame::bulk(n.clone()),
            None => Frame::NullBulk,
        },
        Subcommand::SetInfo { attr, value } => {
            let attr_name = text(attr);
            let lib_name = is(attr, "lib-name");
            if !lib_name && !is(attr, "lib-ver") {
                return Frame::error(format!("ERR Unrecognized option '{attr_name}'"));
            }
            if !valid_attr(value) {
                return Frame::error(format!(
                    "ERR {attr_name} cannot contain spaces, newlines or special characters."
                ));
            }
            let value = (!value.is_empty()).then(|| value.to_vec());
            let mut st = session.client.state();
            if lib_name {
                st.lib_name = value;
            } else {
                st.lib_ver = value;
            }
            Frame::simple("OK")
        }
        Subcommand::Id => Frame::Integer(i64::try_from(session.id).unwrap_or(i64::MAX)),
        Subcommand::Info => {
            listing::sync(session);
            listing::verbatim(format!("{}\n", session.client.line(Instant::now())))
        }
        Subcommand::List { filters } => listing::list(session, filters),
        Subcommand::KillAddr { addr } => {
            let addr = text(addr);
            let victims: Vec<Arc<Client>> = session
                .shared
                .registry
                .all()
                .into_iter()
                .filter(|c| c.addr.to_string() == addr)
                .collect();
            if victims.is_empty() {
                return Frame::error("ERR No such client");
            }
            listing::kill(session, &victims);
            Frame::simple("OK")
        }
        Subcommand::Kill { filters } => listing::kill_filtered(session, filters),
        Subcommand::Reply { mode } => {
            if is(mode, "on") {
                session.reply_on = true;
                session.skip_next = false;
                Frame::simple("OK")
            } else if is(mode, "off") {
                session.reply_on = false;
                session.suppress = true;
                Frame::simple("OK")
            } else if is(mode, "skip") {
                if session.reply_on {
                    session.skip_next = true;
                }
                session.suppress = true;
                Frame::simple("OK")
            } else {
                Frame::error(SYNTAX)
            }
        }
        Subcommand::NoEvict { on } => match switch(on, "on", "off") {
            Some(v) => {
                session.client.state().no_evict = v;
                Frame::simple("OK")
            }
            None => Frame::error(SYNTAX),
        },
        Subcommand::Tracking { on } => match switch(on, "on", "off") {
            Some(v) => {
                session.client.state().tracking = v;
                Frame::simple("OK")
            }
            None => Frame::error(SYNTAX),
        },
        Subcommand::GetRedir => Frame::Integer(if session.client.state().tracking {
            0
        } else {
            -1
        }),
        Subcommand::TrackingInfo => {
            let tracking = session.client.state().tracking;
            Frame::Map(vec![
                (
                    Frame::bulk("flags"),
                    Frame::Set(vec![Frame::bulk(if tracking { "on" } else { "off" })]),
                ),
                (
                    Frame::bulk("redirect"),
                    Frame::Integer(if tracking { 0 } else { -1 }),
                ),
                (Frame::bulk("prefixes"), Frame::Array(vec![])),
            ])
        }
        Subcommand::Caching => Frame::error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with \
             OPTIN or OPTOUT mode enabled",
        ),
        Subcommand::Unblock { id, reason } => {
            if let Some(r) = reason
                && !is(r, "timeout")
                && !is(r, "error")
            {
                return Frame::error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            }
            match long(id) {
                // Nobody ever blocks on a sentinel.
                Some(_) => Frame::Integer(0),
                None => Frame::error("ERR value is not an integer or out of range"),
            }
        }
        Subcommand::Pause { timeout, mode } => {
            if let Some(m) = mode
                && !is(m, "write")
                && !is(m, "all")
            {
                return Frame::error(SYNTAX);
            }
            match long(timeout) {
                Some(t) if t >= 0 => Frame::simple("OK"),
                _ => Frame::error("ERR timeout is not an integer or out of range"),
            }
        }
        Subcommand::Unpause | Subcommand::Capa => Frame::simple("OK"),
        Subcommand::Help => Frame::Array(HELP.iter().map(|l| Frame::simple(*l)).collect()),
    }
}
