//! The observer threads: an event tap per sentinel (`PSUBSCRIBE *`), a
//! hello tap per data node (`SUBSCRIBE __sentinel__:hello`) and a slow-log
//! poller per data node (its replication commands), each reconnecting
//! across restarts and writing to the [`Recorder`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use valkyrie_protocol::Frame;

use super::conn::{Conn, ConnErr, text};
use super::records::{Event, Hello, Recorder, Sent};

type Session = Box<dyn FnMut(&mut Conn, &AtomicBool) + Send>;

/// Runs `session` on a connection to `port` until `running` is cleared,
/// reconnecting whenever the connection fails (restarts, kills).
pub(super) fn tap(running: Arc<AtomicBool>, port: u16, mut session: Session) -> JoinHandle<()> {
    std::thread::spawn(move || {
        while running.load(Ordering::Relaxed) {
            match Conn::connect(port, Duration::from_millis(100)) {
                Some(mut c) => session(&mut c, &running),
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
}

/// `PSUBSCRIBE *` on sentinel `idx`; `ready` counts confirmed subscriptions.
pub(super) fn event_session(rec: Recorder, idx: usize, ready: Arc<AtomicU64>) -> Session {
    Box::new(move |c, running| {
        if c.send(&["PSUBSCRIBE", "*"]).is_err() {
            return;
        }
        loop {
            match c.read() {
                Ok(Frame::Array(p)) if p.len() == 4 && text(&p[0]) == "pmessage" => {
                    let e = Event {
                        at: rec.now(),
                        sentinel: idx,
                        channel: text(&p[2]),
                        payload: text(&p[3]),
                    };
                    rec.log().events.push(e);
                }
                Ok(Frame::Array(p)) if !p.is_empty() && text(&p[0]) == "psubscribe" => {
                    ready.fetch_add(1, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(ConnErr::Timeout) => {
                    if !running.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Err(ConnErr::Closed) => {
                    std::thread::sleep(Duration::from_millis(20));
                    return;
                }
            }
        }
    })
}

/// `SUBSCRIBE __sentinel__:hello` on a data node.
pub(super) fn hello_session(rec: Recorder, node: u16, ready: Arc<AtomicU64>) -> Session {
    Box::new(move |c, running| {
        if c.send(&["SUBSCRIBE", "__sentinel__:hello"]).is_err() {
            return;
        }
        loop {
            match c.read() {
                Ok(Frame::Array(p)) if p.len() == 3 && text(&p[0]) == "message" => {
                    let raw = text(&p[2]);
                    let at = rec.now();
                    let mut log = rec.log();
                    match Hello::parse(at, node, &raw) {
                        Some(h) => log.hellos.push(h),
                        None => log
                            .trouble
                            .push(format!("{at:?} node {node}: unparsable hello {raw:?}")),
                    }
                }
                Ok(Frame::Array(p)) if !p.is_empty() && text(&p[0]) == "subscribe" => {
                    ready.fetch_add(1, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(ConnErr::Timeout) => {
                    if !running.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Err(ConnErr::Closed) => {
                    std::thread::sleep(Duration::from_millis(20));
                    return;
                }
            }
        }
    })
}

/// Sets the slow log to record every command.
pub(super) fn slowlog_on(c: &mut Conn) -> bool {
    matches!(
        c.call(
            &[
                "CONFIG",
                "SET",
                "slowlog-log-slower-than",
                "0",
                "slowlog-max-len",
                "100000"
            ],
            Duration::from_secs(2)
        ),
        Ok(Frame::Simple(_))
    )
}

/// Polls a data node's slow log and records its replication commands.
/// Entries are read by id, per server run id (a restarted server starts
/// its ids again).
pub(super) fn slowlog_session(rec: Recorder, node: u16, ready: Arc<AtomicU64>) -> Session {
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    Box::new(move |c, running| {
        if !slowlog_on(c) {
            return;
        }
        let Ok(info) = c.call(&["INFO", "server"], Duration::from_secs(2)) else {
            return;
        };
        let run_id = text(&info)
            .lines()
            .find_map(|l| l.strip_prefix("run_id:").map(|v| v.trim().to_string()))
            .unwrap_or_default();
        ready.fetch_add(1, Ordering::SeqCst);
        let mut count = 64usize;
        while running.load(Ordering::Relaxed) {
            let Ok(Frame::Array(entries)) = c.call(
                &["SLOWLOG", "GET", &count.to_string()],
                Duration::from_secs(2),
            ) else {
                return;
            };
            let seen = last.get(&run_id).copied().unwrap_or(-1);
            let mut fresh: Vec<(i64, Vec<String>, String, String)> = Vec::new();
            let mut oldest = i64::MAX;
            for e in &entries {
                let Frame::Array(f) = e else { continue };
                if f.len() < 6 {
                    continue;
                }
                let Frame::Integer(id) = f[0] else { continue };
                oldest = oldest.min(id);
                if id <= seen {
                    continue;
                }
                let args = match &f[3] {
                    Frame::Array(a) => a.iter().map(text).collect(),
                    _ => Vec::new(),
                };
                fresh.push((id, args, text(&f[4]), text(&f[5])));
            }
            if entries.len() >= count && oldest > seen + 1 && count < 100_000 {
                // More came in than one read holds: read more at once.
                count = (count * 4).min(100_000);
                continue;
            }
            if entries.len() >= count && oldest > seen + 1 && seen >= 0 {
                rec.log().trouble.push(format!(
                    "node {node}: slow log entries {}..{} lost",
                    seen + 1,
                    oldest
                ));
            }
            fresh.sort_by_key(|x| x.0);
            if let Some(top) = fresh.last() {
                last.insert(run_id.clone(), top.0);
            }
            let at = rec.now();
            let mut log = rec.log();
            for (_, args, client, name) in fresh {
                let cmd = args
                    .first()
                    .map(|a| a.to_ascii_lowercase())
                    .unwrap_or_default();
                if cmd == "replicaof" || cmd == "slaveof" {
                    log.sent.push(Sent {
                        at,
                        node,
                        client,
                        name,
                        args,
                    });
                }
            }
            drop(log);
            count = (count / 2).max(64);
            std::thread::sleep(Duration::from_millis(30));
        }
    })
}
