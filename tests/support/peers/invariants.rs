//! The invariant checks of the test plan (§11.2), each returning a
//! readable message: I1, I2, I3 and I6 over the records, I4 (converged),
//! I5 (one master in the data) and I7 (discovery, `CKQUORUM`) by polling,
//! and I8 with the [`AckWriter`], whose writes count once `WAIT`
//! confirms them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use valkyrie_protocol::Frame;

use super::conn::{Conn, text};
use super::{Deployment, GROUP, poll};
use crate::support::{info_field, try_call};

impl Deployment {
    /// Every live sentinel in `among` advertises the same master with the
    /// same config epoch, and that node reports `role:master` (I4).
    pub fn converged_among(&self, among: &[usize], limit: Duration) -> Result<(u16, u64), String> {
        poll(limit, || {
            let mut views = Vec::new();
            for &i in among {
                views.push((i, self.advertised(i), self.config_epoch(i)));
            }
            let first = views.first().map(|v| (v.1, v.2));
            let same = views.iter().all(|v| Some((v.1, v.2)) == first);
            match first {
                Some((Some(p), Some(e))) if same => {
                    if info_field(p, "role").as_deref() == Some("master") {
                        Ok((p, e))
                    } else {
                        Err(format!(
                            "all advertise {p} (epoch {e}) but it is not a master: {}",
                            self.roles()
                        ))
                    }
                }
                _ => Err(format!(
                    "sentinels disagree: {}; data: {}",
                    views
                        .iter()
                        .map(|(i, p, e)| format!(
                            "{} -> {p:?} epoch {e:?}",
                            self.sentinels[*i].label()
                        ))
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.roles()
                )),
            }
        })
    }

    /// [`Deployment::converged`], and no live sentinel reports a failover
    /// in progress (`flags` of `SENTINEL master`): a leader that has not
    /// finished its failover still names the promoted replica, and may
    /// still switch to it.
    pub fn settled(&self, limit: Duration) -> Result<(u16, u64), String> {
        poll(limit, || {
            for i in self.live() {
                let flags = self.master_field(i, "flags").unwrap_or_default();
                if flags.contains("failover") {
                    return Err(format!("{}: flags {flags}", self.sentinels[i].label()));
                }
            }
            self.converged(Duration::ZERO)
        })
    }

    /// [`Deployment::converged_among`] over every live sentinel.
    pub fn converged(&self, limit: Duration) -> Result<(u16, u64), String> {
        self.converged_among(&self.live(), limit)
    }

