//! The records: events the sentinels published, hellos seen on the data
//! nodes, replication commands the data nodes executed, all stamped with
//! the time since the deployment started; the [`Recorder`] the taps write
//! them to, and the deployment's queries over them (elections, a dump).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Deployment, poll};

/// One event a sentinel published.
#[derive(Clone, Debug)]
pub struct Event {
    /// When the tap received it, since the deployment started.
    pub at: Duration,
    /// The sentinel's index in the deployment.
    pub sentinel: usize,
    pub channel: String,
    pub payload: String,
}

impl Event {
    /// The payload's space-separated words.
    pub fn words(&self) -> Vec<&str> {
        self.payload.split(' ').collect()
    }
}

/// One hello seen on a data node's `__sentinel__:hello` channel.
#[derive(Clone, Debug)]
pub struct Hello {
    pub at: Duration,
    /// The data node's port it was published on.
    pub node: u16,
    pub raw: String,
    pub ip: String,
    pub port: u16,
    pub runid: String,
    pub current_epoch: u64,
    pub master: String,
    pub master_ip: String,
    pub master_port: u16,
    pub config_epoch: u64,
}

impl Hello {
    /// Parses a hello payload (exactly 8 comma-separated fields).
    pub fn parse(at: Duration, node: u16, raw: &str) -> Option<Hello> {
        let f: Vec<&str> = raw.split(',').collect();
        if f.len() != 8 {
            return None;
        }
        Some(Hello {
            at,
            node,
            raw: raw.to_string(),
            ip: f[0].to_string(),
            port: f[1].parse().ok()?,
            runid: f[2].to_string(),
            current_epoch: f[3].parse().ok()?,
            master: f[4].to_string(),
            master_ip: f[5].to_string(),
            master_port: f[6].parse().ok()?,
            config_epoch: f[7].parse().ok()?,
        })
    }
}

/// A replication command (`REPLICAOF`/`SLAVEOF`) a data node executed.
#[derive(Clone, Debug)]
pub struct Sent {
    /// When the slow-log poller first saw it (≤ ~50 ms after it ran).
    pub at: Duration,
    /// The data node's port.
    pub node: u16,
    /// The client's `ip:port`.
    pub client: String,
    /// The client's name (`CLIENT SETNAME`), empty when unnamed.
    pub name: String,
    pub args: Vec<String>,
}

impl Sent {
    /// `REPLICAOF NO ONE` / `SLAVEOF NO ONE`.
    pub fn is_promotion(&self) -> bool {
        self.args.len() == 3
            && self.args[1].eq_ignore_ascii_case("no")
            && self.args[2].eq_ignore_ascii_case("one")
    }
}

/// Everything recorded, in arrival order.
#[derive(Debug, Default)]
pub(super) struct Log {
    pub(super) events: Vec<Event>,
    pub(super) hellos: Vec<Hello>,
    pub(super) sent: Vec<Sent>,
    /// Hellos that did not parse, and slow-log gaps: observer trouble.
    pub(super) trouble: Vec<String>,
}

/// The shared log and its clock; every tap holds a clone.
#[derive(Clone, Debug)]
pub(super) struct Recorder {
    pub(super) start: Instant,
    pub(super) log: Arc<Mutex<Log>>,
}

impl Recorder {
    pub(super) fn now(&self) -> Duration {
        self.start.elapsed()
    }

    pub(super) fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An election a sentinel won: `+elected-leader`, with the epoch of the
/// failover attempt it belongs to (its self-vote after `+try-failover`,
/// else the `+new-epoch` just before `+try-failover`).
#[derive(Clone, Debug)]
pub struct Election {
    pub sentinel: usize,
    pub epoch: Option<u64>,
    pub at: Duration,
}

impl Deployment {
    pub fn events(&self) -> Vec<Event> {
        self.rec.log().events.clone()
    }

    /// Sentinel `i`'s events, in order.
    pub fn events_of(&self, i: usize) -> Vec<Event> {
        self.rec
            .log()
            .events
            .iter()
            .filter(|e| e.sentinel == i)
            .cloned()
            .collect()
    }

