//! The ACL log (`ACL LOG`): refused commands and channels and failed
//! logins, newest first, similar entries within a minute grouped into one
//! with a count, at most 128 entries (Valkey's `acllog-max-len` default).

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use valkyrie_protocol::Frame;

/// Valkey's `acllog-max-len` default.
const MAX_LEN: usize = 128;
/// Entries this close in time (ms) are grouped.
const GROUPING_MS: i64 = 60_000;
/// Only the newest entries are looked at for grouping.
const SCAN: usize = 10;

/// One entry.
#[derive(Debug, Clone)]
struct Entry {
    count: u64,
    reason: &'static str,
    object: String,
    username: String,
    /// Last update, Unix milliseconds.
    updated: i64,
    client_info: String,
    id: u64,
    created: i64,
}

/// The log.
#[derive(Debug, Default)]
pub struct Log {
    entries: VecDeque<Entry>,
    next_id: u64,
}

/// Unix milliseconds: the log shows wall-clock times, as Valkey's does
/// (`timestamp-created`), and nothing decides on them.
#[allow(clippy::disallowed_methods)]
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Log {
    /// Records a refusal (`reason`: `command`, `channel` or `auth`).
    pub fn add(&mut self, reason: &'static str, object: &str, username: &str, client_info: String) {
        let now = now_ms();
        let found = self.entries.iter().take(SCAN).position(|e| {
            e.reason == reason
                && (e.updated - now).abs() <= GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(i) = found {
            if let Some(mut e) = self.entries.remove(i) {
                e.count += 1;
                e.updated = now;
                e.client_info = client_info;
                self.entries.push_front(e);
            }
            return;
        }
        self.entries.push_front(Entry {
            count: 1,
            reason,
            object: object.to_string(),
            username: username.to_string(),
            updated: now,
            client_info,
            id: self.next_id,
            created: now,
        });
        self.next_id += 1;
        self.entries.truncate(MAX_LEN);
    }

    /// Empties the log (`ACL LOG RESET`).
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// `ACL LOG [count]`: the newest `count` entries as Valkey shows them.
    pub fn show(&self, count: usize) -> Frame {
        let now = now_ms();
        Frame::Array(
            self.entries
                .iter()
                .take(count)
                .map(|e| {
                    let pairs = vec![
                        (
                            "count",
                            Frame::Integer(i64::try_from(e.count).unwrap_or(i64::MAX)),
                        ),
                        ("reason", Frame::bulk(e.reason)),
                        ("context", Frame::bulk("toplevel")),
                        ("object", Frame::bulk(e.object.clone())),
                        ("username", Frame::bulk(e.username.clone())),
                        (
                            "age-seconds",
                            Frame::Double((now - e.updated) as f64 / 1000.0),
                        ),
                        ("client-info", Frame::bulk(e.client_info.clone())),
                        (
                            "entry-id",
                            Frame::Integer(i64::try_from(e.id).unwrap_or(i64::MAX)),
                        ),
                        ("timestamp-created", Frame::Integer(e.created)),
                        ("timestamp-last-updated", Frame::Integer(e.updated)),
                    ];
                    Frame::Map(
                        pairs
                            .into_iter()
                            .map(|(k, v)| (Frame::bulk(k), v))
                            .collect(),
                    )
                })
                .collect(),
        )
    }
}
