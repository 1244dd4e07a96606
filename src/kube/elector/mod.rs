//! The Lease elector: which Valkyrie process is the **reconciler**, the single
//! writer of child objects and `ValkeyCluster` status.
//!
//! It elects nothing else. Failover decisions come from peering, as in
//! every deployment; the Lease only keeps two Valkyrie replicas from
//! applying the same children or racing on a CR's status. Its
//! `leaseTransitions` is the **term** reported with [`Leadership::Leading`],
//! for fencing later writes.
//!
//! # The algorithm
//!
//! This is client-go's leader election, deliberately, and not the SSA-based
//! locks of the Rust crates (see `kubernetes-design.md` §B.10–B.11):
//!
//! * Every `retry_period`: GET the Lease (`coordination.k8s.io/v1`); create it
//!   if absent (a 409 means someone else just did: follow).
//! * **Expiry is judged on our monotonic clock**: we remember when *we* last
//!   saw the record `(holderIdentity, renewTime, resourceVersion)` change,
//!   and the holder has lost the Lease once it has not changed for the
//!   record's `leaseDurationSeconds` since then. The holder's `renewTime` is
//!   never compared with our wall clock, so clock skew between nodes cannot
//!   make a live Lease look expired.
//! * A free (no holder) or expired Lease, or our own, is written with PUT on
//!   the `resourceVersion` just read: a compare-and-swap, so of two
//!   challengers exactly one wins and the other gets 409 and follows.
//!   `leaseTransitions` grows by one whenever the holder changes.
//! * **Self-demotion.** Each successful write makes us leader until the
//!   moment the write was *sent* plus `renew_deadline`. A timer races every
//!   request: if no renew succeeds by then we publish that we follow, even
//!   while a request hangs in a partition. Because `lease_duration >
//!   renew_deadline`, and a challenger's clock starts no earlier than the
//!   API server stored our renew, the old leader stops believing it leads
//!   before anyone else may take over.
//! * **Release** (the SIGTERM path): we first publish that we follow, then
//!   PUT the Lease with no holder and `leaseDurationSeconds: 1`, so a standby
//!   takes over at its next attempt (about one `retry_period`) instead of
//!   after `lease_duration`.
//! * Each attempt (a GET, then at most one write) is bounded by
//!   `renew_deadline`. There is no jitter: a tie between challengers is
//!   settled by the compare-and-swap, not by luck.
//! * The term never goes back in one process: should the Lease be deleted,
//!   it is made again with `leaseTransitions` above the highest seen.
//! * Dropping the [`Elector`] stops it without a word, as a SIGKILL would.
//!
//! Every decision is made in [`decide`], which does no IO and reads no
//! clock: the task here only sends the requests, runs the timers and feeds
//! [`decide::Local`] their results, and `tests/models/lease/mod.rs` model-checks
//! that same code. The timers are `tokio::time` ones, so tests drive the
//! elector under paused time; the wall clock (only written into
//! `renewTime` and `acquireTime`, for humans) is injected.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ::kube::api::Api;
use k8s_openapi::api::coordination::v1::Lease;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout_at};

mod attempt;
pub mod decide;
mod terms;
use attempt::Client;
use decide::{Action, Local, Record, Written};
pub use terms::{
    Error, LEASE_NAME, Leadership, Settings, Timings, WallClock, identity, system_wall_clock,
};
#[cfg(test)]
mod tests;

/// How [`Elector::release`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// We held the Lease and cleared it: a standby takes it at once.
    Released,
    /// We did not hold it (or someone wrote it since our last write).
    NotHolder,
}

/// A running elector. Dropping it stops the election at once without
/// releasing the Lease (as a SIGKILL would: the others wait for expiry);
/// [`Elector::release`] is the graceful way out.
#[derive(Debug)]
pub struct Elector {
    identity: String,
    out: Arc<Publisher>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<Released, Error>>>,
}

impl Elector {
    /// Starts electing on the current tokio runtime.
    pub fn spawn(api: Api<Lease>, settings: Settings) -> Result<Elector, Error> {
        let local = Local::new(settings.identity.clone(), settings.timings, Instant::now())?;
        let (tx, _) = watch::channel(Leadership::Following { holder: None });
        let out = Arc::new(Publisher {
            tx,
            stopped: AtomicBool::new(false),
            until: LeadDeadline::default(),
        });
        let (stop_tx, stop_rx) = oneshot::channel();
        let identity = settings.identity.clone();
        let task = Task {
            client: Client::new(api, settings),
            local,
            written: None,
            out: out.clone(),
        };
        Ok(Elector {
            identity,
            out,
            stop: Some(stop_tx),
            task: Some(tokio::spawn(task.run(stop_rx))),
        })
    }

