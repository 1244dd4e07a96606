//! What the rest of the daemon holds of the runtime: the [`Handle`]
//! (the topology, the events, the typed requests the ports make), its
//! [`Health`] and why it stops ([`RuntimeError`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::requests::{ManagedRequest, OperatorRequest, PeerRequest, Refusal, Request, SetChange};
use super::role_hook::RoleHook;
use super::spec::millis;
use crate::config::GroupConfig;
use crate::core::{Addr, DownAnswer, Millis, Timers};
use crate::state::{RuntimeConfig, StateError};
use crate::topology::Topology;

/// What `/healthz` reports besides "the runtime runs".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Health {
    /// The last state-file write failed with this error, and no write has
    /// succeeded since: some decisions are not acted on.
    pub state_error: Option<String>,
}

/// Errors that stop the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The state file could not be read or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// The operating system's random source failed (a fresh daemon id).
    #[error("no random source for a new daemon id: {0}")]
    Random(String),
    /// A blocking task (the state file's write) could not run.
    #[error("state file write task failed: {0}")]
    Task(String),
    /// `dir` could not be made absolute for the scripts' runner.
    #[error("scripts: {0}")]
    Scripts(std::io::Error),
}

/// Handles to a running runtime.
#[derive(Debug, Clone)]
pub struct Handle {
    /// The advertised topology, updated on every change.
    pub topology: watch::Receiver<Arc<Topology>>,
    /// Events as the core emits them.
    pub events: crate::events::EventBus,
    /// Requests to the shell.
    pub requests: mpsc::Sender<Request>,
    /// This daemon's id (`SENTINEL MYID`).
    pub myid: String,
    /// The runtime's clock origin: core times are milliseconds since it.
    pub start: Instant,
    /// Asks the daemon to exit (`SHUTDOWN`): cancelled by the Sentinel
    /// port, watched by the daemon.
    pub shutdown: CancellationToken,
    /// Trouble that does not stop the runtime (an unwritable state file).
    pub health: watch::Receiver<Health>,
    /// The `SENTINEL DEBUG` timers in force ([`Handle::debug`] changes
    /// them).
    pub timers: watch::Receiver<Timers>,
    /// The readiness latch: becomes `true`, once and for good, when every
    /// instance known at start (configured masters, known replicas,
    /// restored ones) has had its first probe outcome — a PING or INFO
    /// reply, or a link failure. State was restored before `start`
    /// returned. The sender is dropped when the runtime stops, so a
    /// closed channel means the daemon no longer monitors anything.
    pub ready: watch::Receiver<bool>,
    /// The last INFO text of each instance (`SENTINEL INFO-CACHE`).
    pub texts: crate::link::InfoTexts,
    /// The script runner (`SENTINEL PENDING-SCRIPTS`, INFO's counts).
    pub scripts: crate::scripts::Scripts,
    /// `deny-scripts-reconfig` and `dir` (fixed for the process): whether
    /// `SENTINEL SET` may change scripts, and what their relative paths
    /// resolve against.
    pub script_policy: ScriptPolicy,
    /// The `SENTINEL SIMULATE-FAILURE` flags last set, for INFO (the
    /// core holds the ones in force).
    pub crash_points: Arc<std::sync::atomic::AtomicU8>,
    /// Where each host name was reached: shown instead of the name while
    /// `announce_hostnames` is off.
    pub resolved: crate::link::Resolved,
    /// `announce-hostnames` in force (`SENTINEL CONFIG SET` changes it).
    pub announce_hostnames: Arc<std::sync::atomic::AtomicBool>,
}

/// What `SENTINEL SET` needs to judge a script path.
#[derive(Debug, Clone)]
pub struct ScriptPolicy {
    /// `deny-scripts-reconfig yes`: no script may be set at runtime.
    pub deny: bool,
    /// The working directory (`dir`).
    pub dir: std::path::PathBuf,
}

impl Handle {
    /// Now, in the core's milliseconds.
    pub fn now_ms(&self) -> Millis {
        millis(self.start.elapsed())
    }
}

