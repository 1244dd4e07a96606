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

use super::call::Call;
use std::sync::Arc;

use tokio::time::Instant;
use valkyrie_protocol::Frame;

use super::super::clients::Client;
use super::super::connection::session::Session;
use super::call::{long, switch, text};

const SYNTAX: &str = "ERR syntax error";

/// `CLIENT INFO`/`LIST`'s reply: a verbatim `txt` string in RESP3, a bulk
/// string in RESP2, as Valkey sends it.
fn verbatim(s: String) -> Frame {
    Frame::Verbatim {
        format: *b"txt",
        text: s.into(),
    }
}

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

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A client type for `TYPE`: `Some(true)` pubsub, `Some(false)` normal;
/// master/replica types exist but match no client here.
enum Kind {
    Normal,
    Pubsub,
    Other,
}

fn kind(name: &[u8]) -> Option<Kind> {
    let lower = name.to_ascii_lowercase();
    match lower.as_slice() {
        b"normal" => Some(Kind::Normal),
        b"pubsub" => Some(Kind::Pubsub),
        b"master" | b"primary" | b"replica" | b"slave" => Some(Kind::Other),
        _ => None,
    }
}

fn kind_matches(k: &Kind, c: &Client) -> bool {
    match k {
        Kind::Normal => !c.is_pubsub(),
        Kind::Pubsub => c.is_pubsub(),
        Kind::Other => false,
    }
}

fn unknown_type(name: &[u8]) -> Frame {
    Frame::error(format!("ERR Unknown client type '{}'", text(name)))
}

