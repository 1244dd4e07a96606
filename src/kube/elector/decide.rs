//! The Lease elector's decisions, without IO: what to do with the Lease as
//! read, what a write's answer (or its absence) means for our leadership,
//! when to demote ourselves and when to try again.
//!
//! The elector's task does the requests and the timers and feeds their
//! results here; `tests/models/lease/mod.rs` feeds the same methods from a model
//! of several electors, an API server and a lossy network. Time comes in as
//! an argument, on our **monotonic** clock (any [`Moment`]: the task uses
//! `tokio::time::Instant`); nothing here reads a clock.
//!
//! One attempt, as [`Local`] sees it:
//!
//! 1. [`Local::begin`] when [`Local::next_attempt`] has come: the attempt's
//!    start, which bounds it (`start + renew_deadline`) and from which a
//!    successful write counts our leadership.
//! 2. The GET's answer goes to [`Local::on_read`], which returns the
//!    [`Action`]: create the Lease, take it over (a new term), renew it, or
//!    follow (the attempt is over).
//! 3. The write's answer goes to [`Local::on_write`]; a failed or timed
//!    out GET or write to [`Local::fail`].
//!
//! Between attempts, and while a request hangs, [`Local::expire`] demotes
//! us once `renew_deadline` has passed since the start of the attempt of
//! our last successful write. [`Local::release`] is the shutdown path.
//!
//! Expiry of someone else's Lease is judged from when *we* saw its record
//! `(holderIdentity, renewTime, resourceVersion)` last change, never by
//! comparing its `renewTime` with a clock.
//!
//! Why one leader at a time (with clocks that run at the same rate): our
//! leadership counts from the attempt's start, which is no later than the
//! write's send, hence no later than the moment the API server stored it.
//! A challenger sees that record change no earlier than it was stored, and
//! may take it over only `lease_duration` after, with a PUT that the
//! compare-and-swap refuses if we wrote since. As `lease_duration >
//! renew_deadline`, we stop leading ([`Local::leads_at`]) before. Counting
//! from when the answer *came* instead would let a late answer stretch our
//! leadership past a takeover: `tests/models/lease/mod.rs` finds that trace.

use std::ops::Add;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;

use super::terms::{Error, Leadership, Timings};

/// A point on the elector's monotonic clock.
pub trait Moment: Copy + Ord + Add<Duration, Output = Self> {}

impl<T: Copy + Ord + Add<Duration, Output = T>> Moment for T {}

/// The fields of a Lease the election reads, as a GET or a write returned
/// them.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Record {
    /// `spec.holderIdentity` (empty or absent: nobody holds it).
    pub holder: Option<String>,
    /// `spec.renewTime`: only compared for equality, never with a clock.
    pub renew_time: Option<Timestamp>,
    /// `spec.leaseDurationSeconds`, the holder's own duration.
    pub lease_duration_seconds: Option<i32>,
    /// `spec.leaseTransitions`: the term.
    pub lease_transitions: Option<i32>,
    /// `metadata.resourceVersion`, on which a PUT is a compare-and-swap.
    pub resource_version: Option<String>,
}