/// The typed requests the protocol servers make. Each sends one
/// [`Request`] and waits for the shell's answer; when the runtime is
/// gone (the daemon is stopping) the answer is [`Refusal::ShuttingDown`].
impl Handle {
    /// Sends a request built around its reply channel, and waits.
    pub(super) async fn ask<T, R: Into<Request>>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> R,
    ) -> Result<T, Refusal> {
        let (tx, rx) = oneshot::channel();
        if self.requests.send(make(tx).into()).await.is_err() {
            return Err(Refusal::ShuttingDown);
        }
        rx.await.map_err(|_| Refusal::ShuttingDown)
    }

    /// `SENTINEL FAILOVER <name>`.
    pub async fn failover(&self, group: String) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Failover {
            group,
            from: None,
            reply,
        })
        .await?
    }

    /// The same switchover, only away from master `from`: refused
    /// ([`AdminError::MasterMoved`](crate::core::AdminError::MasterMoved))
    /// once another is the master.
    pub async fn switch_over(&self, group: String, from: Addr) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Failover {
            group,
            from: Some(from),
            reply,
        })
        .await?
    }

    /// `VALKYRIE PAUSE` (`paused`) or `RESUME` of `groups` (unknown names
    /// are skipped): answered once the change is persisted.
    pub async fn pause(&self, groups: Vec<String>, paused: bool) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Pause {
            groups,
            paused,
            reply,
        })
        .await?
    }

    /// `SENTINEL MONITOR`: `group` already validated.
    pub async fn monitor(&self, group: GroupConfig) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Monitor {
            group: Box::new(group),
            reply,
        })
        .await?
    }

    /// `SENTINEL REMOVE <name>`.
    pub async fn remove(&self, group: String) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Remove { group, reply })
            .await?
    }

    /// `SENTINEL SET <name> …`: `changes` already validated, applied all
    /// or nothing.
    pub async fn set(&self, group: String, changes: Vec<SetChange>) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Set {
            group,
            changes,
            reply,
        })
        .await?
    }

    /// `SENTINEL RESET`: resets `groups` (the names the pattern matched);
    /// how many were reset.
    pub async fn reset(&self, groups: Vec<String>) -> Result<usize, Refusal> {
        self.ask(|reply| OperatorRequest::Reset { groups, reply })
            .await
    }

    /// `SENTINEL FLUSHCONFIG`: saves the runtime configuration now.
    pub async fn flush_config(&self) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::FlushConfig { reply })
            .await?
    }

    /// `SENTINEL CONFIG GET`: the current Sentinel settings.
    pub async fn config_get(&self) -> Result<RuntimeConfig, Refusal> {
        self.ask(|reply| OperatorRequest::ConfigGet { reply }).await
    }

    /// `SENTINEL CONFIG SET`: `settings` already validated (their groups
    /// are ignored); saved, or nothing changed.
    pub async fn config_set(&self, settings: RuntimeConfig) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::ConfigSet { settings, reply })
            .await?
    }

    /// `SENTINEL DEBUG <param> <value> …`: `changes` (timer names of
    /// [`crate::core::timers::NAMES`] and values) already validated; in
    /// force for the core and every link once this returns.
    pub async fn debug(&self, changes: Vec<(&'static str, Millis)>) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Debug { changes, reply })
            .await
    }

    /// `SENTINEL SIMULATE-FAILURE`: the crash points in force once this
    /// returns (bits of [`crate::core::CrashPoint::bit`]); INFO shows
    /// them.
    pub async fn simulate_failure(&self, bits: u8) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::SimulateFailure { bits, reply })
            .await?;
        self.crash_points
            .store(bits, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// `ACL SETUSER`/`DELUSER`: saves every user of the Sentinel port;
    /// when they are not saved the change must not be made.
    pub async fn acl_set(&self, users: Vec<crate::config::UserRule>) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::AclSet { users, reply })
            .await?
    }

    /// `SENTINEL is-master-down-by-addr <ip> <port> <epoch> <runid>`:
    /// whether we see `master` down, and our vote in `epoch` (granted to
    /// `candidate` if we have none yet). The vote is saved before the
    /// answer; when it could not be saved the answer names no vote.
    pub async fn is_master_down_by_addr(
        &self,
        master: Addr,
        epoch: u64,
        candidate: Option<String>,
    ) -> Result<DownAnswer, Refusal> {
        self.ask(|reply| PeerRequest::IsMasterDownByAddr {
            master,
            epoch,
            candidate,
            reply,
        })
        .await?
    }

    /// `PUBLISH __sentinel__:hello <payload>`: processes a peer's hello.
    pub async fn hello(&self, payload: String) -> Result<(), Refusal> {
        self.ask(|reply| PeerRequest::Hello { payload, reply })
            .await
    }

    /// `SHUTDOWN`: asks the daemon to exit, as SIGTERM does.
    pub fn request_shutdown(&self) {
        self.shutdown.cancel();
    }
}

impl Handle {
    /// Creates or updates a group owned by a custom resource.
    pub async fn apply_managed(&self, group: GroupConfig) -> Result<(), Refusal> {
        self.ask(|reply| {
            Request::Managed(ManagedRequest::Apply {
                group: Box::new(group),
                reply,
            })
        })
        .await?
    }

    /// Removes the managed groups not in `keep`; their names.
    pub async fn retain_managed(&self, keep: BTreeSet<String>) -> Result<Vec<String>, Refusal> {
        self.ask(|reply| Request::Managed(ManagedRequest::Retain { keep, reply }))
            .await?
    }

    /// Marks the instances of `group` in `retiring` as on their way out:
    /// no failover or switchover this daemon leads promotes them.
    pub async fn retire(&self, group: String, retiring: BTreeSet<Addr>) -> Result<(), Refusal> {
        self.ask(|reply| {
            Request::Managed(ManagedRequest::Retire {
                group,
                retiring,
                reply,
            })
        })
        .await?
    }
}

impl Handle {
    /// Installs the hook run on each master change of a managed group.
    pub async fn set_role_hook(&self, hook: Arc<dyn RoleHook>) -> Result<(), Refusal> {
        self.ask(|reply| Request::RoleHook { hook, reply }).await
    }
}
