//! `PING [message]`.
//!
//! # Format
//!
//! ```text
//! PING            -> +PONG
//! PING <message>  -> $<message>
//! ```

use valkyrie_protocol::Frame;

use super::wrong_arity;

pub fn run(args: &[&[u8]]) -> Frame {
    match args {
        [_] => Frame::simple("PONG"),
        [_, msg] => Frame::bulk(msg.to_vec()),
        _ => wrong_arity("ping"),
    }
}
