//! Command dispatch: one file per command family, as in mini-redis; which
//! handler runs a command is a column of the command table
//! ([`super::commands`]), which expands here into the match of
//! [`run_command`].

mod acl;
mod auth;
mod call;
mod client;
mod command;
mod hello;
mod info;
mod operator;
mod pause;
mod peers;
mod ping;
pub mod pubsub;
mod role;
pub mod sentinel;
mod shutdown;
#[cfg(test)]
mod tests;
mod valkyrie;

use valkyrie_protocol::Frame;

pub use call::{Call, Lower, Replies, long, switch, text, unknown_command, wrong_arity};

use super::commands::command_table;
use super::connection::session::Session;
use crate::runtime::Handle;

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
        // As Valkey, authentication is required only while the default
        // user is off or has a password, judged at each command: a
        // connection opened while it was off (a peer's link, say) runs as
        // `default` once `ACL SETUSER default on` opens it again.
        if !session.shared.security.open() {
            return vec![Frame::error("NOAUTH Authentication required.")];
        }
        session.user = Some("default".to_string());
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
                    Some(sub) if matches!(name, "sentinel" | "client" | "valkyrie") => format!(
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
    let call = &mut Call {
        args,
        name,
        sub,
        session,
        handle,
    };
    match run_command(call).await {
        Some(replies) => replies,
        None => vec![unknown_command(args)],
    }
}

/// The command table's handler column as a match: the replies of the
/// command `call.name` names, `None` when it is no command.
macro_rules! run_command {
    ($(
        $kind:ident ($name:literal, $arity:expr, $categories:expr) => $handler:path
        $({ $($subcommands:tt)* })?;
    )*) => {
        async fn run_command(call: &mut Call<'_>) -> Option<Vec<Frame>> {
            let name = call.name;
            Some(match name {
                $($name => $handler(call).await.replies(),)*
                _ => return None,
            })
        }
    };
}
command_table!(run_command);

/// Writes `name|subcommand` (lowercased) for commands with subcommands,
/// else the lowercased name, into `out` (reusing its allocation: this
/// runs for every request). It is what `CLIENT LIST` shows as `cmd=`, and
/// what [`dispatch`] takes.
pub fn full_name(out: &mut String, args: &[&[u8]]) {
    out.clear();
    let name = Lower::new(args[0]);
    out.push_str(name.as_str());
    if let ("sentinel" | "client" | "command" | "acl" | "valkyrie", Some(sub)) =
        (name.as_str(), args.get(1))
    {
        out.push('|');
        out.push_str(Lower::new(sub).as_str());
    }
}
