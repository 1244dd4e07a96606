//! The imperative shell around the core: feeds it link results and ticks,
//! carries out what it decides, and exposes the topology to the protocol
//! servers.
//!
//! It also releases the readiness latch ([`Handle::ready`]) once every
//! configured instance has been probed, and records the group, instance
//! and failover metrics from the core's state after each step.
//!
//! Outputs are executed strictly in order (`execute.rs`): a `Persist` is
//! written before anything after it runs, and a group whose state cannot
//! be written does not act until it can. Administrative changes are saved
//! before they are applied, and refused when they cannot be. Inputs from
//! the links are drained in batches; a link failure the core already knows
//! about is not fed to it again, so unreachable instances cost the other
//! groups nothing. `view.rs` holds what the protocol servers are shown.
//!
//! The runtime stops when its shutdown future resolves. Any other end —
//! an error, a panic — is the daemon's end: `daemon.rs` makes the process
//! exit non-zero rather than serve a topology nobody updates.

mod execute;
mod view;

pub use execute::SAVE_RETRY;
pub use view::{GroupView, InstanceView, Topology, view};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, GroupConfig, Secret};
use crate::core::Addr;
use crate::core::{AdminError, Core, GroupSpec, Input, Millis, Output, Settings, State};
use crate::link::{self, Job};
use crate::metrics::CoreObserver;
use crate::state::{RuntimeConfig, StateError, StateFile};

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
}

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
}

