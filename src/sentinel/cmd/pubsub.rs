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

use valkyrie_protocol::{Frame, Protocol};

use crate::core::Channel;

use super::super::connection::Session;

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
pub fn run(kind: &str, args: &[&[u8]], session: &mut Session) -> Vec<Frame> {
    let names = &args[1..];
    let mut out = Vec::new();
    match kind {
        "subscribe" | "psubscribe" => {
            if names.is_empty() {
                return vec![super::wrong_arity(kind)];
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
        if glob_match(p, channel.as_bytes()) {
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

/// Valkey's glob: `*`, `?`, `[abc]`, `[^a-z]`, and `\` escapes.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let (mut star_p, mut star_t) = (None::<usize>, 0usize);
    while t < text.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star_p = Some(p);
                star_t = t;
                p += 1;
                continue;
            }
            Some(b'?') => Some(p + 1),
            Some(b'[') => class(pattern, p, text[t]),
            Some(b'\\') if p + 1 < pattern.len() => (pattern[p + 1] == text[t]).then_some(p + 2),
            Some(&c) => (c == text[t]).then_some(p + 1),
            None => None,
        };
        match step {
            Some(next) => {
                p = next;
                t += 1;
            }
            None => match star_p {
                Some(sp) => {
                    p = sp + 1;
                    star_t += 1;
                    t = star_t;
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting at `pattern[p] == b'['`; returns
/// the index after the class on a match.
fn class(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    let mut i = p + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    while i < pattern.len() && pattern[i] != b']' {
        if pattern[i] == b'\\' && i + 1 < pattern.len() {
            matched |= pattern[i + 1] == c;
            i += 2;
        } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']' {
            let (lo, hi) = (
                pattern[i].min(pattern[i + 2]),
                pattern[i].max(pattern[i + 2]),
            );
            matched |= (lo..=hi).contains(&c);
            i += 3;
        } else {
            matched |= pattern[i] == c;
            i += 1;
        }
    }
    // An unterminated class matches like Valkey: up to the end.
    let end = if i < pattern.len() { i + 1 } else { i };
    (matched != negate).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        for (p, t, m) in [
            ("*", "+switch-master", true),
            ("+switch-master", "+switch-master", true),
            ("+*", "+sdown", true),
            ("[-+]sdown", "-sdown", true),
            ("[-+]sdown", "+sdown", true),
            ("[-+]sdown", "xsdown", false),
            ("+s?own", "+sdown", true),
            ("*master", "+switch-master", true),
            ("*master", "+switch-masters", false),
            ("[^+]odown", "-odown", true),
            ("[^+]odown", "+odown", false),
            ("[a-c]x", "bx", true),
            ("\\*", "*", true),
            ("\\*", "a", false),
            ("switch-master", "+switch-master", false),
        ] {
            assert_eq!(glob_match(p.as_bytes(), t.as_bytes()), m, "{p} ~ {t}");
        }
    }
}
