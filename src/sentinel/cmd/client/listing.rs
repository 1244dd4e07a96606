//! The connections `CLIENT LIST`, `INFO` and `KILL` show and drop: the
//! filters by type, id, address and user, and the listing's text.

use std::sync::Arc;

use tokio::time::Instant;
use valkyrie_protocol::Frame;

use super::super::super::clients::Client;
use super::super::super::connection::session::Session;
use super::super::call::{SYNTAX, is, long, switch, text};

/// `CLIENT INFO`/`LIST`'s reply: a verbatim `txt` string in RESP3, a bulk
/// string in RESP2, as Valkey sends it.
pub(super) fn verbatim(s: String) -> Frame {
    Frame::Verbatim {
        format: *b"txt",
        text: s.into(),
    }
}

/// A client type for `TYPE`: `Some(true)` pubsub, `Some(false)` normal;
/// master/replica types exist but match no client here.
enum Kind {
    Normal,
    Pubsub,
    Other,
}

fn kind(name: &[u8]) -> Option<Kind> {
    let lower = name.to_ascii_lowercase();
    match lower.as_slice() {
        b"normal" => Some(Kind::Normal),
        b"pubsub" => Some(Kind::Pubsub),
        b"master" | b"primary" | b"replica" | b"slave" => Some(Kind::Other),
        _ => None,
    }
}

fn kind_matches(k: &Kind, c: &Client) -> bool {
    match k {
        Kind::Normal => !c.is_pubsub(),
        Kind::Pubsub => c.is_pubsub(),
        Kind::Other => false,
    }
}

fn unknown_type(name: &[u8]) -> Frame {
    Frame::error(format!("ERR Unknown client type '{}'", text(name)))
}

/// Brings this connection's registry entry up to date before it is shown.
pub(super) fn sync(session: &Session) {
    let mut st = session.client.state();
    st.name.clone_from(&session.name);
    st.user.clone_from(&session.user);
    st.sub = session.channels.len();
    st.psub = session.patterns.len();
    st.resp = match session.protocol {
        valkyrie_protocol::Protocol::Resp2 => 2,
        valkyrie_protocol::Protocol::Resp3 => 3,
    };
}

/// `CLIENT LIST [TYPE t] [ID id …]`.
pub(super) fn list(session: &Session, filters: &[&[u8]]) -> Frame {
    let mut kind_filter = None;
    let mut ids: Option<Vec<u64>> = None;
    match filters {
        [] => {}
        [t, name] if is(t, "type") => match kind(name) {
            Some(k) => kind_filter = Some(k),
            None => return unknown_type(name),
        },
        [i, list @ ..] if is(i, "id") && !list.is_empty() => {
            let mut parsed = Vec::new();
            for id in list {
                match long(id)
                    .and_then(|n| u64::try_from(n).ok())
                    .filter(|n| *n > 0)
                {
                    Some(n) => parsed.push(n),
                    None => return Frame::error("ERR Invalid client ID"),
                }
            }
            ids = Some(parsed);
        }
        _ => return Frame::error(SYNTAX),
    }
    sync(session);
    let now = Instant::now();
    let mut out = String::new();
    for c in session.shared.registry.all() {
        if kind_filter.as_ref().is_some_and(|k| !kind_matches(k, &c)) {
            continue;
        }
        if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
            continue;
        }
        out.push_str(&c.line(now));
        out.push('\n');
    }
    verbatim(out)
}

/// Closes `victims`; this connection itself only after its reply.
pub(super) fn kill(session: &mut Session, victims: &[Arc<Client>]) {
    for v in victims {
        if v.id == session.id {
            session.close_after_reply = true;
        } else {
            v.kill.notify_one();
        }
    }
}

/// `CLIENT KILL <filter> <value> …`.
pub(super) fn kill_filtered(session: &mut Session, filters: &[&[u8]]) -> Frame {
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut kind_filter = None;
    let mut user = None;
    let mut skipme = true;
    let mut max_age = None;
    let mut i = 0;
    while i < filters.len() {
        let Some(value) = filters.get(i + 1) else {
            return Frame::error(SYNTAX);
        };
        let option = &filters[i];
        if is(option, "id") {
            match long(value).filter(|n| *n >= 1) {
                Some(n) => id = Some(n.unsigned_abs()),
                None => return Frame::error("ERR client-id should be greater than 0"),
            }
        } else if is(option, "maxage") {
            match long(value) {
                Some(n) if n > 0 => max_age = Some(n.unsigned_abs()),
                Some(_) => return Frame::error("ERR maxage should be greater than 0"),
                None => return Frame::error("ERR maxage is not an integer or out of range"),
            }
        } else if is(option, "type") {
            match kind(value) {
                Some(k) => kind_filter = Some(k),
                None => return unknown_type(value),
            }
        } else if is(option, "addr") {
            addr = Some(text(value));
        } else if is(option, "laddr") {
            laddr = Some(text(value));
        } else if is(option, "user") {
            let name = text(value);
            if !session.shared.security.has_user(&name) {
                return Frame::error(format!("ERR No such user '{name}'"));
            }
            user = Some(name);
        } else if is(option, "skipme") {
            match switch(value, "yes", "no") {
                Some(v) => skipme = v,
                None => return Frame::error(SYNTAX),
            }
        } else {
            return Frame::error(SYNTAX);
        }
        i += 2;
    }
    sync(session);
    let now = Instant::now();
    let victims: Vec<Arc<Client>> = session
        .shared
        .registry
        .all()
        .into_iter()
        .filter(|c| addr.as_ref().is_none_or(|a| c.addr.to_string() == *a))
        .filter(|c| laddr.as_ref().is_none_or(|a| c.laddr.to_string() == *a))
        .filter(|c| kind_filter.as_ref().is_none_or(|k| kind_matches(k, c)))
        .filter(|c| id.is_none_or(|id| c.id == id))
        .filter(|c| {
            user.as_ref()
                .is_none_or(|u| c.state().user.as_deref().unwrap_or("default") == u)
        })
        .filter(|c| !(skipme && c.id == session.id))
        .filter(|c| {
            max_age.is_none_or(|age| now.saturating_duration_since(c.created).as_secs() >= age)
        })
        .collect();
    kill(session, &victims);
    Frame::Integer(i64::try_from(victims.len()).unwrap_or(i64::MAX))
}
