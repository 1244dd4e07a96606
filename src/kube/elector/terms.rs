//! The elector's terms: what it takes ([`Settings`], [`Timings`], the
//! wall clock and the identity), how it fails ([`Error`]) and what it
//! believes ([`Leadership`]).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The Lease's name in the daemon's namespace.
pub const LEASE_NAME: &str = "valkyrie-leader";

/// Errors of the Kubernetes input's election layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The settings cannot give a safe election.
    #[error("invalid Lease elector settings: {0}")]
    Settings(&'static str),
    /// The API server refused or failed a request.
    #[error("Lease {op} failed: {source}")]
    Api {
        /// The request: get, create, update or release.
        op: &'static str,
        /// The client's error.
        #[source]
        source: Box<::kube::Error>,
    },
    /// The API server did not answer in time.
    #[error("Lease {op} got no answer within {after:?}")]
    Timeout {
        /// The request.
        op: &'static str,
        /// How long we waited.
        after: Duration,
    },
    /// The injected wall clock is outside what a Lease time can hold.
    #[error("the wall clock is outside the range of a Lease time")]
    WallClock,
    /// The operating system's random source failed (for the identity).
    #[error("no random identity: {0}")]
    Random(#[from] getrandom::Error),
    /// The elector's task ended without an answer (it panicked or was
    /// aborted).
    #[error("the Lease elector's task ended abnormally")]
    Task,
}

/// What this process believes about the Lease right now.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Leadership {
    /// Someone else holds the Lease, or nobody does, or we could not renew
    /// it in time. `holder` is the other holder last seen, if any.
    Following {
        /// The other holder last seen.
        holder: Option<String>,
    },
    /// We hold the Lease; `term` is its `leaseTransitions`, which grows with
    /// every change of holder.
    Leading {
        /// The Lease's `leaseTransitions` when we took it.
        term: u64,
    },
}

impl Leadership {
    /// Whether we lead.
    pub fn is_leading(&self) -> bool {
        matches!(self, Leadership::Leading { .. })
    }

    /// The term while we lead.
    pub fn term(&self) -> Option<u64> {
        match self {
            Leadership::Leading { term } => Some(*term),
            Leadership::Following { .. } => None,
        }
    }
}

/// The election's timings. Valkyrie's defaults, 12 s, 8 s and 2 s, keep
/// the ratios of client-go's (15 s, 10 s, 2 s) but bound a takeover after
/// the leader dies without releasing to lease duration + retry period =
/// 14 s, inside the 15 s the reconciler may be leaderless.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timings {
    /// How long a holder keeps the Lease without renewing, as written into
    /// `leaseDurationSeconds` (whole seconds).
    pub lease_duration: Duration,
    /// How long the leader goes on believing it leads without a successful
    /// renew.
    pub renew_deadline: Duration,
    /// The time between attempts, for the leader and the followers alike.
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(12),
            renew_deadline: Duration::from_secs(8),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl Timings {
    pub(super) fn validate(&self) -> Result<i32, Error> {
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration.is_zero() {
            return Err(Error::Settings(
                "lease_duration must be a whole number of seconds",
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::Settings("lease_duration must exceed renew_deadline"));
        }
        if self.renew_deadline <= self.retry_period || self.retry_period.is_zero() {
            return Err(Error::Settings(
                "renew_deadline must exceed retry_period (> 0)",
            ));
        }
        i32::try_from(self.lease_duration.as_secs())
            .map_err(|_| Error::Settings("lease_duration is too long"))
    }
}

/// The wall clock written into `renewTime` and `acquireTime`.
pub type WallClock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The operating system's wall clock.
#[allow(clippy::disallowed_methods)] // the one place it is read: written for humans, never compared
pub fn system_wall_clock() -> WallClock {
    Arc::new(SystemTime::now)
}

/// `<pod name>_<16 random hex characters>`: a restarted process is a new
/// holder, and two processes never share an identity.
pub fn identity(pod_name: &str) -> Result<String, Error> {
    let random = crate::state::myid::random_id()?;
    Ok(format!("{pod_name}_{}", &random[..16]))
}

/// What [`Elector::spawn`](super::Elector::spawn) needs.
#[derive(Clone)]
pub struct Settings {
    /// The Lease's name ([`LEASE_NAME`]); the namespace is the `Api`'s.
    pub lease_name: String,
    /// Our `holderIdentity` ([`identity`]).
    pub identity: String,
    /// Lease duration, renew deadline, retry period.
    pub timings: Timings,
    /// The wall clock for `renewTime` and `acquireTime` only.
    pub wall_clock: WallClock,
}

impl Settings {
    /// Default timings, the system wall clock.
    pub fn new(lease_name: impl Into<String>, identity: impl Into<String>) -> Settings {
        Settings {
            lease_name: lease_name.into(),
            identity: identity.into(),
            timings: Timings::default(),
            wall_clock: system_wall_clock(),
        }
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("lease_name", &self.lease_name)
            .field("identity", &self.identity)
            .field("timings", &self.timings)
            .finish_non_exhaustive()
    }
}
