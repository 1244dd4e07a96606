//! Command dispatch: one file per command family, as in mini-redis.

mod admin;
mod auth;
mod client;
mod command;
mod hello;
mod info;
mod ping;
pub mod pubsub;
mod role;
pub mod sentinel;
mod shutdown;

use valkyrie_protocol::Frame;

use super::connection::Session;
use crate::runtime::Handle;

/// Runs one command and returns its replies (several for (un)subscribe).
pub async fn dispatch(args: &[Vec<u8>], session: &mut Session, handle: &Handle) -> Vec<Frame> {
    crate::metrics::sentinel_command(args);
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    if session.user.is_none() && name != "auth" && name != "hello" {
        return vec![Frame::error("NOAUTH Authentication required.")];
    }
    let subscribed = !session.channels.is_empty() || !session.patterns.is_empty();
    if subscribed && session.protocol == valkyrie_protocol::Protocol::Resp2 {
        match name.as_str() {
            "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" | "ssubscribe"
            | "sunsubscribe" | "quit" | "reset" => {}
            "ping" => {
                // RESP2 subscribed context: PING answers as a message.
                let msg = args.get(1).cloned().unwrap_or_default();
                return vec![Frame::Array(vec![Frame::bulk("pong"), Frame::bulk(msg)])];
            }
            _ => {
                let full = match args.get(1) {
                    Some(sub) if name == "sentinel" || name == "client" => format!(
                        "{name}|{}",
                        String::from_utf8_lossy(sub).to_ascii_lowercase()
                    ),
                    _ => name.clone(),
                };
                return vec![Frame::error(format!(
                    "ERR Can't execute '{full}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
                ))];
            }
        }
    }
    match name.as_str() {
        "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" => {
            return pubsub::run(&name, args, session);
        }
        _ => {}
    }
    vec![dispatch_one(&name, args, session, handle).await]
}

async fn dispatch_one(
    name: &str,
    args: &[Vec<u8>],
    session: &mut Session,
    handle: &Handle,
) -> Frame {
    match name {
        "info" => info::run(args, handle),
        "auth" => auth::run(args, session),
        "acl" => auth::acl(args, session),
        "command" => command::run(args),
        "publish" => command::publish(args),
        "ping" => ping::run(args),
        "hello" => hello::run(args, session),
        "client" => client::run(args, session),
        "role" => role::run(handle),
        "sentinel" => sentinel::run(args, session, handle).await,
        "shutdown" => shutdown::run(args, session, handle),
        _ => unknown_command(args),
    }
}

/// Valkey's text: `ERR unknown command 'X', with args beginning with: 'a' 'b' `.
pub fn unknown_command(args: &[Vec<u8>]) -> Frame {
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&args[0])
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
