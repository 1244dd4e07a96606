//! The world of `tests/models/lease/mod.rs`: electors, the API server's
//! Lease store, messages, faults, and the model over them.

use k8s_openapi::jiff::Timestamp;
use std::fmt::Write as _;
use std::time::Duration;
use valkyrie::kube::elector::Timings;
use valkyrie::kube::elector::decide::{Action, Local, Record, Written};

/// A moment on the (global) monotonic clock, in whole seconds.
pub fn at(secs: u32) -> Duration {
    Duration::from_secs(u64::from(secs))
}

/// The wall clock written into `renewTime` (never compared).
pub fn wall(secs: u32) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + i64::from(secs)).unwrap()
}

pub fn secs(d: Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap()
}

/// The elector's default timings divided by `by`.
pub fn timings(by: u32) -> Timings {
    let d = Timings::default();
    Timings {
        lease_duration: d.lease_duration / by,
        renew_deadline: d.renew_deadline / by,
        retry_period: d.retry_period / by,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Body {
    Get,
    Create(Record),
    /// A PUT on the version `on`.
    Put {
        on: Option<String>,
        record: Record,
    },
    Read(Option<Record>),
    Wrote(Record),
    Conflict,
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Msg {
    /// Deliverable from this second on.
    pub at: u32,
    pub to_store: bool,
    pub elector: usize,
    pub incarnation: u8,
    /// The attempt it belongs to.
    pub seq: u8,
    pub body: Body,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Run {
    Up,
    /// Paused: takes no step.
    Stalled,
    Down,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Idle,
    Reading,
    Writing,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Elector {
    pub incarnation: u8,
    pub run: Run,
    /// Cut off from the API server.
    pub cut: bool,
    pub local: Option<Local<Duration>>,
    pub seq: u8,
    pub phase: Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    TwoLeaders,
    Stale,
    Term,
    Published,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sys {
    pub now: u32,
    /// The Lease as the API server stores it.
    pub lease: Option<Record>,
    pub version: u32,
    pub electors: Vec<Elector>,
    /// In flight, sorted.
    pub net: Vec<Msg>,
    pub faults: u8,
    /// The highest term led, and by whom.
    pub top: Option<(u64, String)>,
    pub violation: Option<(Kind, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Act {
    Tick,
    /// The API server serves request `k`; its answer is taken at once (or
    /// waits for a stalled elector).
    Serve(usize),
    /// Served; the answer arrives this many seconds later (a fault).
    ServeAnswerLate(usize, u32),
    /// Served; the answer is lost (a fault).
    ServeAnswerLost(usize),
    /// An answer that arrived late, or waited for a stalled elector, is
    /// taken.
    Take(usize),
    /// Request `k` is lost (a fault).
    Lose(usize),
    /// Request `k` reaches the API server this many seconds later (a
    /// fault).
    Delay(usize, u32),
    /// Request `k` fails at once: a 5xx, a refused connection (a fault).
    Refuse(usize),
    Stall(usize),
    Resume(usize),
    Crash(usize),
    Release(usize),
    Restart(usize),
    Cut(usize),
    Heal(usize),
}

/// The kinds of fault a run may inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults {
    /// Delays, losses and refusals of messages; an elector cut off.
    pub network: bool,
    /// Stalls, crashes, graceful stops.
    pub process: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    /// The API server: PUT is a compare-and-swap on `resourceVersion`.
    CompareAndSwap,
    /// Broken on purpose: a PUT on a stale version is applied.
    LastWriteWins,
}

pub struct Env {
    pub electors: usize,
    pub timings: Timings,
    pub faults: Faults,
    pub max_faults: u8,
    pub horizon: u32,
    pub store: Store,
    /// Liveness: faults only before this second; from it on every elector
    /// runs and reaches the API server.
    pub fair_from: Option<u32>,
    /// Also require at most one *published* leader among live electors
    /// (expected to fail with stalls).
    pub published_check: bool,
}

pub fn identity(elector: usize, incarnation: u8) -> String {
    format!("e{elector}.{incarnation}")
}

impl Sys {
    pub fn local(&mut self, i: usize) -> &mut Local<Duration> {
        self.electors[i].local.as_mut().unwrap()
    }

    pub fn send(&mut self, i: usize, body: Body) {
        let e = &self.electors[i];
        if e.cut {
            return;
        }
        let msg = Msg {
            at: self.now,
            to_store: true,
            elector: i,
            incarnation: e.incarnation,
            seq: e.seq,
            body,
        };
        self.net.push(msg);
    }

    /// What the elector's task does at a moment: the demotion timer, the
    /// attempt's deadline, the next attempt.
    pub fn poll(&mut self, i: usize) {
        let now = at(self.now);
        if self.electors[i].run != Run::Up {
            return;
        }
        self.local(i).expire(now);
        let deadline = self.local(i).attempt_deadline();
        if self.electors[i].phase != Phase::Idle && deadline.is_some_and(|d| d <= now) {
            self.local(i).fail(now);
            self.electors[i].phase = Phase::Idle;
        }
        if self.electors[i].phase == Phase::Idle && self.local(i).next_attempt() <= now {
            self.local(i).begin(now);
            self.electors[i].seq = self.fresh_seq(i);
            self.electors[i].phase = Phase::Reading;
            self.send(i, Body::Get);
        }
    }

    /// The API server serves a request.
    pub fn serve(&mut self, m: &Msg, store: Store) -> Body {
        let stored = |s: &mut Sys, mut record: Record| {
            s.version += 1;
            record.resource_version = Some(s.version.to_string());
            let before = s.lease.as_ref().and_then(|l| l.lease_transitions);
            if record.lease_transitions < before {
                s.violation = Some((Kind::Term, "leaseTransitions went back".into()));
            }
            s.lease = Some(record.clone());
            Body::Wrote(record)
        };
        match &m.body {
            Body::Get => Body::Read(self.lease.clone()),
            Body::Create(record) => {
                if self.lease.is_some() {
                    Body::Conflict
                } else {
                    stored(self, record.clone())
                }
            }
            Body::Put { on, record } => match &self.lease {
                None => Body::Failed,
                Some(l) if store == Store::CompareAndSwap && l.resource_version != *on => {
                    Body::Conflict
                }
                Some(_) => stored(self, record.clone()),
            },
            _ => unreachable!(),
        }
    }

    /// Serves request `k`; its answer arrives `late` seconds later, or now.
    pub fn serve_and_answer(&mut self, k: usize, store: Store, late: Option<u32>) {
        let m = self.net.remove(k);
        let body = self.serve(&m, store);
        self.answer(m, body, late);
    }

    /// The answer to request `m`: taken at once if its elector runs and it
    /// is not late, else put in flight.
    pub fn answer(&mut self, m: Msg, body: Body, late: Option<u32>) {
        let answer = Msg {
            at: self.now + late.unwrap_or(0),
            to_store: false,
            body,
            ..m
        };
        if !self.awaited(&answer) {
            return;
        }
        if late.is_none() && self.electors[m.elector].run == Run::Up {
            self.take(answer.elector, answer.body);
        } else {
            self.net.push(answer);
        }
    }

    /// Whether elector `m.elector` still waits for this answer.
    pub fn awaited(&self, m: &Msg) -> bool {
        let e = &self.electors[m.elector];
        let phase = match m.body {
            Body::Read(_) => e.phase == Phase::Reading,
            Body::Failed => e.phase != Phase::Idle,
            _ => e.phase == Phase::Writing,
        };
        e.run != Run::Down && !e.cut && e.incarnation == m.incarnation && e.seq == m.seq && phase
    }

    /// Elector `i` takes an answer.
    pub fn take(&mut self, i: usize, body: Body) {
        let now = at(self.now);
        match body {
            Body::Read(read) => {
                let action = self.local(i).on_read(read.as_ref(), now);
                let me = self.local(i).identity().to_owned();
                let secs = self.local(i).lease_duration_seconds();
                let mine = |mut r: Record| {
                    r.holder = Some(me.clone());
                    r.lease_duration_seconds = Some(secs);
                    r.renew_time = Some(wall(self.now));
                    r
                };
                let body = match (action, read) {
                    (Action::Follow, _) => {
                        self.electors[i].phase = Phase::Idle;
                        return;
                    }
                    (Action::Create { transitions }, _) => Body::Create(mine(Record {
                        lease_transitions: Some(transitions),
                        ..Record::default()
                    })),
                    (Action::Take { transitions, .. }, Some(read)) => {
                        let on = read.resource_version.clone();
                        let mut record = mine(read);
                        record.lease_transitions = Some(transitions);
                        Body::Put { on, record }
                    }
                    (Action::Renew, Some(read)) => {
                        let on = read.resource_version.clone();
                        Body::Put {
                            on,
                            record: mine(read),
                        }
                    }
                    (_, None) => unreachable!("an absent Lease is created"),
                };
                self.electors[i].phase = Phase::Writing;
                self.send(i, body);
            }
            Body::Wrote(record) => {
                self.electors[i].phase = Phase::Idle;
                self.local(i).on_write(Written::Ok(record), now);
            }
            Body::Conflict => {
                self.electors[i].phase = Phase::Idle;
                self.local(i).on_write(Written::Conflict, now);
            }
            Body::Failed => {
                self.electors[i].phase = Phase::Idle;
                self.local(i).fail(now);
            }
            _ => unreachable!(),
        }
        self.poll(i);
    }

    pub fn restart(&mut self, i: usize, timings: Timings) {
        let e = &mut self.electors[i];
        e.incarnation += 1;
        e.run = Run::Up;
        e.cut = false;
        e.phase = Phase::Idle;
        e.seq = 0;
        e.local = Some(Local::new(identity(i, e.incarnation), timings, at(self.now)).unwrap());
        self.poll(i);
    }

    /// A tag for elector `i`'s next attempt that none of its messages in
    /// flight carries (the smallest: one state for one situation).
    pub fn fresh_seq(&self, i: usize) -> u8 {
        let inc = self.electors[i].incarnation;
        let used = |q: u8| {
            self.net
                .iter()
                .any(|m| m.elector == i && m.incarnation == inc && m.seq == q)
        };
        (0..=u8::MAX).find(|q| !used(*q)).unwrap()
    }

    /// Drops answers nobody waits for, sorts the rest, forgets the tags of
    /// idle electors: one state for one situation.
    pub fn settle(&mut self) {
        for e in &mut self.electors {
            if e.phase == Phase::Idle {
                e.seq = 0;
            }
        }
        let net = std::mem::take(&mut self.net);
        self.net = net
            .into_iter()
            .filter(|m| m.to_store || self.awaited(m))
            .collect();
        self.net.sort();
    }

    pub fn live(&self) -> impl Iterator<Item = (usize, &Local<Duration>)> {
        self.electors
            .iter()
            .enumerate()
            .filter(|(_, e)| e.run != Run::Down)
            .filter_map(|(i, e)| e.local.as_ref().map(|l| (i, l)))
    }

    pub fn check(&mut self, published_check: bool) {
        if self.violation.is_some() {
            return;
        }
        let now = at(self.now);
        let leaders: Vec<String> = self
            .live()
            .filter(|(_, l)| l.leads_at(now))
            .map(|(_, l)| l.identity().to_owned())
            .collect();
        if leaders.len() > 1 {
            self.violation = Some((Kind::TwoLeaders, format!("{leaders:?} lead at once")));
            return;
        }
        let stale: Vec<&str> = self
            .live()
            .filter(|(i, _)| self.electors[*i].run == Run::Up)
            .filter(|(_, l)| l.leadership().is_leading() && !l.leads_at(now))
            .map(|(_, l)| l.identity())
            .collect();
        if let Some(who) = stale.first() {
            let v = format!("{who} publishes a leadership past its deadline");
            self.violation = Some((Kind::Stale, v));
            return;
        }
        if published_check {
            let published: Vec<&str> = self
                .live()
                .filter(|(_, l)| l.leadership().is_leading())
                .map(|(_, l)| l.identity())
                .collect();
            if published.len() > 1 {
                let v = format!("{published:?} both publish Leading");
                self.violation = Some((Kind::Published, v));
                return;
            }
        }
        let leading: Vec<(u64, String)> = self
            .live()
            .filter(|(_, l)| l.leads_at(now))
            .filter_map(|(_, l)| Some((l.leadership().term()?, l.identity().to_owned())))
            .collect();
        for (term, who) in leading {
            match &self.top {
                Some((t, _)) if term < *t => {
                    let v = format!("{who} leads term {term} after term {t}");
                    self.violation = Some((Kind::Term, v));
                }
                Some((t, other)) if term == *t && *other != who => {
                    let v = format!("{who} and {other} both led term {term}");
                    self.violation = Some((Kind::Term, v));
                }
                Some((t, _)) if term == *t => {}
                _ => self.top = Some((term, who)),
            }
        }
    }

    /// Whether message `m` must be handled before time passes.
    pub fn due(&self, m: &Msg) -> bool {
        m.at <= self.now && (m.to_store || self.electors[m.elector].run == Run::Up)
    }

    /// A quiet moment: everything due this second has happened.
    pub fn quiet(&self) -> bool {
        !self.net.iter().any(|m| self.due(m))
    }

    /// An elector stopped leading by its deadline while the stored Lease
    /// still names it (no refusal told it).
    pub fn demoted_holder(&self) -> bool {
        let now = at(self.now);
        let holder = self.lease.as_ref().and_then(Record::holder);
        self.live()
            .any(|(_, l)| holder == Some(l.identity()) && l.held().is_some() && !l.leads_at(now))
    }

    pub fn violated(&self, kind: Kind) -> bool {
        matches!(&self.violation, Some((k, _)) if *k == kind)
    }

    pub fn someone_leads(&self) -> bool {
        let now = at(self.now);
        self.live().any(|(_, l)| l.leads_at(now))
    }

    pub fn summary(&self) -> String {
        let mut out = format!("t={}", self.now);
        match &self.lease {
            Some(l) => {
                let _ = write!(
                    out,
                    " lease[{} v{} term {}]",
                    l.holder.as_deref().unwrap_or("-"),
                    l.resource_version.as_deref().unwrap_or("?"),
                    l.lease_transitions.unwrap_or(0)
                );
            }
            None => out.push_str(" lease[absent]"),
        }
        for (i, e) in self.electors.iter().enumerate() {
            let _ = write!(out, " | e{i}.{} {:?}", e.incarnation, e.run);
            if e.cut {
                out.push_str(" cut");
            }
            if let Some(l) = &e.local {
                let until = l.lead_until().map(secs);
                let _ = write!(out, " {:?} until {until:?} {:?}", l.leadership(), e.phase);
            }
        }
        let _ = write!(out, " | net {}", self.net.len());
        out
    }
}