pub async fn run(call: &mut Call<'_>) -> Frame {
    let (args, session) = (call.args, &mut *call.session);
    let Some(sub) = args.get(1) else {
        return super::call::wrong_arity("client");
    };
    let lower = String::from_utf8_lossy(sub).to_ascii_lowercase();
    let rest = &args[2..];
    match (lower.as_str(), rest) {
        ("setname", [name]) => {
            if !valid_attr(name) {
                return Frame::error(BAD_NAME);
            }
            session.name = (!name.is_empty()).then(|| name.to_vec());
            Frame::simple("OK")
        }
        ("getname", []) => match &session.name {
            Some(n) => Frame::bulk(n.clone()),
            None => Frame::NullBulk,
        },
        ("setinfo", [attr, value]) => {
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
        ("id", []) => Frame::Integer(i64::try_from(session.id).unwrap_or(i64::MAX)),
        ("info", []) => {
            sync(session);
            verbatim(format!("{}\n", session.client.line(Instant::now())))
        }
        ("list", filters) => list(session, filters),
        ("kill", [addr]) => {
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
            kill(session, &victims);
            Frame::simple("OK")
        }
        ("kill", filters) if !filters.is_empty() => kill_filtered(session, filters),
        ("kill", _) => Frame::error(SYNTAX),
        ("reply", [mode]) => {
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
        ("no-evict", [on]) => match switch(on, "on", "off") {
            Some(v) => {
                session.client.state().no_evict = v;
                Frame::simple("OK")
            }
            None => Frame::error(SYNTAX),
        },
        ("tracking", [on, ..]) => match switch(on, "on", "off") {
            Some(v) => {
                session.client.state().tracking = v;
                Frame::simple("OK")
            }
            None => Frame::error(SYNTAX),
        },
        ("getredir", []) => Frame::Integer(if session.client.state().tracking {
            0
        } else {
            -1
        }),
        ("trackinginfo", []) => {
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
        ("caching", [_]) => Frame::error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with \
             OPTIN or OPTOUT mode enabled",
        ),
        ("unblock", [id, reason @ ..]) if reason.len() <= 1 => {
            if let [r] = reason
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
        ("pause", [timeout, mode @ ..]) if mode.len() <= 1 => {
            if let [m] = mode
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
        ("unpause", []) => Frame::simple("OK"),
        ("capa", [_, ..]) => Frame::simple("OK"),
        ("help", []) => Frame::Array(HELP.iter().map(|l| Frame::simple(*l)).collect()),
        (
            "setname" | "getname" | "setinfo" | "id" | "info" | "reply" | "no-evict" | "tracking"
            | "getredir" | "trackinginfo" | "caching" | "unblock" | "pause" | "unpause" | "capa"
            | "help",
            _,
        ) => super::call::wrong_arity(&format!("client|{lower}")),
        _ => Frame::error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

/// Brings this connection's registry entry up to date before it is shown.
fn sync(session: &Session) {
    let mut st = session.client.state();
    st.name.clone_from(&session.name);
    st.user.clone_from(&session.user);
    st.sub = session.channels.len();
    st.psub = session.patterns.len();
    st.resp = match session.protocol {
        valkyrie_protocol::Protocol::Resp2 => 2,
        valkyrie_protocol::Protocol::Resp3 => 3,
    };
}

/// `CLIENT LIST [TYPE t] [ID id …]`.
fn list(session: &Session, filters: &[&[u8]]) -> Frame {
    let mut kind_filter = None;
    let mut ids: Option<Vec<u64>> = None;
    match filters {
        [] => {}
        [t, name] if is(t, "type") => match kind(name) {
            Some(k) => kind_filter = Some(k),
            None => return unknown_type(name),
        },
        [i, list @ ..] if is(i, "id") && !list.is_empty() => {
            let mut parsed = Vec::new();
            for id in list {
                match long(id)
                    .and_then(|n| u64::try_from(n).ok())
                    .filter(|n| *n > 0)
                {
                    Some(n) => parsed.push(n),
                    None => return Frame::error("ERR Invalid client ID"),
                }
            }
            ids = Some(parsed);
        }
        _ => return Frame::error(SYNTAX),
    }
    sync(session);
    let now = Instant::now();
    let mut out = String::new();
    for c in session.shared.registry.all() {
        if kind_filter.as_ref().is_some_and(|k| !kind_matches(k, &c)) {
            continue;
        }
        if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
            continue;
        }
        out.push_str(&c.line(now));
        out.push('\n');
    }
    verbatim(out)
}

/// Closes `victims`; this connection itself only after its reply.
fn kill(session: &mut Session, victims: &[Arc<Client>]) {
    for v in victims {
        if v.id == session.id {
            session.close_after_reply = true;
        } else {
            v.kill.notify_one();
        }
    }
}

/// `CLIENT KILL <filter> <value> …`.
fn kill_filtered(session: &mut Session, filters: &[&[u8]]) -> Frame {
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut kind_filter = None;
    let mut user = None;
    let mut skipme = true;
    let mut max_age = None;
    let mut i = 0;
    while i < filters.len() {
        let Some(value) = filters.get(i + 1) else {
            return Frame::error(SYNTAX);
        };
        let option = &filters[i];
        if is(option, "id") {
            match long(value).filter(|n| *n >= 1) {
                Some(n) => id = Some(n.unsigned_abs()),
                None => return Frame::error("ERR client-id should be greater than 0"),
            }
        } else if is(option, "maxage") {
            match long(value) {
                Some(n) if n > 0 => max_age = Some(n.unsigned_abs()),
                Some(_) => return Frame::error("ERR maxage should be greater than 0"),
                None => return Frame::error("ERR maxage is not an integer or out of range"),
            }
        } else if is(option, "type") {
            match kind(value) {
                Some(k) => kind_filter = Some(k),
                None => return unknown_type(value),
            }
        } else if is(option, "addr") {
            addr = Some(text(value));
        } else if is(option, "laddr") {
            laddr = Some(text(value));
        } else if is(option, "user") {
            let name = text(value);
            if !session.shared.security.has_user(&name) {
                return Frame::error(format!("ERR No such user '{name}'"));
            }
            user = Some(name);
        } else if is(option, "skipme") {
            match switch(value, "yes", "no") {
                Some(v) => skipme = v,
                None => return Frame::error(SYNTAX),
            }
        } else {
            return Frame::error(SYNTAX);
        }
        i += 2;
    }
    sync(session);
    let now = Instant::now();
    let victims: Vec<Arc<Client>> = session
        .shared
        .registry
        .all()
        .into_iter()
        .filter(|c| addr.as_ref().is_none_or(|a| c.addr.to_string() == *a))
        .filter(|c| laddr.as_ref().is_none_or(|a| c.laddr.to_string() == *a))
        .filter(|c| kind_filter.as_ref().is_none_or(|k| kind_matches(k, c)))
        .filter(|c| id.is_none_or(|id| c.id == id))
        .filter(|c| {
            user.as_ref()
                .is_none_or(|u| c.state().user.as_deref().unwrap_or("default") == u)
        })
        .filter(|c| !(skipme && c.id == session.id))
        .filter(|c| {
            max_age.is_none_or(|age| now.saturating_duration_since(c.created).as_secs() >= age)
        })
        .collect();
    kill(session, &victims);
    Frame::Integer(i64::try_from(victims.len()).unwrap_or(i64::MAX))
}

/// Valkey 8.0.1's text, verbatim.
const HELP: [&str; 62] = [
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "CAPA <option> [options...]",
    "    The client claims its some capability options. Options are:",
    "    * REDIRECT",
    "      The client can handle redirection during primary and replica failover in standalone mode.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|PRIMARY|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|PRIMARY|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
    "HELP",
    "    Print this help.",
];