    /// Our leadership as it changes. A stopped elector shows `Following`.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.out.tx.subscribe()
    }

    /// Until when we lead: checked by writers right before each write.
    pub fn deadline(&self) -> LeadDeadline {
        self.out.until.clone()
    }

    /// Our `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Stops electing: we stop believing we lead, then hand the Lease over
    /// (no holder, `leaseDurationSeconds: 1`) if we held it. The PUT is
    /// bounded by `renew_deadline`.
    pub async fn release(mut self) -> Result<Released, Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(|_| Error::Task)?,
            None => Err(Error::Task),
        }
    }
}

impl Drop for Elector {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.out.stopped.store(true, Ordering::SeqCst);
        self.out.until.set(None);
        self.out
            .tx
            .send_replace(Leadership::Following { holder: None });
    }
}

/// The leadership channel; once the elector is dropped nothing the task
/// still sends gets through.
#[derive(Debug)]
struct Publisher {
    tx: watch::Sender<Leadership>,
    stopped: AtomicBool,
    /// Until when we lead, as the last attempt decided ([`LeadDeadline`]).
    until: LeadDeadline,
}

/// Until when this elector leads, on the monotonic clock: what a writer
/// checks right before each write. The leadership channel alone is not
/// enough: a process paused past its deadline (a stalled node, a long GC
/// of the host) still reads `Leading` until its demotion timer has run,
/// while another elector may already hold the Lease; the model of the
/// election (`tests/models/lease/mod.rs`) shows that interleaving.
#[derive(Clone, Debug, Default)]
pub struct LeadDeadline(Arc<std::sync::Mutex<Option<Instant>>>);

impl LeadDeadline {
    /// Whether we lead now.
    pub fn leads_now(&self) -> bool {
        let until = *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        until.is_some_and(|u| Instant::now() < u)
    }

    fn set(&self, until: Option<Instant>) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = until;
    }
}

impl Publisher {
    fn publish(&self, value: Leadership) {
        self.tx.send_if_modified(|current| {
            if self.stopped.load(Ordering::SeqCst) || *current == value {
                return false;
            }
            tracing::info!(from = ?current, to = ?value, "Lease leadership changed");
            *current = value;
            true
        });
    }
}

/// The elector's IO: the requests, the timers and the stop signal. Every
/// decision is [`Local`]'s.
struct Task {
    client: Client,
    local: Local<Instant>,
    /// The Lease as we last wrote it (the object the release PUTs back).
    written: Option<Lease>,
    out: Arc<Publisher>,
}

/// Why an attempt ended early: [`Elector::release`] asked us to stop
/// (`Ok`), or the elector was dropped (`Err`).
type Stop = Result<(), oneshot::error::RecvError>;

impl Task {
    async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Result<Released, Error> {
        loop {
            // Wait for the next attempt; demote on time meanwhile.
            loop {
                let until = self.local.lead_until();
                let next = self.local.next_attempt();
                tokio::select! {
                    biased;
                    r = &mut stop => return self.stopped(r).await,
                    _ = sleep_until(until.unwrap_or(next)), if until.is_some() => {
                        let demoted = self.local.expire(Instant::now());
                        self.publish(demoted);
                    }
                    _ = sleep_until(next) => break,
                }
            }
            if let Err(r) = self.attempt(&mut stop).await {
                return self.stopped(r).await;
            }
        }
    }

