//! `SUBSCRIBE`, `PSUBSCRIBE`, `UNSUBSCRIBE`, `PUNSUBSCRIBE`, and the
//! delivery of events to subscribers.
//!
//! # Format
//!
//! ```text
//! SUBSCRIBE ch…      -> per channel: *3 $9 subscribe $ch :count   (RESP3: >3)
//! PSUBSCRIBE pat…    -> per pattern: *3 $10 psubscribe $pat :count
//! UNSUBSCRIBE [ch…]  -> per channel: *3 $11 unsubscribe $ch :count
//! event              -> *3 $7 message $ch $payload
//!                       *4 $8 pmessage $pat $ch $payload
//! ```
//!
//! The count is channels plus patterns, as in Valkey.

use super::call::Call;
use valkyrie_protocol::{Frame, Protocol};

use crate::core::Channel;

/// Valkey's glob (`*`, `?`, `[abc]`, `[^a-z]`, `\` escapes): the
/// protocol crate's one matcher.
pub use valkyrie_protocol::glob::matches as glob_match;

use super::super::connection::session::Session;

fn aggregate(protocol: Protocol, items: Vec<Frame>) -> Frame {
    match protocol {
        Protocol::Resp3 => Frame::Push(items),
        Protocol::Resp2 => Frame::Array(items),
    }
}

fn count(session: &Session) -> i64 {
    i64::try_from(session.channels.len() + session.patterns.len()).unwrap_or(i64::MAX)
}

/// Runs a (un)subscribe command; one reply per channel or pattern.
pub async fn run(call: &mut Call<'_>) -> Vec<Frame> {
    let (kind, args, session) = (call.name, call.args, &mut *call.session);
    let names = &args[1..];
    let mut out = Vec::new();
    match kind {
        "subscribe" | "psubscribe" => {
            if names.is_empty() {
                return vec![super::call::wrong_arity(kind)];
            }
            for n in names {
                if kind == "subscribe" {
                    session.channels.insert(n.to_vec());
                } else {
                    session.patterns.insert(n.to_vec());
                }
                out.push(aggregate(
                    session.protocol,
                    vec![
                        Frame::bulk(kind.to_string()),
                        Frame::bulk(n.to_vec()),
                        Frame::Integer(count(session)),
                    ],
                ));
            }
        }
        _ => {
            let patterns = kind == "punsubscribe";
            let targets: Vec<Vec<u8>> = if names.is_empty() {
                let set = if patterns {
                    &session.patterns
                } else {
                    &session.channels
                };
                set.iter().cloned().collect()
            } else {
                names.iter().map(|n| n.to_vec()).collect()
            };
            if targets.is_empty() {
                out.push(aggregate(
                    session.protocol,
                    vec![
                        Frame::bulk(kind.to_string()),
                        Frame::Null,
                        Frame::Integer(count(session)),
                    ],
                ));
            }
            for n in targets {
                if patterns {
                    session.patterns.remove(&n);
                } else {
                    session.channels.remove(&n);
                }
                out.push(aggregate(
                    session.protocol,
                    vec![
                        Frame::bulk(kind.to_string()),
                        Frame::bulk(n),
                        Frame::Integer(count(session)),
                    ],
                ));
            }
        }
    }
    out
}

/// The messages one event produces for this session.
pub fn deliver(session: &Session, channel: Channel, payload: &str) -> Vec<Frame> {
    let channel = channel.as_str();
    let mut out = Vec::new();
    if session.channels.contains(channel.as_bytes()) {
        out.push(aggregate(
            session.protocol,
            vec![
                Frame::bulk("message"),
                Frame::bulk(channel.to_string()),
                Frame::bulk(payload.to_string()),
            ],
        ));
    }
    for p in &session.patterns {
        // Valkyrie's own channels only for `valkyrie:…` patterns.
        if crate::events::pattern_matches(p, channel.as_bytes()) {
            out.push(aggregate(
                session.protocol,
                vec![
                    Frame::bulk("pmessage"),
                    Frame::bulk(p.clone()),
                    Frame::bulk(channel.to_string()),
                    Frame::bulk(payload.to_string()),
                ],
            ));
        }
    }
    out
}