    /// I1: for every (master name, config epoch) in any hello, one address.
    pub fn check_i1(&self) -> Result<(), String> {
        // (name, config epoch) -> address -> who advertised it, when.
        type Seen = BTreeMap<(String, u64), BTreeMap<(String, u16), Vec<String>>>;
        let mut seen = Seen::new();
        for h in self.hellos() {
            seen.entry((h.master.clone(), h.config_epoch))
                .or_default()
                .entry((h.master_ip.clone(), h.master_port))
                .or_default()
                .push(format!(
                    "{}@{}ms",
                    &h.runid[..h.runid.len().min(8)],
                    h.at.as_millis()
                ));
        }
        let bad: Vec<String> = seen
            .iter()
            .filter(|(_, addrs)| addrs.len() > 1)
            .map(|((m, e), addrs)| {
                let list: Vec<String> = addrs
                    .iter()
                    .map(|((ip, p), who)| {
                        format!(
                            "{ip}:{p} by {}",
                            who.iter().take(3).cloned().collect::<Vec<_>>().join(",")
                        )
                    })
                    .collect();
                format!("{m} config epoch {e}: {}", list.join(" / "))
            })
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I1 (one configuration per epoch) violated: {}",
                bad.join("; ")
            ))
        }
    }

    /// I2: per sentinel and epoch, at most one `+vote-for-leader` run id.
    pub fn check_i2(&self) -> Result<(), String> {
        let mut votes: BTreeMap<(usize, u64), BTreeSet<String>> = BTreeMap::new();
        for e in self.events() {
            if e.channel != "+vote-for-leader" {
                continue;
            }
            let w = e.words();
            match (w.first(), w.get(1).and_then(|v| v.parse::<u64>().ok())) {
                (Some(id), Some(ep)) => {
                    votes
                        .entry((e.sentinel, ep))
                        .or_default()
                        .insert(id.to_string());
                }
                _ => return Err(format!("I2: malformed +vote-for-leader {:?}", e.payload)),
            }
        }
        let bad: Vec<String> = votes
            .iter()
            .filter(|(_, ids)| ids.len() > 1)
            .map(|((s, ep), ids)| {
                format!(
                    "{} voted for {ids:?} in epoch {ep}",
                    self.sentinels[*s].label()
                )
            })
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I2 (one vote per voter per epoch) violated: {}",
                bad.join("; ")
            ))
        }
    }

    /// I3: at most one `+elected-leader` per epoch; every promotion
    /// (`REPLICAOF|SLAVEOF NO ONE`) comes from a sentinel's command link
    /// after it was elected (1 s of observer skew allowed) and is counted
    /// in the epoch of its latest election; at most one target per epoch.
    pub fn check_i3(&self) -> Result<(), String> {
        let elections = self.elections();
        let mut errors = Vec::new();
        let mut leaders: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
        for e in &elections {
            match e.epoch {
                Some(ep) => {
                    leaders.entry(ep).or_default().insert(e.sentinel);
                }
                None => errors.push(format!(
                    "+elected-leader of {} at {}ms without a failover epoch (+try-failover/+new-epoch)",
                    self.sentinels[e.sentinel].label(),
                    e.at.as_millis()
                )),
            }
        }
        for (ep, who) in &leaders {
            if who.len() > 1 {
                let names: Vec<String> = who.iter().map(|i| self.sentinels[*i].label()).collect();
                errors.push(format!(
                    "epoch {ep} has several leaders: {}",
                    names.join(", ")
                ));
            }
        }
        let mut targets: BTreeMap<u64, BTreeSet<u16>> = BTreeMap::new();
        for p in self.sent().iter().filter(|s| s.is_promotion()) {
            let Some(i) = self.sender(p) else {
                errors.push(format!(
                    "promotion {:?} on {} at {}ms from an unattributed client {} named {:?}",
                    p.args,
                    p.node,
                    p.at.as_millis(),
                    p.client,
                    p.name
                ));
                continue;
            };
            let elected = elections
                .iter()
                .rfind(|e| e.sentinel == i && e.at <= p.at + Duration::from_secs(1));
            match elected.and_then(|e| e.epoch) {
                Some(ep) => {
                    targets.entry(ep).or_default().insert(p.node);
                }
                None => errors.push(format!(
                    "{} sent {:?} to {} at {}ms without having been elected",
                    self.sentinels[i].label(),
                    p.args,
                    p.node,
                    p.at.as_millis()
                )),
            }
        }
        for (ep, t) in &targets {
            if t.len() > 1 {
                errors.push(format!("epoch {ep} promoted several replicas: {t:?}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I3 (one leader, one promotion per epoch) violated: {}",
                errors.join("; ")
            ))
        }
    }

    /// I5: within `limit`, exactly one live data node reports
    /// `role:master`, and every other live node replicates it with an up
    /// link. Returns the master's port.
    pub fn check_i5(&self, limit: Duration) -> Result<u16, String> {
        poll(limit, || {
            let Some(m) = self.data_master() else {
                return Err(format!("I5: not exactly one master: {}", self.roles()));
            };
            for n in self
                .nodes
                .iter()
                .filter(|n| n.child.is_some() && n.port != m)
            {
                let up = info_field(n.port, "master_port").and_then(|p| p.parse::<u16>().ok());
                let link = info_field(n.port, "master_link_status");
                if up != Some(m) || link.as_deref() != Some("up") {
                    return Err(format!(
                        "I5: {} does not replicate {m}: {}",
                        n.port,
                        self.roles()
                    ));
                }
            }
            Ok(m)
        })
    }

    /// I6: per run id and data node, hello epochs never decrease.
    pub fn check_i6(&self) -> Result<(), String> {
        let mut last: BTreeMap<(String, u16), (u64, u64, Duration)> = BTreeMap::new();
        let mut errors = Vec::new();
        // A replica that resyncs partially replays its master's backlog,
        // PUBLISHes included: an old hello seen again, byte for byte, is
        // a replay, not a sentinel going back in time.
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for h in self.hellos() {
            if !seen.insert(h.raw.clone()) {
                continue;
            }
            let key = (h.runid.clone(), h.node);
            if let Some((ce, fe, at)) = last.get(&key)
                && (h.current_epoch < *ce || h.config_epoch < *fe)
            {
                errors.push(format!(
                    "{} on {}: epochs ({ce}, {fe}) at {}ms then ({}, {}) at {}ms",
                    &h.runid[..h.runid.len().min(8)],
                    h.node,
                    at.as_millis(),
                    h.current_epoch,
                    h.config_epoch,
                    h.at.as_millis()
                ));
            }
            last.insert(key, (h.current_epoch, h.config_epoch, h.at));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I6 (monotonic epochs) violated: {}",
                errors.join("; ")
            ))
        }
    }

    /// I7 for the sentinels in `among`: within `limit`, each lists exactly
    /// the other sentinels of the deployment (ids and ports, no
    /// duplicates), reports `num-other-sentinels` = N-1 and `CKQUORUM` OK.
    pub fn check_i7_among(&self, among: &[usize], limit: Duration) -> Result<(), String> {
        let n = self.sentinels.len();
        poll(limit, || {
            for &i in among {
                let label = self.sentinels[i].label();
                let peers = self.peers_of(i)?;
                let mut got: Vec<(String, String)> = peers
                    .iter()
                    .map(|p| {
                        (
                            p.get("runid").cloned().unwrap_or_default(),
                            p.get("port").cloned().unwrap_or_default(),
                        )
                    })
                    .collect();
                got.sort();
                let mut want: Vec<(String, String)> = self
                    .sentinels
                    .iter()
                    .filter(|s| s.idx != i)
                    .map(|s| (s.myid.clone(), s.port.to_string()))
                    .collect();
                want.sort();
                if got != want {
                    return Err(format!("I7: {label} lists {got:?}, expected {want:?}"));
                }
                let others = self.master_field(i, "num-other-sentinels");
                if others != Some((n - 1).to_string()) {
                    return Err(format!(
                        "I7: {label} num-other-sentinels {others:?}, expected {}",
                        n - 1
                    ));
                }
                match try_call(self.sentinels[i].port, &["SENTINEL", "CKQUORUM", GROUP]) {
                    Ok(Frame::Simple(s)) if s.starts_with(b"OK") => {}
                    other => return Err(format!("I7: {label} CKQUORUM: {other:?}")),
                }
            }
            Ok(())
        })
    }

    /// [`Deployment::check_i7_among`] over every live sentinel.
    pub fn check_i7(&self, limit: Duration) -> Result<(), String> {
        self.check_i7_among(&self.live(), limit)
    }

    /// I1, I2, I3 and I6 over everything recorded so far, plus observer
    /// trouble (unparsable hellos, lost slow-log entries).
    pub fn check_records(&self) -> Result<(), String> {
        let mut errors: Vec<String> = [
            self.check_i1(),
            self.check_i2(),
            self.check_i3(),
            self.check_i6(),
        ]
        .into_iter()
        .filter_map(Result::err)
        .collect();
        let trouble = self.rec.log().trouble.clone();
        if !trouble.is_empty() {
            errors.push(format!("observers: {}", trouble.join("; ")));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }
}