impl From<&Lease> for Record {
    fn from(lease: &Lease) -> Record {
        let spec = lease.spec.as_ref();
        Record {
            holder: spec.and_then(|s| s.holder_identity.clone()),
            renew_time: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            lease_duration_seconds: spec.and_then(|s| s.lease_duration_seconds),
            lease_transitions: spec.and_then(|s| s.lease_transitions),
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

impl Record {
    /// The term this record gives its holder (`leaseTransitions`, 0 when
    /// absent or negative).
    pub fn term(&self) -> u64 {
        u64::try_from(self.lease_transitions.unwrap_or(0)).unwrap_or(0)
    }

    /// The holder, if there is one (an empty identity is none).
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// What to do with the Lease just read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// It is absent: POST it, held by us ([`Local::identity`],
    /// [`Local::lease_duration_seconds`]) with this `leaseTransitions`.
    Create {
        /// 0, or above the highest term we have seen.
        transitions: i32,
    },
    /// It is free, or someone else's and expired: PUT it on the
    /// `resourceVersion` read, held by us, with this `leaseTransitions`
    /// (one more: a new term) and a new `acquireTime`.
    Take {
        /// The new term.
        transitions: i32,
        /// The holder whose Lease expired, if any.
        from: Option<String>,
    },
    /// It is ours: PUT it on the `resourceVersion` read with a new
    /// `renewTime` (and our identity and duration), the term unchanged.
    Renew,
    /// Someone else holds it and it has not expired: write nothing. The
    /// attempt is over; we follow.
    Follow,
}

/// How a write (POST or PUT) ended, when it got an answer in time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Written {
    /// The API server stored it; the record as it answered.
    Ok(Record),
    /// 409: someone wrote (or made) the Lease since we read it.
    Conflict,
}

/// The record as last seen, and when (on our clock) it last changed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Seen<I> {
    key: (Option<String>, Option<Timestamp>, Option<String>),
    changed_at: I,
}

/// The attempt under way.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Attempt<I> {
    started: I,
    /// Whom we follow should our write be refused.
    other: Option<String>,
}

/// One elector's own state: everything it knows, nothing it does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Local<I> {
    identity: String,
    timings: Timings,
    lease_duration_seconds: i32,
    seen: Option<Seen<I>>,
    /// The highest `leaseTransitions` seen: should the Lease be deleted and
    /// made again, its term still grows.
    highest_term: Option<i32>,
    /// While we lead: until when (the start of the attempt of our last
    /// successful write, plus renew_deadline).
    lead_until: Option<I>,
    leadership: Leadership,
    /// The record as we last wrote it, until someone else's write or a
    /// refusal tells us we no longer hold it (for the release).
    held: Option<Record>,
    next: I,
    attempt: Option<Attempt<I>>,
}

impl<I: Moment> Local<I> {
    /// A fresh elector (no memory of any Lease), the first attempt due at
    /// `now`. Refuses timings that cannot give a safe election.
    pub fn new(identity: impl Into<String>, timings: Timings, now: I) -> Result<Local<I>, Error> {
        let lease_duration_seconds = timings.validate()?;
        let identity = identity.into();
        if identity.is_empty() {
            return Err(Error::Settings("the identity must not be empty"));
        }
        Ok(Local {
            identity,
            timings,
            lease_duration_seconds,
            seen: None,
            highest_term: None,
            lead_until: None,
            leadership: Leadership::Following { holder: None },
            held: None,
            next: now,
            attempt: None,
        })
    }

    /// Our `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The `leaseDurationSeconds` we write.
    pub fn lease_duration_seconds(&self) -> i32 {
        self.lease_duration_seconds
    }

    /// What we believe (and publish) now.
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    /// While we lead, the moment we stop unless a renew succeeds first.
    pub fn lead_until(&self) -> Option<I> {
        self.lead_until
    }

    /// Whether we lead at `now`, whatever [`Local::expire`] was last
    /// called: what a writer checks before each side effect.
    pub fn leads_at(&self, now: I) -> bool {
        self.lead_until.is_some_and(|until| now < until)
    }

    /// When the next attempt is due (once the current one, if any, ends).
    pub fn next_attempt(&self) -> I {
        self.next
    }

    /// The current attempt's deadline, if one is under way.
    pub fn attempt_deadline(&self) -> Option<I> {
        self.attempt
            .as_ref()
            .map(|a| a.started + self.timings.renew_deadline)
    }

    /// The record as we last wrote it, while we may still hold it.
    pub fn held(&self) -> Option<&Record> {
        self.held.as_ref()
    }

