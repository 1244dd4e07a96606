//! One election attempt: GET the Lease, then at most one POST (absent) or
//! PUT on the resourceVersion just read (free, expired, or ours), and what
//! the attempt saw, on our monotonic clock.

use std::time::Duration;

use ::kube::api::{Api, PostParams};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::{Error, Settings};

/// The record as last seen, and when (on our clock) it last changed.
#[derive(Debug)]
struct Seen {
    key: (Option<String>, Option<MicroTime>, Option<String>),
    changed_at: Instant,
}

/// What one attempt found.
#[derive(Debug)]
pub(super) enum Outcome {
    /// We created or wrote the Lease.
    Wrote(Box<Lease>),
    /// Someone else holds it; look again at `recheck` at the latest (when it
    /// expires).
    Follow {
        holder: Option<String>,
        recheck: Option<Instant>,
    },
}

/// The API side of the election: the requests and what they saw.
pub(super) struct Client {
    pub(super) api: Api<Lease>,
    pub(super) settings: Settings,
    duration_secs: i32,
    seen: Option<Seen>,
    /// The highest `leaseTransitions` seen: should the Lease be deleted and
    /// made again, its term still grows.
    highest_term: Option<i32>,
}

impl Client {
    pub(super) fn new(api: Api<Lease>, settings: Settings, duration_secs: i32) -> Client {
        Client {
            api,
            settings,
            duration_secs,
            seen: None,
            highest_term: None,
        }
    }

    /// One GET, then at most one POST or PUT.
    pub(super) async fn attempt(&mut self) -> Result<Outcome, Error> {
        let wall = self.wall()?;
        let identity = self.settings.identity.clone();
        let name = self.settings.lease_name.clone();
        let current = self.api.get_opt(&name).await.map_err(api("get"))?;
        let Some(current) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(identity),
                    lease_duration_seconds: Some(self.duration_secs),
                    acquire_time: Some(wall.clone()),
                    renew_time: Some(wall),
                    lease_transitions: Some(self.highest_term.map_or(0, |t| t.saturating_add(1))),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.see(&created, Instant::now());
                    Ok(Outcome::Wrote(Box::new(created)))
                }
                Err(e) if is_conflict(&e) => Ok(Outcome::Follow {
                    holder: None,
                    recheck: None,
                }),
                Err(e) => Err(api("create")(e)),
            };
        };
        let now = Instant::now();
        let changed_at = self.see(&current, now);
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(identity.as_str());
        if let Some(other) = holder.as_ref().filter(|_| !ours) {
            // The holder's own duration, judged from when we saw the record
            // change, on our clock.
            let secs = spec
                .lease_duration_seconds
                .filter(|s| *s > 0)
                .unwrap_or(self.duration_secs);
            let expires = changed_at + Duration::from_secs(u64::from(secs.unsigned_abs()));
            if now < expires {
                return Ok(Outcome::Follow {
                    holder: Some(other.clone()),
                    recheck: Some(expires),
                });
            }
            tracing::info!(holder = %other, "Lease expired: taking it over");
        }
        let mut next = current;
        let mut new_spec = spec.clone();
        new_spec.holder_identity = Some(identity);
        new_spec.lease_duration_seconds = Some(self.duration_secs);
        new_spec.renew_time = Some(wall.clone());
        if !ours {
            new_spec.acquire_time = Some(wall);
            new_spec.lease_transitions =
                Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        next.spec = Some(new_spec);
        match self.api.replace(&name, &PostParams::default(), &next).await {
            Ok(written) => {
                self.see(&written, Instant::now());
                Ok(Outcome::Wrote(Box::new(written)))
            }
            Err(e) if is_conflict(&e) => Ok(Outcome::Follow {
                holder: holder.filter(|_| !ours),
                recheck: None,
            }),
            Err(e) => Err(api("update")(e)),
        }
    }

    /// Notes the record; returns when (on our clock) it last changed.
    fn see(&mut self, lease: &Lease, now: Instant) -> Instant {
        let spec = lease.spec.as_ref();
        let transitions = spec.and_then(|s| s.lease_transitions);
        self.highest_term = self.highest_term.max(transitions);
        let key = (
            spec.and_then(|s| s.holder_identity.clone()),
            spec.and_then(|s| s.renew_time.clone()),
            lease.metadata.resource_version.clone(),
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

    pub(super) fn wall(&self) -> Result<MicroTime, Error> {
        Timestamp::try_from((self.settings.wall_clock)())
            .map(MicroTime)
            .map_err(|_| Error::WallClock)
    }
}

pub(super) fn term_of(lease: &Lease) -> u64 {
    let transitions = lease.spec.as_ref().and_then(|s| s.lease_transitions);
    u64::try_from(transitions.unwrap_or(0)).unwrap_or(0)
}

pub(super) fn is_conflict(e: &::kube::Error) -> bool {
    matches!(e, ::kube::Error::Api(s) if s.code == 409 || s.is_conflict() || s.is_already_exists())
}

pub(super) fn api(op: &'static str) -> impl Fn(::kube::Error) -> Error {
    move |source| Error::Api {
        op,
        source: Box::new(source),
    }
}