/// Requests from the protocol servers.
#[derive(Debug)]
pub enum AdminRequest {
    /// `SENTINEL FAILOVER <name>`.
    Failover {
        /// The group.
        group: String,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL MONITOR`: the new group, already validated.
    Monitor {
        /// The group.
        group: GroupConfig,
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
    /// `ACL SETUSER`/`DELUSER`: the Sentinel port's users, to save.
    AclSet {
        /// Every user, as `user` lines with digests.
        users: Vec<crate::config::UserRule>,
        /// Saved, or not saved (then the change must not be made).
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
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
        }
    }

    /// Whether links must reconnect to take it into account.
    fn relinks(&self) -> bool {
        matches!(
            self,
            SetChange::DownAfter(_) | SetChange::AuthPass(_) | SetChange::AuthUser(_)
        )
    }

    fn apply(&self, g: &mut GroupConfig) {
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
        }
    }
}

/// Handles to a running runtime.
#[derive(Debug, Clone)]
pub struct Handle {
    /// The advertised topology, updated on every change.
    pub topology: watch::Receiver<Arc<Topology>>,
    /// Events as the core emits them.
    pub events: crate::events::EventBus,
    /// Administrative requests.
    pub admin: mpsc::Sender<AdminRequest>,
    /// This daemon's id (`SENTINEL MYID`).
    pub myid: String,
    /// The runtime's clock origin: core times are milliseconds since it.
    pub start: Instant,
    /// Asks the daemon to exit (`SHUTDOWN`): cancelled by the Sentinel
    /// port, watched by the daemon.
    pub shutdown: CancellationToken,
    /// Trouble that does not stop the runtime (an unwritable state file).
    pub health: watch::Receiver<Health>,
    /// The readiness latch: becomes `true`, once and for good, when every
    /// instance known at start (configured masters, known replicas,
    /// restored ones) has had its first probe outcome — a PING or INFO
    /// reply, or a link failure. State was restored before `start`
    /// returned. The sender is dropped when the runtime stops, so a
    /// closed channel means the daemon no longer monitors anything.
    pub ready: watch::Receiver<bool>,
}

impl Handle {
    /// Now, in the core's milliseconds.
    pub fn now_ms(&self) -> Millis {
        millis(self.start.elapsed())
    }
}

/// What the core needs to know of a configured group.
fn spec(g: &GroupConfig) -> GroupSpec {
    GroupSpec {
        name: g.name.clone(),
        master: Addr::new(g.host.clone(), g.port),
        quorum: g.quorum,
        down_after: millis(g.down_after),
        failover_timeout: millis(g.failover_timeout),
        parallel_syncs: g.parallel_syncs,
        reboot_down_after: millis(g.master_reboot_down_after_period),
        known_replicas: g
            .known_replicas
            .iter()
            .map(|(h, p)| Addr::new(h.clone(), *p))
            .collect(),
    }
}

fn millis(d: Duration) -> Millis {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Starts the runtime; it runs until `shutdown` resolves.
pub async fn start(
    mut config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(Handle, tokio::task::JoinHandle<Result<(), RuntimeError>>), RuntimeError> {
    let file = StateFile::in_dir(&config.dir);
    let saved = file.load_saved()?;
    let runtime_config = saved.as_ref().and_then(|s| s.config.clone());
    if let Some(rc) = &runtime_config {
        tracing::warn!(
            groups = rc.groups.len(),
            "monitoring as last changed at runtime (SENTINEL MONITOR/REMOVE/SET/CONFIG SET), \
             saved in {}: the configuration file's groups and Sentinel settings are not used; \
             remove the \"config\" entry of that file to return to them",
            file.path().display()
        );
        rc.apply(&mut config);
        crate::telemetry::apply_loglevel(&config.loglevel);
    }
    let (myid, persist_myid) = crate::state::myid::choose(
        config.myid.as_deref(),
        saved.as_ref().and_then(|s| s.myid.as_deref()),
    )
    .map_err(|e| RuntimeError::Random(e.to_string()))?;
    let file = file.with_myid(&myid);
    if saved.is_none() {
        crate::state::warn_if_missing(&file);
    }
    let restored = saved.map(|s| s.state);
    if persist_myid {
        // Kept from the first start on, as Sentinel's `sentinel myid`:
        // peers and clients know this daemon by it.
        let (f, state, rc) = (
            file.clone(),
            restored.clone().unwrap_or_default(),
            runtime_config.clone(),
        );
        tokio::task::spawn_blocking(move || f.save_with(&state, rc.as_ref()))
            .await
            .map_err(|e| RuntimeError::Task(e.to_string()))??;
        tracing::info!(myid = %myid, "daemon id saved in {}", file.path().display());
    }
    let specs: Vec<GroupSpec> = config.groups.iter().map(spec).collect();
    let start = Instant::now();
    let (core, first) = Core::new(Settings { myid: myid.clone() }, specs, restored.as_ref(), 0);
    let (topology_tx, topology_rx) = watch::channel(Arc::new(view(&core)));
    let events_tx = crate::events::EventBus::new();
    let (admin_tx, admin_rx) = mpsc::channel(64);
    let (input_tx, input_rx) = mpsc::channel(link::INPUT_QUEUE);
    let (health_tx, health_rx) = watch::channel(Health::default());
    crate::metrics::set_state_file_writable(true);
    let probing: BTreeSet<(String, Addr)> = core
        .groups()
        .iter()
        .flat_map(|(name, g)| g.instances.keys().map(|a| (name.clone(), a.clone())))
        .collect();
    let (ready_tx, ready_rx) = watch::channel(false);
    let tick = config
        .groups
        .iter()
        .map(|g| g.down_after / 20)
        .min()
        .unwrap_or(Duration::from_millis(100))
        .clamp(Duration::from_millis(5), Duration::from_millis(100));
    let mut shell = Shell {
        config,
        core,
        start,
        file,
        runtime_config,
        state: restored.unwrap_or_default(),
        links: BTreeMap::new(),
        urgent: BTreeMap::new(),
        input_tx,
        inputs: input_rx,
        topology: topology_tx,
        events: events_tx.clone(),
        refreshed: start,
        probing,
        ready: ready_tx,
        observer: CoreObserver::default(),
        health: health_tx,
        unsaved: BTreeSet::new(),
        dirty: false,
        tasks: TaskTracker::new(),
        panic_at: test_panic_at(),
    };
    shell.probed(None);
    shell.execute(first).await;
    shell.observer.gauges(&shell.core);
    let handle = Handle {
        topology: topology_rx,
        events: events_tx,
        admin: admin_tx,
        myid,
        start,
        shutdown: CancellationToken::new(),
        health: health_rx,
        ready: ready_rx,
    };
    let task = tokio::spawn(shell.run(tick, admin_rx, shutdown));
    Ok((handle, task))
}

/// Test hook, for the tests that check that a dead runtime ends the
/// process: `VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS=<ms>` makes the runtime
/// panic that long after it starts. Never set it in production.
fn test_panic_at() -> Option<Millis> {
    let at = std::env::var("VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS").ok()?;
    let at = at.parse().ok()?;
    tracing::warn!(
        "VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS is set: the runtime will panic (test hook)"
    );
    Some(at)
}

/// How many inputs one step of the runtime takes from the links.
const BATCH: usize = 512;

struct Shell {
    config: Config,
    core: Core,
    start: Instant,
    file: StateFile,
    /// Monitoring as changed at runtime; `None` until it first is.
    runtime_config: Option<RuntimeConfig>,
    state: State,
    links: BTreeMap<(String, Addr), mpsc::UnboundedSender<Job>>,
    /// Per group: whether links should poll INFO fast.
    urgent: BTreeMap<String, watch::Sender<bool>>,
    input_tx: link::InputSender,
    inputs: mpsc::Receiver<Input>,
    topology: watch::Sender<Arc<Topology>>,
    events: crate::events::EventBus,
    refreshed: Instant,
    /// Instances still waiting for their first probe outcome.
    probing: BTreeSet<(String, Addr)>,
    ready: watch::Sender<bool>,
    observer: CoreObserver,
    /// Shown by `/healthz`.
    health: watch::Sender<Health>,
    /// Groups whose last decision could not be written: they do not act
    /// until a write succeeds (`execute.rs`).
    unsaved: BTreeSet<String>,
    /// The state in memory is newer than the file.
    dirty: bool,
    /// The link tasks.
    tasks: TaskTracker,
    /// Test hook: panic at this time.
    panic_at: Option<Millis>,
}

impl Drop for Shell {
    fn drop(&mut self) {
        // Stopped (shutdown, or the state file could not be written): no
        // longer monitoring, whatever the latch said.
        crate::metrics::set_ready(false);
    }
}

impl Shell {
    fn now(&self) -> Millis {
        millis(self.start.elapsed())
    }

    async fn run(
        mut self,
        tick: Duration,
        mut admin: mpsc::Receiver<AdminRequest>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), RuntimeError> {
        let mut ticker = tokio::time::interval(tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retry = tokio::time::interval(SAVE_RETRY);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut batch = Vec::with_capacity(BATCH);
        tokio::pin!(shutdown);
        loop {
            if self.panic_at.is_some_and(|at| self.now() >= at) {
                panic!("test hook VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS: the runtime panics");
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = ticker.tick() => {
                    let outputs = self.core.handle(self.now(), Input::Tick);
                    self.execute(outputs).await;
                }
                n = self.inputs.recv_many(&mut batch, BATCH) => {
                    // The shell holds a sender: the channel never closes.
                    if n == 0 {
                        break;
                    }
                    let now = self.now();
                    let mut outputs = Vec::new();
                    for input in batch.drain(..) {
                        self.probed(Some(&input));
                        if !self.known(&input) {
                            outputs.extend(self.core.handle(now, input));
                        }
                    }
                    self.execute(outputs).await;
                }
                Some(req) = admin.recv() => self.admin(req).await,
                _ = retry.tick(), if self.dirty => self.retry_save().await,
            }
        }
        tracing::info!("runtime stopped");
        // Dropping the job senders ends the links.
        self.links.clear();
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(1), self.tasks.wait()).await;
        Ok(())
    }

    /// Whether an input tells the core nothing new: a link failure of the
    /// kind the core already holds for that instance. An unreachable
    /// instance reports one per reconnect attempt; feeding each to the
    /// core (which then steps every group) would make one group's trouble
    /// every group's cost.
    fn known(&self, input: &Input) -> bool {
        let Input::LinkDown {
            group,
            addr,
            failure,
        } = input
        else {
            return false;
        };
        self.core
            .groups()
            .get(group)
            .and_then(|g| g.instances.get(addr))
            .is_some_and(|i| i.failure == Some(*failure))
    }

    /// Carries out an administrative request. A configuration change is
    /// saved first and made only if it was saved; the reply follows.
    async fn admin(&mut self, req: AdminRequest) {
        let now = self.now();
        match req {
            AdminRequest::Failover { group, reply } => match self.core.failover(now, &group) {
                Ok(outputs) => {
                    self.execute(outputs).await;
                    // The failover's epoch could not be written: it does
                    // not act, and the client hears so.
                    let result = if self.unsaved.contains(&group) {
                        Err(Refusal::NotSaved)
                    } else {
                        Ok(())
                    };
                    let _ = reply.send(result);
                }
                Err(e) => {
                    let _ = reply.send(Err(e.into()));
                }
            },
            AdminRequest::Monitor { group, reply } => {
                if self.core.groups().contains_key(&group.name) {
                    let _ = reply.send(Err(AdminError::DuplicateMaster.into()));
                    return;
                }
                let mut config = self.config.clone();
                config.groups.push(group.clone());
                if let Err(e) = self.save_config_as(config, "SENTINEL MONITOR").await {
                    let _ = reply.send(Err(e));
                    return;
                }
                tracing::info!(group = %group.name, "monitoring started (SENTINEL MONITOR)");
                let result = self.core.monitor(now, spec(&group));
                self.answer(reply, result).await;
            }
            AdminRequest::Remove { group, reply } => {
                if !self.core.groups().contains_key(&group) {
                    let _ = reply.send(Err(AdminError::NoSuchMaster.into()));
                    return;
                }
                let mut config = self.config.clone();
                config.groups.retain(|g| g.name != group);
                if let Err(e) = self.save_config_as(config, "SENTINEL REMOVE").await {
                    let _ = reply.send(Err(e));
                    return;
                }
                tracing::info!(group = %group, "monitoring stopped (SENTINEL REMOVE)");
                let result = self.core.remove(&group);
                self.answer(reply, result).await;
            }
            AdminRequest::Set {
                group,
                changes,
                reply,
            } => {
                let (Some(mut g), true) = (
                    self.config.group(&group).cloned(),
                    self.core.groups().contains_key(&group),
                ) else {
                    let _ = reply.send(Err(AdminError::NoSuchMaster.into()));
                    return;
                };
                for c in &changes {
                    c.apply(&mut g);
                }
                let mut config = self.config.clone();
                if let Some(slot) = config.groups.iter_mut().find(|x| x.name == group) {
                    *slot = g.clone();
                }
                if let Err(e) = self.save_config_as(config, "SENTINEL SET").await {
                    let _ = reply.send(Err(e));
                    return;
                }
                let texts: Vec<String> = changes.iter().map(SetChange::event_text).collect();
                let result = self.core.set(&group, &spec(&g), &texts);
                if changes.iter().any(SetChange::relinks) {
                    self.relink(&group);
                }
                self.answer(reply, result).await;
            }
            AdminRequest::Reset { groups, reply } => {
                let (count, outputs) = self.core.reset(&groups);
                let _ = reply.send(count);
                self.execute(outputs).await;
            }
            AdminRequest::FlushConfig { reply } => {
                let config = self.config.clone();
                let _ = reply.send(self.save_config_as(config, "SENTINEL FLUSHCONFIG").await);
            }
            AdminRequest::ConfigGet { reply } => {
                let _ = reply.send(RuntimeConfig::of(&self.config));
            }
            AdminRequest::ConfigSet { settings, reply } => {
                let mut config = self.config.clone();
                let acl = config.acl.take();
                settings.apply(&mut config);
                config.groups.clone_from(&self.config.groups);
                config.acl = acl;
                let result = self.save_config_as(config, "SENTINEL CONFIG SET").await;
                if result.is_ok() {
                    crate::telemetry::apply_loglevel(&self.config.loglevel);
                }
                let _ = reply.send(result);
            }
            AdminRequest::AclSet { users, reply } => {
                let mut config = self.config.clone();
                config.acl = Some(users);
                let _ = reply.send(self.save_config_as(config, "ACL SETUSER/DELUSER").await);
            }
        }
    }

    /// Answers an administrative request with the core's verdict, after
    /// carrying out what it decided.
    async fn answer(
        &mut self,
        reply: oneshot::Sender<Result<(), Refusal>>,
        result: Result<Vec<Output>, AdminError>,
    ) {
        match result {
            Ok(outputs) => {
                self.execute(outputs).await;
                let _ = reply.send(Ok(()));
            }
            Err(e) => {
                let _ = reply.send(Err(e.into()));
            }
        }
    }

    /// Saves `config` as the monitoring configuration, with the state, and
    /// adopts it only if that worked: from then on it is what the daemon
    /// starts with. When it cannot be written nothing changes, the failure
    /// is logged and counted, and `what` is refused with Sentinel's reply.
    async fn save_config_as(&mut self, config: Config, what: &str) -> Result<(), Refusal> {
        let before = self.runtime_config.replace(RuntimeConfig::of(&config));
        match self.save().await {
            Ok(()) => {
                self.config = config;
                self.saved();
                Ok(())
            }
            Err(e) => {
                self.runtime_config = before;
                crate::metrics::state_write_failed();
                tracing::error!(
                    "{what} refused, nothing changed: cannot write the state file: {e}"
                );
                Err(Refusal::NotSaved)
            }
        }
    }

    /// Restarts every link of `group` with its current settings.
    fn relink(&mut self, group: &str) {
        let addrs: Vec<Addr> = self
            .links
            .keys()
            .filter(|(g, _)| g == group)
            .map(|(_, a)| a.clone())
            .collect();
        for addr in addrs {
            // Dropping the sender ends the old link.
            self.links.remove(&(group.to_string(), addr.clone()));
            self.watch(group.to_string(), addr);
        }
    }
}
