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

pub fn run(args: &[Vec<u8>]) -> Frame {
    match args {
        [_] => Frame::simple("PONG"),
        [_, msg] => Frame::bulk(msg.clone()),
        _ => wrong_arity("ping"),
    }
}
