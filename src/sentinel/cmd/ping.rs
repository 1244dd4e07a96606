//! `PING [message]`.
//!
//! # Format
//!
//! ```text
//! PING            -> +PONG
//! PING <message>  -> $<message>
//! ```

use super::call::Call;
use valkyrie_protocol::Frame;

use super::call::wrong_arity;

pub async fn run(call: &mut Call<'_>) -> Frame {
    let args = call.args;
    match args {
        [_] => Frame::simple("PONG"),
        [_, msg] => Frame::bulk(msg.to_vec()),
        _ => wrong_arity("ping"),
    }
}
