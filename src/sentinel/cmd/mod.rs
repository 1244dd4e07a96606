//! Command dispatch: one file per command family, as in mini-redis; which
//! family runs a command is a column of the command table
//! ([`super::commands`]).

mod acl;
mod auth;
mod client;
mod command;
mod hello;
mod info;
mod operator;
mod peers;
mod ping;
pub mod pubsub;
mod role;
pub mod sentinel;
mod shutdown;

use valkyrie_protocol::Frame;

use super::commands::{Run, run_of};
use super::connection::Session;
use crate::runtime::Handle;

/// A command or subcommand name in lower case, without an allocation for
/// the short names commands have (this runs for every request).
#[derive(Debug)]
pub struct Lower {
    short: [u8; 32],
    len: usize,
    long: Option<String>,
}

impl Lower {
    /// `arg`, lowercased.
    pub fn new(arg: &[u8]) -> Lower {
        let mut short = [0u8; 32];
        if arg.len() <= short.len() && arg.is_ascii() {
            for (d, s) in short.iter_mut().zip(arg) {
                *d = s.to_ascii_lowercase();
            }
            return Lower {
                short,
                len: arg.len(),
                long: None,
            };
        }
        Lower {
            short,
            len: 0,
            long: Some(String::from_utf8_lossy(arg).to_ascii_lowercase()),
        }
    }

    /// The lowercased text.
    pub fn as_str(&self) -> &str {
        match &self.long {
            Some(s) => s,
            // ASCII by construction, so always valid.
            None => std::str::from_utf8(&self.short[..self.len]).unwrap_or_default(),
        }
    }
}

/// Runs one command and returns its replies (several for (un)subscribe).
/// `full_name` is the command's name as [`full_name`] writes it
/// (lowercased, `name|subcommand` for commands with subcommands): the
/// connection made it for `CLIENT LIST`, and commands reuse it rather than
/// lowercasing their names again.
pub async fn dispatch(
    args: &[&[u8]],
    full_name: &str,
    session: &mut Session,
    handle: &Handle,
) -> Vec<Frame> {
    let (name, sub) = match full_name.split_once('|') {
        Some((name, sub)) => (name, Some(sub)),
        None => (full_name, None),
    };
    if session.user.is_none() && name != "auth" && name != "hello" {
        return vec![Frame::error("NOAUTH Authentication required.")];
    }
    if let Some(user) = &session.user {
        // The user's command and channel rules, before anything else runs
        // (Valkey checks them right after arity and authentication).
        let client = &session.client;
        if let Err(e) = session
            .shared
            .security
            .authorize(user, args, || client.line(tokio::time::Instant::now()))
        {
            return vec![Frame::error(e)];
        }
    }
    if session
        .shared
        .security
        .protects(session.user.as_deref(), session.client.addr.ip())
        && crate::sentinel::protected::changes_state(name, sub, args)
    {
        return vec![Frame::error(crate::sentinel::protected::DENIED)];
    }
    let subscribed = !session.channels.is_empty() || !session.patterns.is_empty();
    if subscribed && session.protocol == valkyrie_protocol::Protocol::Resp2 {
        match name {
            "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" | "ssubscribe"
            | "sunsubscribe" | "quit" | "reset" => {}
            "ping" => {
                // RESP2 subscribed context: PING answers as a message.
                let msg = args.get(1).map(|m| m.to_vec()).unwrap_or_default();
                return vec![Frame::Array(vec![Frame::bulk("pong"), Frame::bulk(msg)])];
            }
            _ => {
                let full = match args.get(1) {
                    Some(sub) if name == "sentinel" || name == "client" => format!(
                        "{name}|{}",
                        String::from_utf8_lossy(sub).to_ascii_lowercase()
                    ),
                    _ => name.to_string(),
                };
                return vec![Frame::error(format!(
                    "ERR Can't execute '{full}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
                ))];
            }
        }
    }
    let Some(run) = run_of(name) else {
        return vec![unknown_command(args)];
    };
    let reply = match run {
        // Several replies, one per channel.
        Run::Pubsub => return pubsub::run(name, args, session),
        Run::Info => info::run(args, handle, session),
        Run::Auth => auth::run(args, session),
        Run::Acl => acl::run(args, session, handle).await,
        Run::Command => command::run(args),
        Run::Publish => peers::publish(args, handle).await,
        Run::Ping => ping::run(args),
        Run::Hello => hello::run(args, session),
        Run::Client => client::run(args, session),
        Run::Role => role::run(handle),
        Run::Sentinel => sentinel::run(args, sub, handle, session.client.laddr).await,
        Run::Shutdown => shutdown::run(args, session, handle),
    };
    vec![reply]
}

/// Writes `name|subcommand` (lowercased) for commands with subcommands,
/// else the lowercased name, into `out` (reusing its allocation: this
/// runs for every request). It is what `CLIENT LIST` shows as `cmd=`, and
/// what [`dispatch`] takes.
pub fn full_name(out: &mut String, args: &[&[u8]]) {
    out.clear();
    let name = Lower::new(args[0]);
    out.push_str(name.as_str());
    if let ("sentinel" | "client" | "command" | "acl", Some(sub)) = (name.as_str(), args.get(1)) {
        out.push('|');
        out.push_str(Lower::new(sub).as_str());
    }
}

/// An argument as text (invalid UTF-8 replaced), for replies and names.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Valkey's `getLongLongFromObject`: a whole signed decimal, nothing else.
pub fn long(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.starts_with('+') {
        return None;
    }
    s.parse().ok()
}

/// A two-way switch argument (`on`/`off`, `yes`/`no`), case-insensitive.
pub fn switch(arg: &[u8], yes: &str, no: &str) -> Option<bool> {
    if arg.eq_ignore_ascii_case(yes.as_bytes()) {
        Some(true)
    } else if arg.eq_ignore_ascii_case(no.as_bytes()) {
        Some(false)
    } else {
        None
    }
}

/// Valkey's text: `ERR unknown command 'X', with args beginning with: 'a' 'b' `.
pub fn unknown_command(args: &[&[u8]]) -> Frame {
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(args[0])
    );
    for a in &args[1..] {
        text.push_str(&format!("'{}' ", String::from_utf8_lossy(a)));
    }
    Frame::error(text)
}

/// Valkey's text: `ERR wrong number of arguments for 'x' command`.
pub fn wrong_arity(name: &str) -> Frame {
    Frame::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}
