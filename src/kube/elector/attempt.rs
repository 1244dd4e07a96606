//! The requests of an election attempt: GET the Lease, POST it (absent),
//! PUT it on the `resourceVersion` just read (free, expired, or ours), and
//! the release's PUT. What to send, and what an answer means, is decided
//! in `decide`; this only builds the objects and talks to the API server.

use ::kube::api::{Api, PostParams};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;

use super::terms::{Error, Settings};

/// The API side of the election.
pub(super) struct Client {
    pub(super) api: Api<Lease>,
    pub(super) settings: Settings,
}

impl Client {
    pub(super) fn new(api: Api<Lease>, settings: Settings) -> Client {
        Client { api, settings }
    }

    /// The Lease, or `None` when it is absent.
    pub(super) async fn get(&self) -> Result<Option<Lease>, Error> {
        let name = &self.settings.lease_name;
        self.api.get_opt(name).await.map_err(api("get"))
    }

    /// POSTs the Lease held by `holder`; `None` when someone else just made
    /// it (409).
    pub(super) async fn create(
        &self,
        holder: &str,
        duration_secs: i32,
        transitions: i32,
        wall: MicroTime,
    ) -> Result<Option<Lease>, Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.settings.lease_name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.to_owned()),
                lease_duration_seconds: Some(duration_secs),
                acquire_time: Some(wall.clone()),
                renew_time: Some(wall),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => Ok(Some(created)),
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(api("create")(e)),
        }
    }

    /// PUTs `read` back, on its `resourceVersion`, held by `holder`: a
    /// renew, or with `take` (the new term) a takeover. `None` on 409.
    pub(super) async fn replace(
        &self,
        read: Lease,
        holder: &str,
        duration_secs: i32,
        take: Option<i32>,
        wall: MicroTime,
    ) -> Result<Option<Lease>, Error> {
        let mut next = read;
        let mut spec = next.spec.take().unwrap_or_default();
        spec.holder_identity = Some(holder.to_owned());
        spec.lease_duration_seconds = Some(duration_secs);
        spec.renew_time = Some(wall.clone());
        if let Some(transitions) = take {
            spec.acquire_time = Some(wall);
            spec.lease_transitions = Some(transitions);
        }
        next.spec = Some(spec);
        let name = &self.settings.lease_name;
        match self.api.replace(name, &PostParams::default(), &next).await {
            Ok(written) => Ok(Some(written)),
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(api("update")(e)),
        }
    }

    /// PUTs `lease` (as we last wrote it) with no holder and
    /// `leaseDurationSeconds: 1`; `None` on 409 (someone wrote since).
    pub(super) async fn release(&self, mut lease: Lease) -> Result<Option<Lease>, Error> {
        let wall = self.wall()?;
        let mut spec = lease.spec.take().unwrap_or_default();
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(wall.clone());
        spec.renew_time = Some(wall);
        lease.spec = Some(spec);
        let name = &self.settings.lease_name;
        match self.api.replace(name, &PostParams::default(), &lease).await {
            Ok(written) => Ok(Some(written)),
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(api("release")(e)),
        }
    }

    pub(super) fn wall(&self) -> Result<MicroTime, Error> {
        Timestamp::try_from((self.settings.wall_clock)())
            .map(MicroTime)
            .map_err(|_| Error::WallClock)
    }
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