    /// One attempt: a GET, then at most one write, each request raced
    /// against the attempt's deadline, our own demotion and `stop`.
    async fn attempt(&mut self, stop: &mut oneshot::Receiver<()>) -> Result<(), Stop> {
        let deadline = self.local.begin(Instant::now());
        let wall = match self.client.wall() {
            Ok(wall) => wall,
            Err(e) => return self.failed(Some(e)),
        };
        let get = self.client.get();
        let read = match race(&mut self.local, &self.out, deadline, stop, get).await? {
            Some(Ok(read)) => read,
            Some(Err(e)) => return self.failed(Some(e)),
            None => return self.failed(None),
        };
        let record = read.as_ref().map(Record::from);
        let action = self.local.on_read(record.as_ref(), Instant::now());
        let identity = self.local.identity().to_owned();
        let secs = self.local.lease_duration_seconds();
        let client = &self.client;
        let written = match (action, read) {
            (Action::Follow, _) => {
                self.publish(false);
                return Ok(());
            }
            (Action::Create { transitions }, _) => {
                let create = client.create(&identity, secs, transitions, wall);
                race(&mut self.local, &self.out, deadline, stop, create).await?
            }
            (Action::Take { transitions, from }, Some(read)) => {
                if let Some(from) = from {
                    tracing::info!(holder = %from, "Lease expired: taking it over");
                }
                let take = client.replace(read, &identity, secs, Some(transitions), wall);
                race(&mut self.local, &self.out, deadline, stop, take).await?
            }
            (Action::Renew, Some(read)) => {
                let renew = client.replace(read, &identity, secs, None, wall);
                race(&mut self.local, &self.out, deadline, stop, renew).await?
            }
            // Not reached: an absent Lease is only ever created.
            (Action::Take { .. } | Action::Renew, None) => None,
        };
        let now = Instant::now();
        let demoted = match written {
            Some(Ok(Some(lease))) => {
                let demoted = self.local.on_write(Written::Ok(Record::from(&lease)), now);
                self.written = Some(lease);
                demoted
            }
            Some(Ok(None)) => self.local.on_write(Written::Conflict, now),
            Some(Err(e)) => return self.failed(Some(e)),
            None => return self.failed(None),
        };
        self.publish(demoted);
        Ok(())
    }

    /// The attempt failed (`None`: it timed out).
    fn failed(&mut self, error: Option<Error>) -> Result<(), Stop> {
        let e = error.unwrap_or(Error::Timeout {
            op: "attempt",
            after: self.client.settings.timings.renew_deadline,
        });
        tracing::warn!(error = %e, "Lease attempt failed");
        let demoted = self.local.fail(Instant::now());
        self.publish(demoted);
        Ok(())
    }

    fn publish(&self, demoted: bool) {
        publish(&self.local, &self.out, demoted);
    }

    /// `release()` asked us to stop (`Ok`), or the elector was dropped
    /// (`Err`): then nothing more is sent, as after a SIGKILL.
    async fn stopped(self, r: Stop) -> Result<Released, Error> {
        match r {
            Ok(()) => self.release().await,
            Err(_) => Ok(Released::NotHolder),
        }
    }

    /// Stops leading, then clears the Lease if we hold it.
    async fn release(mut self) -> Result<Released, Error> {
        let held = self.local.release();
        self.publish(false);
        let (Some(_), Some(lease)) = (held, self.written.take()) else {
            return Ok(Released::NotHolder);
        };
        let deadline = self.client.settings.timings.renew_deadline;
        match timeout_at(Instant::now() + deadline, self.client.release(lease)).await {
            Ok(Ok(Some(_))) => {
                tracing::info!("Lease released");
                Ok(Released::Released)
            }
            Ok(Ok(None)) => Ok(Released::NotHolder),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Timeout {
                op: "release",
                after: deadline,
            }),
        }
    }
}

/// Runs `io` until the attempt's `deadline` (`None` after it) while
/// demoting us on time, even while a request hangs in a partition.
async fn race<T>(
    local: &mut Local<Instant>,
    out: &Publisher,
    deadline: Instant,
    stop: &mut oneshot::Receiver<()>,
    io: impl Future<Output = T>,
) -> Result<Option<T>, Stop> {
    let io = timeout_at(deadline, io);
    tokio::pin!(io);
    loop {
        let until = local.lead_until();
        tokio::select! {
            biased;
            r = &mut *stop => return Err(r),
            _ = sleep_until(until.unwrap_or(deadline)), if until.is_some() => {
                let demoted = local.expire(Instant::now());
                publish(local, out, demoted);
            }
            r = &mut io => return Ok(r.ok()),
        }
    }
}

/// Publishes what `local` believes; `demoted`: because the renew deadline
/// passed.
fn publish(local: &Local<Instant>, out: &Publisher, demoted: bool) {
    let leading = matches!(local.leadership(), Leadership::Leading { .. });
    out.until.set(local.lead_until().filter(|_| leading));
    if demoted {
        tracing::warn!("Lease not renewed within renew_deadline: no longer leading");
    }
    out.publish(local.leadership().clone());
}
