//! What the ports ask of the shell ([`Request`]): an operator's
//! [`OperatorRequest`], a peer's [`PeerRequest`], a custom resource's
//! [`ManagedRequest`], a role hook; what a change to a group is
//! ([`SetChange`]) and why a request is refused ([`Refusal`]).

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::oneshot;

use super::spec::millis;
use crate::config::{GroupConfig, GroupOwner, Secret};
use crate::core::{Addr, AdminError, DownAnswer, EpochError, Millis};
use crate::state::RuntimeConfig;

/// Why an administrative request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The core's verdict (Sentinel's texts).
    #[error(transparent)]
    Core(#[from] AdminError),
    /// The change could not be saved in the state file, so it was not
    /// made: Sentinel's exact reply when it cannot rewrite its file.
    #[error("ERR Failed to save config file. Check server logs.")]
    NotSaved,
    /// The runtime is gone (the daemon is stopping): nothing was done.
    #[error("ERR shutting down")]
    ShuttingDown,
    /// A peer's epoch was refused (`SENTINEL is-master-down-by-addr`):
    /// Sentinel's reply for an epoch that is not an integer.
    #[error("ERR value is not an integer or out of range")]
    Epoch(#[from] EpochError),
    /// `SENTINEL REMOVE`/`SET` on a group a custom resource owns: only
    /// the resource changes it.
    #[error("ERR group is managed by Kubernetes ({0}): change the resource instead")]
    Managed(GroupOwner),
    /// A custom resource names a group that sentinel.conf or `SENTINEL
    /// MONITOR` already defines: the two sources never share a group.
    #[error("ERR group {0} is defined by the configuration, not by a ValkeyCluster")]
    NotManaged(String),
}

/// Requests from the ports to the shell.
#[derive(Debug)]
pub enum Request {
    /// An operator's, on the Sentinel port.
    Operator(OperatorRequest),
    /// A peer sentinel's, on the Sentinel port.
    Peer(PeerRequest),
    /// Groups owned by custom resources (`managed.rs`).
    Managed(ManagedRequest),
    /// Installs the hook run on a managed group's master change.
    RoleHook {
        /// The hook.
        hook: std::sync::Arc<dyn super::role_hook::RoleHook>,
        /// Installed.
        reply: oneshot::Sender<()>,
    },
}

/// What an operator asks on the Sentinel port.
#[derive(Debug)]
pub enum OperatorRequest {
    /// `SENTINEL FAILOVER <name>`.
    Failover {
        /// The group.
        group: String,
        /// Only away from this master (`None`: whichever it is).
        from: Option<Addr>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL MONITOR`: the new group, already validated.
    Monitor {
        /// The group.
        group: Box<GroupConfig>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL REMOVE <name>`.
    Remove {
        /// The group.
        group: String,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL SET <name> …`, already validated; applied all or nothing.
    Set {
        /// The group.
        group: String,
        /// The changes, in order.
        changes: Vec<SetChange>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL RESET`: the groups whose names matched.
    Reset {
        /// The groups.
        groups: Vec<String>,
        /// How many were reset.
        reply: oneshot::Sender<usize>,
    },
    /// `VALKYRIE PAUSE` / `RESUME`: the groups whose names matched.
    Pause {
        /// The groups.
        groups: Vec<String>,
        /// Pause (true) or resume.
        paused: bool,
        /// Done, or not saved (then the client hears so; the change is
        /// made but does not survive a restart until the file is written).
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL FLUSHCONFIG`: save the runtime configuration now.
    FlushConfig {
        /// Done, or not saved.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL CONFIG GET`: the current Sentinel settings.
    ConfigGet {
        /// Where the answer goes.
        reply: oneshot::Sender<RuntimeConfig>,
    },
    /// `SENTINEL CONFIG SET`, already validated.
    ConfigSet {
        /// The new settings (groups are ignored).
        settings: RuntimeConfig,
        /// Done, or not saved (then nothing changed).
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL DEBUG <param> <value> …`, already validated: in force
    /// once answered (not saved: as Sentinel's, they last until the
    /// daemon restarts).
    Debug {
        /// The timers to change, by name ([`crate::core::timers::NAMES`]),
        /// in order.
        changes: Vec<(&'static str, Millis)>,
        /// In force.
        reply: oneshot::Sender<()>,
    },
    /// `SENTINEL SIMULATE-FAILURE`: the crash points (bits of
    /// [`crate::core::CrashPoint::bit`]), in force once answered, not
    /// saved.
    SimulateFailure {
        /// The flags.
        bits: u8,
        /// In force.
        reply: oneshot::Sender<()>,
    },
    /// `ACL SETUSER`/`DELUSER`: the Sentinel port's users, to save.
    AclSet {
        /// Every user, as `user` lines with digests.
        users: Vec<crate::config::UserRule>,
        /// Saved, or not saved (then the change must not be made).
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
}

/// What a peer sentinel asks on the Sentinel port.
#[derive(Debug)]
pub enum PeerRequest {
    /// `SENTINEL is-master-down-by-addr`: the master's address, the
    /// asker's epoch (already parsed) and its candidate (`None`: `*`).
    IsMasterDownByAddr {
        /// The master, by address.
        master: Addr,
        /// The asker's current epoch.
        epoch: u64,
        /// Whom to vote for; `None` asks only whether the master is down.
        candidate: Option<String>,
        /// The answer, once any vote is saved.
        reply: oneshot::Sender<Result<DownAnswer, Refusal>>,
    },
    /// `PUBLISH __sentinel__:hello <payload>` on the Sentinel port.
    Hello {
        /// The hello as received.
        payload: String,
        /// Processed.
        reply: oneshot::Sender<()>,
    },
}

impl From<OperatorRequest> for Request {
    fn from(r: OperatorRequest) -> Request {
        Request::Operator(r)
    }
}

impl From<PeerRequest> for Request {
    fn from(r: PeerRequest) -> Request {
        Request::Peer(r)
    }
}

/// One validated `SENTINEL SET` option.
#[derive(Clone, Debug, PartialEq)]
pub enum SetChange {
    /// `down-after-milliseconds`.
    DownAfter(Duration),
    /// `failover-timeout`.
    FailoverTimeout(Duration),
    /// `parallel-syncs`.
    ParallelSyncs(u32),
    /// `quorum`.
    Quorum(u32),
    /// `auth-pass` (empty: none).
    AuthPass(Option<Secret>),
    /// `auth-user` (empty: none).
    AuthUser(Option<String>),
    /// `rename-command <old> <new>`.
    RenameCommand(String, String),
    /// `master-reboot-down-after-period`.
    RebootDownAfter(Duration),
    /// `write-fence` (Valkyrie's).
    WriteFence(crate::core::FenceMode),
    /// `write-fence-lag` in seconds (Valkyrie's).
    WriteFenceLag(u64),
    /// `notification-script` (`None`: cleared with `""`).
    NotificationScript(Option<String>),
    /// `client-reconfig-script` (`None`: cleared with `""`).
    ClientReconfigScript(Option<String>),
}

impl SetChange {
    /// The `<option> <value>` text of its `+set` event; passwords redacted
    /// as Sentinel does.
    pub fn event_text(&self) -> String {
        match self {
            SetChange::DownAfter(d) => format!("down-after-milliseconds {}", millis(*d)),
            SetChange::FailoverTimeout(d) => format!("failover-timeout {}", millis(*d)),
            SetChange::ParallelSyncs(n) => format!("parallel-syncs {n}"),
            SetChange::Quorum(n) => format!("quorum {n}"),
            SetChange::AuthPass(_) => "auth-pass ******".to_string(),
            SetChange::AuthUser(u) => format!("auth-user {}", u.as_deref().unwrap_or("")),
            SetChange::RenameCommand(a, b) => format!("rename-command {a} {b}"),
            SetChange::RebootDownAfter(d) => {
                format!("master-reboot-down-after-period {}", millis(*d))
            }
            SetChange::WriteFence(m) => format!("write-fence {}", m.as_str()),
            SetChange::WriteFenceLag(s) => format!("write-fence-lag {s}"),
            SetChange::NotificationScript(p) => {
                format!("notification-script {}", p.as_deref().unwrap_or(""))
            }
            SetChange::ClientReconfigScript(p) => {
                format!("client-reconfig-script {}", p.as_deref().unwrap_or(""))
            }
        }
    }

    /// Whether links must reconnect to take it into account.
    pub(super) fn relinks(&self) -> bool {
        matches!(
            self,
            SetChange::DownAfter(_)
                | SetChange::AuthPass(_)
                | SetChange::AuthUser(_)
                | SetChange::RenameCommand(..)
        )
    }

    pub(super) fn apply(&self, g: &mut GroupConfig) {
        match self {
            SetChange::DownAfter(d) => g.down_after = *d,
            SetChange::FailoverTimeout(d) => g.failover_timeout = *d,
            SetChange::ParallelSyncs(n) => g.parallel_syncs = *n,
            SetChange::Quorum(n) => g.quorum = *n,
            SetChange::AuthPass(p) => g.auth_pass.clone_from(p),
            SetChange::AuthUser(u) => g.auth_user.clone_from(u),
            SetChange::RenameCommand(old, new) => {
                g.renamed_commands
                    .retain(|(o, _)| !o.eq_ignore_ascii_case(old));
                if !old.eq_ignore_ascii_case(new) {
                    g.renamed_commands.push((old.clone(), new.clone()));
                }
            }
            SetChange::RebootDownAfter(d) => g.master_reboot_down_after_period = *d,
            SetChange::WriteFence(m) => g.write_fence.mode = *m,
            SetChange::WriteFenceLag(s) => g.write_fence.lag_secs = *s,
            SetChange::NotificationScript(p) => g.notification_script.clone_from(p),
            SetChange::ClientReconfigScript(p) => g.client_reconfig_script.clone_from(p),
        }
    }
}

/// Requests of the Kubernetes input.
#[derive(Debug)]
pub enum ManagedRequest {
    /// Creates the group, or updates its settings.
    Apply {
        /// The group, with its owner.
        group: Box<GroupConfig>,
        /// Done, or refused (then nothing changed).
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// Removes the managed groups not in `keep`: their resources are gone
    /// (deleted while the daemon was down, say).
    Retain {
        /// The names of the groups whose resources exist.
        keep: BTreeSet<String>,
        /// The groups removed, or refused (then nothing changed).
        reply: oneshot::Sender<Result<Vec<String>, Refusal>>,
    },
    /// Marks the group's instances on their way out (never promoted);
    /// every other one is not.
    Retire {
        /// The group.
        group: String,
        /// The instances on their way out.
        retiring: BTreeSet<Addr>,
        /// Done, or refused (no such group).
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
}