// ---------------------------------------------------------------------
// I8: a writer whose writes count once `WAIT` confirms them.

/// Writes `pw:<i>` = `<i>` to the master the sentinels advertise, then
/// `WAIT <replicas> 1000`; a write is acknowledged when `WAIT` reports at
/// least `replicas` replicas. Reconnects (asking the next sentinel) when
/// anything fails.
pub struct AckWriter {
    acked: Arc<Mutex<Vec<u64>>>,
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AckWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AckWriter({} acked)", self.acked())
    }
}

impl AckWriter {
    pub fn start(sentinel_ports: Vec<u16>, replicas: u32) -> AckWriter {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (acked, running) = (acked.clone(), running.clone());
            std::thread::spawn(move || {
                let mut conn: Option<Conn> = None;
                let mut ask = 0usize;
                let mut i = 0u64;
                let limit = Duration::from_millis(1500);
                while running.load(Ordering::Relaxed) {
                    if conn.is_none() {
                        let port = sentinel_ports[ask % sentinel_ports.len()];
                        ask += 1;
                        conn = Conn::connect(port, Duration::from_millis(100))
                            .and_then(|mut s| {
                                s.call(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", GROUP], limit)
                                    .ok()
                            })
                            .and_then(|f| match f {
                                Frame::Array(v) if v.len() == 2 => text(&v[1]).parse::<u16>().ok(),
                                _ => None,
                            })
                            .and_then(|p| Conn::connect(p, Duration::from_millis(100)));
                        if conn.is_none() {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                    }
                    let c = conn.as_mut().unwrap();
                    let (key, value) = (format!("pw:{i}"), i.to_string());
                    let ok = matches!(c.call(&["SET", &key, &value], limit), Ok(Frame::Simple(_)))
                        && matches!(
                            c.call(&["WAIT", &replicas.to_string(), "1000"], limit),
                            Ok(Frame::Integer(n)) if n >= i64::from(replicas)
                        );
                    if ok {
                        acked.lock().unwrap_or_else(|e| e.into_inner()).push(i);
                        std::thread::sleep(Duration::from_millis(40));
                    } else {
                        conn = None;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    i += 1;
                }
            })
        };
        AckWriter {
            acked,
            running,
            thread: Some(thread),
        }
    }

    /// How many writes were acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// I8: every write acknowledged so far is readable on `master`.
    pub fn check_i8(&self, master: u16) -> Result<(), String> {
        let acked = self.acked.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut c = Conn::connect(master, Duration::from_secs(2))
            .ok_or(format!("I8: cannot reach {master}"))?;
        let mut lost = Vec::new();
        for chunk in acked.chunks(500) {
            let keys: Vec<String> = chunk.iter().map(|i| format!("pw:{i}")).collect();
            let mut args = vec!["MGET"];
            args.extend(keys.iter().map(String::as_str));
            match c.call(&args, Duration::from_secs(5)) {
                Ok(Frame::Array(v)) if v.len() == chunk.len() => {
                    for (i, f) in chunk.iter().zip(v) {
                        if text(&f) != i.to_string() {
                            lost.push(*i);
                        }
                    }
                }
                other => return Err(format!("I8: MGET on {master}: {other:?}")),
            }
        }
        if lost.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I8: {} of {} acknowledged writes missing on {master}: {:?}",
                lost.len(),
                acked.len(),
                &lost[..lost.len().min(20)]
            ))
        }
    }

    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AckWriter {
    fn drop(&mut self) {
        self.halt();
    }
}