    /// Sentinel `i`'s events on `channel` whose payload starts with `prefix`.
    pub fn find(&self, i: usize, channel: &str, prefix: &str) -> Vec<Event> {
        self.rec
            .log()
            .events
            .iter()
            .filter(|e| e.sentinel == i && e.channel == channel && e.payload.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Waits for an event of sentinel `i` on `channel` starting with `prefix`.
    pub fn wait_event(
        &self,
        i: usize,
        channel: &str,
        prefix: &str,
        limit: Duration,
    ) -> Result<Event, String> {
        poll(limit, || {
            self.find(i, channel, prefix)
                .into_iter()
                .next()
                .ok_or_else(|| {
                    format!(
                        "no `{channel} {prefix}…` from {}",
                        self.sentinels[i].label()
                    )
                })
        })
    }

    pub fn hellos(&self) -> Vec<Hello> {
        self.rec.log().hellos.clone()
    }

    /// Every replication command the data nodes executed.
    pub fn sent(&self) -> Vec<Sent> {
        self.rec.log().sent.clone()
    }

    /// The promotions (`REPLICAOF NO ONE`) recorded, once at least one is
    /// (within `limit`, else none): the recorders read the data nodes, so
    /// under load they can trail the sentinels' own events.
    pub fn promotions(&self, limit: Duration) -> Vec<Sent> {
        poll(limit, || {
            let p: Vec<Sent> = self
                .sent()
                .into_iter()
                .filter(|s| s.is_promotion())
                .collect();
            if p.is_empty() {
                Err("no promotion recorded".into())
            } else {
                Ok(p)
            }
        })
        .unwrap_or_default()
    }

    /// The replication commands from sentinel `i`'s connections.
    pub fn sent_by(&self, i: usize) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| self.sender(s) == Some(i))
            .collect()
    }

    /// Every `+elected-leader`, with its epoch.
    pub fn elections(&self) -> Vec<Election> {
        let mut out = Vec::new();
        for s in &self.sentinels {
            let mut new_epoch: Option<u64> = None;
            let mut try_epoch: Option<u64> = None;
            let mut self_vote: Option<u64> = None;
            for e in self.events_of(s.idx) {
                let w = e.words();
                match e.channel.as_str() {
                    "+new-epoch" => new_epoch = w.first().and_then(|v| v.parse().ok()),
                    "+try-failover" => {
                        try_epoch = new_epoch;
                        self_vote = None;
                    }
                    "+vote-for-leader" if w.len() >= 2 && w[0] == s.myid => {
                        self_vote = w[1].parse().ok();
                    }
                    "+elected-leader" => out.push(Election {
                        sentinel: s.idx,
                        epoch: self_vote.or(try_epoch),
                        at: e.at,
                    }),
                    _ => {}
                }
            }
        }
        out.sort_by_key(|e| e.at);
        out
    }

    /// A readable dump of every record.
    pub fn dump(&self) -> String {
        let log = self.rec.log();
        let mut out = String::new();
        for s in &self.sentinels {
            out.push_str(&format!(
                "# {} id {} uid {} dir {}\n",
                s.label(),
                s.myid,
                s.uid,
                s.dir.display()
            ));
        }
        out.push_str(&format!("# data nodes {:?}\n", self.node_ports()));
        for e in &log.events {
            out.push_str(&format!(
                "{:>7} ev   {} {} {}\n",
                e.at.as_millis(),
                self.sentinels[e.sentinel].label(),
                e.channel,
                e.payload
            ));
        }
        for s in &log.sent {
            out.push_str(&format!(
                "{:>7} cmd  on {} from {} {:?}: {}\n",
                s.at.as_millis(),
                s.node,
                s.client,
                s.name,
                s.args.join(" ")
            ));
        }
        for h in &log.hellos {
            out.push_str(&format!(
                "{:>7} hello on {}: {}\n",
                h.at.as_millis(),
                h.node,
                h.raw
            ));
        }
        for t in &log.trouble {
            out.push_str(&format!("trouble: {t}\n"));
        }
        out
    }
}
