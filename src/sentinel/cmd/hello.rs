//! `HELLO [protover [AUTH user pass] [SETNAME name]]`.
//!
//! # Format
//!
//! ```text
//! HELLO [2|3] -> map: server valkey, version 8.0.1, proto :2|3, id :N,
//!                mode sentinel, modules []   (no `role` key, as Valkey)
//! HELLO 4     -> -NOPROTO unsupported protocol version
//! HELLO 3 SETNAME "a b"
//!             -> -ERR Client names cannot contain spaces, newlines or special characters.
//!                (nothing changes: no login, no protocol switch, no name)
//! ```

use super::call::Call;
use valkyrie_protocol::{Frame, Protocol};

/// The Valkey version Valkyrie reports being compatible with.
pub const VERSION: &str = "8.0.1";

const NOAUTH_HELLO: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";

/// A parsed `HELLO`: every option is checked before anything changes (a
/// bad name or a syntax error changes nothing, not even the login), as
/// Valkey's `helloCommand`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Hello<'a> {
    /// The protocol asked for; `None` for a bare `HELLO`.
    pub protocol: Option<Protocol>,
    /// `AUTH <user> <pass>`, the last one given.
    pub auth: Option<(&'a [u8], &'a [u8])>,
    /// `SETNAME <name>`, the last one given.
    pub name: Option<&'a [u8]>,
}

impl<'a> Hello<'a> {
    /// Parses `HELLO [protover [AUTH user pass] [SETNAME name]]`.
    pub(crate) fn parse(args: &'a [&'a [u8]]) -> Result<Hello<'a>, Frame> {
        let mut hello = Hello {
            protocol: None,
            auth: None,
            name: None,
        };
        let Some((ver, mut rest)) = args[1..].split_first() else {
            return Ok(hello);
        };
        hello.protocol = match std::str::from_utf8(ver)
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
        {
            Some(2) => Some(Protocol::Resp2),
            Some(3) => Some(Protocol::Resp3),
            Some(_) => return Err(Frame::error("NOPROTO unsupported protocol version")),
            None => {
                return Err(Frame::error(
                    "ERR Protocol version is not an integer or out of range",
                ));
            }
        };
        while let Some((opt, tail)) = rest.split_first() {
            match (opt.to_ascii_lowercase().as_slice(), tail) {
                (b"auth", [user, pass, more @ ..]) => {
                    hello.auth = Some((*user, *pass));
                    rest = more;
                }
                (b"setname", [name, more @ ..]) => {
                    if !super::client::valid_attr(name) {
                        return Err(Frame::error(super::client::BAD_NAME));
                    }
                    hello.name = Some(*name);
                    rest = more;
                }
                _ => {
                    return Err(Frame::error(format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(opt)
                    )));
                }
            }
        }
        Ok(hello)
    }
}

/// Runs `HELLO`, parsed first ([`Hello`]): then `AUTH`, then the name and
/// the protocol.
pub async fn run(call: &mut Call<'_>) -> Frame {
    let (args, session) = (call.args, &mut *call.session);
    if args.len() == 1 && session.user.is_none() {
        return Frame::error(NOAUTH_HELLO);
    }
    let hello = match Hello::parse(args) {
        Ok(hello) => hello,
        Err(reply) => return reply,
    };
    if let Some(protocol) = hello.protocol {
        if let Some((user, pass)) = hello.auth
            && let Err(e) = super::auth::login(session, user, pass)
        {
            return e;
        }
        if session.user.is_none() {
            return Frame::error(NOAUTH_HELLO);
        }
        session.protocol = protocol;
        if let Some(n) = hello.name {
            // An empty name clears it, as `CLIENT SETNAME ""`.
            session.name = (!n.is_empty()).then(|| n.to_vec());
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
