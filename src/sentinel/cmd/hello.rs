//! `HELLO [protover [AUTH user pass] [SETNAME name]]`.
//!
//! # Format
//!
//! ```text
//! HELLO [2|3] -> map: server valkey, version 8.0.1, proto :2|3, id :N,
//!                mode sentinel, modules []   (no `role` key, as Valkey)
//! HELLO 4     -> -NOPROTO unsupported protocol version
//! ```

use valkyrie_protocol::{Frame, Protocol};

use super::super::connection::Session;

/// The Valkey version Valkyrie reports being compatible with.
pub const VERSION: &str = "8.0.1";

pub fn run(args: &[Vec<u8>], session: &mut Session) -> Frame {
    let mut rest = &args[1..];
    if let Some((ver, tail)) = rest.split_first() {
        let proto = match std::str::from_utf8(ver)
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
        {
            Some(2) => Protocol::Resp2,
            Some(3) => Protocol::Resp3,
            Some(_) => return Frame::error("NOPROTO unsupported protocol version"),
            None => return Frame::error("ERR Protocol version is not an integer or out of range"),
        };
        rest = tail;
        let mut setname = None;
        while let Some((opt, tail)) = rest.split_first() {
            match (opt.to_ascii_lowercase().as_slice(), tail) {
                (b"auth", [_, _, more @ ..]) => {
                    // No password is configured on this port yet.
                    let _ = more;
                    return Frame::error(
                        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                    );
                }
                (b"setname", [name, more @ ..]) => {
                    setname = Some(name.clone());
                    rest = more;
                }
                _ => {
                    return Frame::error(format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(opt)
                    ));
                }
            }
        }
        session.protocol = proto;
        if let Some(n) = setname {
            session.name = Some(n);
        }
    }
    Frame::Map(vec![
        (Frame::bulk("server"), Frame::bulk("valkey")),
        (Frame::bulk("version"), Frame::bulk(VERSION)),
        (
            Frame::bulk("proto"),
            Frame::Integer(if session.protocol == Protocol::Resp3 {
                3
            } else {
                2
            }),
        ),
        (Frame::bulk("id"), Frame::Integer(session.id as i64)),
        (Frame::bulk("mode"), Frame::bulk("sentinel")),
        (Frame::bulk("modules"), Frame::Array(vec![])),
    ])
}
