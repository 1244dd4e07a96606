//! Command dispatch: one file per command family, as in mini-redis.

mod client;
mod hello;
mod ping;
mod role;
mod sentinel;

use valkyrie_protocol::Frame;

use super::connection::Session;
use crate::runtime::Handle;

/// Runs one command and returns its reply.
pub async fn dispatch(args: &[Vec<u8>], session: &mut Session, handle: &Handle) -> Frame {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    match name.as_str() {
        "ping" => ping::run(args),
        "hello" => hello::run(args, session),
        "client" => client::run(args, session),
        "role" => role::run(handle),
        "sentinel" => sentinel::run(args, session, handle).await,
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