    /// Demotes us if `renew_deadline` has passed since the start of the
    /// attempt of our last successful write. Returns whether it did.
    pub fn expire(&mut self, now: I) -> bool {
        if self.lead_until.is_some_and(|until| until <= now) {
            self.lead_until = None;
            self.leadership = Leadership::Following { holder: None };
            return true;
        }
        false
    }

    /// Starts an attempt (its GET is sent now). Returns its deadline: an
    /// answer later than that is a [`Local::fail`].
    pub fn begin(&mut self, now: I) -> I {
        self.attempt = Some(Attempt {
            started: now,
            other: None,
        });
        self.next = now + self.timings.retry_period;
        now + self.timings.renew_deadline
    }

    /// The GET's answer (`None`: 404), at `now`: what to do. After
    /// [`Action::Follow`] the attempt is over.
    pub fn on_read(&mut self, read: Option<&Record>, now: I) -> Action {
        let Some(read) = read else {
            let transitions = self.highest_term.map_or(0, |t| t.saturating_add(1));
            return Action::Create { transitions };
        };
        let changed_at = self.see(read, now);
        let holder = read.holder().map(str::to_owned);
        let ours = holder.as_deref() == Some(self.identity.as_str());
        if let Some(other) = holder.as_ref().filter(|_| !ours) {
            // The holder's own duration, judged from when we saw the
            // record change, on our clock.
            let secs = read
                .lease_duration_seconds
                .filter(|s| *s > 0)
                .unwrap_or(self.lease_duration_seconds);
            let expires = changed_at + Duration::from_secs(u64::from(secs.unsigned_abs()));
            if now < expires {
                self.follow(Some(other.clone()));
                self.next = self.next.min(expires);
                return Action::Follow;
            }
        }
        if let Some(attempt) = &mut self.attempt {
            attempt.other = holder.clone().filter(|_| !ours);
        }
        if ours {
            Action::Renew
        } else {
            Action::Take {
                transitions: read.lease_transitions.unwrap_or(0).saturating_add(1),
                from: holder,
            }
        }
    }

    /// The write's answer, at `now`. The attempt is over. Returns whether
    /// we were demoted because the answer came after our deadline.
    pub fn on_write(&mut self, written: Written, now: I) -> bool {
        let attempt = self.attempt.take();
        match written {
            Written::Ok(record) => {
                self.see(&record, now);
                let started = attempt.map_or(now, |a| a.started);
                self.lead_until = Some(started + self.timings.renew_deadline);
                self.leadership = Leadership::Leading {
                    term: record.term(),
                };
                self.held = Some(record);
            }
            Written::Conflict => self.follow(attempt.and_then(|a| a.other)),
        }
        self.expire(now)
    }

    /// The GET or the write failed, or got no answer by the attempt's
    /// deadline. The attempt is over; nothing is known. Returns whether we
    /// were demoted.
    pub fn fail(&mut self, now: I) -> bool {
        self.attempt = None;
        self.expire(now)
    }

    /// Shutdown: we stop believing we lead at once. Returns the record to
    /// clear (PUT with no holder on its `resourceVersion`) if we may still
    /// hold it.
    pub fn release(&mut self) -> Option<Record> {
        self.attempt = None;
        self.lead_until = None;
        self.leadership = Leadership::Following { holder: None };
        self.held.take()
    }

    fn follow(&mut self, holder: Option<String>) {
        self.attempt = None;
        self.lead_until = None;
        self.held = None;
        self.leadership = Leadership::Following { holder };
    }

    /// Notes the record; returns when (on our clock) it last changed.
    fn see(&mut self, record: &Record, now: I) -> I {
        self.highest_term = self.highest_term.max(record.lease_transitions);
        let key = (
            record.holder.clone(),
            record.renew_time,
            record.resource_version.clone(),
        );
        match &self.seen {
            Some(seen) if seen.key == key => seen.changed_at,
            _ => {
                self.seen = Some(Seen {
                    key,
                    changed_at: now,
                });
                now
            }
        }
    }
}
