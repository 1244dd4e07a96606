//! The imperative shell around the core: feeds it link results and ticks,
//! carries out what it decides, and exposes the topology to the protocol
//! servers.
//!
//! It also releases the readiness latch ([`Handle::ready`]) once every
//! configured instance has been probed, and records the group, instance
//! and failover metrics from the core's state after each step.
//!
//! Outputs are executed strictly in order. `Persist` is written (fsync and
//! all) before anything after it runs; if the state cannot be written the
//! daemon stops rather than act on a decision it could forget.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::config::{Config, GroupConfig, Secret};
use crate::core::{
    self, Addr, AdminError, Core, Event, FailoverPhase, GroupSpec, Input, Millis, Output, Settings,
    State,
};
use crate::link::{self, Job, LinkSpec};
use crate::metrics::CoreObserver;
use crate::state::{RuntimeConfig, StateError, StateFile};

/// What the protocol servers show: one entry per group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Groups by name.
    pub groups: BTreeMap<String, GroupView>,
    /// The mass-failure breaker holds failovers back (Sentinel's TILT).
    pub tilt: bool,
}

/// One group as advertised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    /// The epoch the advertised master was adopted in; it only grows, and
    /// the master only changes together with it.
    pub epoch: u64,
    /// The advertised master.
    pub master: Addr,
    /// Whether the master is subjectively down.
    pub master_down: bool,
    /// A failover is in progress.
    pub failover_in_progress: bool,
    /// Known replicas (the master excluded; fenced old masters excluded
    /// until they have resynced).
    pub replicas: Vec<InstanceView>,
    /// The configured quorum.
    pub quorum: u32,
    /// `down-after-milliseconds`.
    pub down_after: Millis,
    /// `failover-timeout`.
    pub failover_timeout: Millis,
    /// `parallel-syncs`.
    pub parallel_syncs: u32,
    /// Objectively down (decided to fail over).
    pub odown: bool,
    /// Sentinel's name for the failover step, while one runs.
    pub failover_state: Option<&'static str>,
    /// The master's details.
    pub master_details: InstanceView,
}

/// Everything `SENTINEL MASTER`/`REPLICAS` report about an instance.
/// Times are milliseconds on the runtime's clock ([`Handle::now_ms`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceView {
    /// Its address.
    pub addr: Addr,
    /// `run_id` from its INFO (empty until known).
    pub run_id: String,
    /// Subjectively down.
    pub down: bool,
    /// The link to it is down.
    pub disconnected: bool,
    /// Last valid reply.
    pub last_ok: Millis,
    /// Last INFO.
    pub info_at: Millis,
    /// It reports itself master.
    pub reports_master: bool,
    /// When that role was first seen.
    pub role_since: Millis,
    /// For a replica: the master it follows, link state, and how long the
    /// link has been down (ms).
    pub replica_of: Option<(Addr, bool, u64)>,
    /// `replica-priority`.
    pub priority: u32,
    /// Replication offset.
    pub offset: u64,
}

impl InstanceView {
    /// An instance nothing is known about yet: up, no INFO, priority 100.
    pub fn new(addr: Addr) -> InstanceView {
        InstanceView {
            addr,
            run_id: String::new(),
            down: false,
            disconnected: false,
            last_ok: 0,
            info_at: 0,
            reports_master: false,
            role_since: 0,
            replica_of: None,
            priority: 100,
            offset: 0,
        }
    }
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
}

/// Requests from the protocol servers.
#[derive(Debug)]
pub enum AdminRequest {
    /// `SENTINEL FAILOVER <name>`.
    Failover {
        /// The group.
        group: String,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), AdminError>>,
    },
    /// `SENTINEL MONITOR`: the new group, already validated.
    Monitor {
        /// The group.
        group: GroupConfig,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), AdminError>>,
    },
    /// `SENTINEL REMOVE <name>`.
    Remove {
        /// The group.
        group: String,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), AdminError>>,
    },
    /// `SENTINEL SET <name> …`, already validated; applied all or nothing.
    Set {
        /// The group.
        group: String,
        /// The changes, in order.
        changes: Vec<SetChange>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), AdminError>>,
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
        /// Done.
        reply: oneshot::Sender<()>,
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
        /// Done.
        reply: oneshot::Sender<()>,
    },
    /// `ACL SETUSER`/`DELUSER`: the Sentinel port's users, to save.
    AclSet {
        /// Every user, as `user` lines with digests.
        users: Vec<crate::config::UserRule>,
        /// Done.
        reply: oneshot::Sender<()>,
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
    pub events: broadcast::Sender<Event>,
    /// Administrative requests.
    pub admin: mpsc::Sender<AdminRequest>,
    /// This daemon's id (`SENTINEL MYID`).
    pub myid: String,
    /// The runtime's clock origin: core times are milliseconds since it.
    pub start: Instant,
    /// Asks the daemon to exit (`SHUTDOWN`).
    pub shutdown: Arc<tokio::sync::Notify>,
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
    let restored = saved.map(|s| s.state);
    if persist_myid {
        // Kept from the first start on, as Sentinel's `sentinel myid`:
        // peers and clients know this daemon by it.
        file.save_with(
            &restored.clone().unwrap_or_default(),
            runtime_config.as_ref(),
        )?;
        tracing::info!(myid = %myid, "daemon id saved in {}", file.path().display());
    }
    let specs: Vec<GroupSpec> = config.groups.iter().map(spec).collect();
    let start = Instant::now();
    let (core, first) = Core::new(Settings { myid: myid.clone() }, specs, restored.as_ref(), 0);
    let (topology_tx, topology_rx) = watch::channel(Arc::new(view(&core)));
    let (events_tx, _) = broadcast::channel(1024);
    let (admin_tx, admin_rx) = mpsc::channel(64);
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
        inputs: mpsc::unbounded_channel(),
        topology: topology_tx,
        events: events_tx.clone(),
        refreshed: start,
        probing,
        ready: ready_tx,
        observer: CoreObserver::default(),
    };
    shell.probed(None);
    shell.execute(first)?;
    shell.observer.gauges(&shell.core);
    let handle = Handle {
        topology: topology_rx,
        events: events_tx,
        admin: admin_tx,
        myid,
        start,
        shutdown: Arc::new(tokio::sync::Notify::new()),
        ready: ready_rx,
    };
    let task = tokio::spawn(shell.run(tick, admin_rx, shutdown));
    Ok((handle, task))
}

type InputSender = mpsc::UnboundedSender<Input>;
type InputReceiver = mpsc::UnboundedReceiver<Input>;

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
    inputs: (InputSender, InputReceiver),
    topology: watch::Sender<Arc<Topology>>,
    events: broadcast::Sender<Event>,
    refreshed: Instant,
    /// Instances still waiting for their first probe outcome.
    probing: BTreeSet<(String, Addr)>,
    ready: watch::Sender<bool>,
    observer: CoreObserver,
}

impl Drop for Shell {
    fn drop(&mut self) {
        // Stopped (shutdown, or the state file could not be written): no
        // longer monitoring, whatever the latch said.
        crate::metrics::set_ready(false);
    }
}

/// How often the topology snapshot is refreshed without notifying.
const VIEW_REFRESH: Duration = Duration::from_millis(100);

/// Whether what is advertised (masters, epochs, replica sets and their
/// flags) differs, ignoring timestamps.
fn advertised_differs(a: &Topology, b: &Topology) -> bool {
    a.tilt != b.tilt
        || a.groups.len() != b.groups.len()
        || a.groups
            .iter()
            .zip(b.groups.iter())
            .any(|((na, ga), (nb, gb))| {
                na != nb
                    || ga.epoch != gb.epoch
                    || ga.master != gb.master
                    || ga.master_down != gb.master_down
                    || ga.odown != gb.odown
                    || ga.failover_in_progress != gb.failover_in_progress
                    || ga.replicas.len() != gb.replicas.len()
                    || ga.replicas.iter().zip(&gb.replicas).any(|(x, y)| {
                        (&x.addr, x.down, x.disconnected, x.priority)
                            != (&y.addr, y.down, y.disconnected, y.priority)
                    })
            })
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
        tokio::pin!(shutdown);
        loop {
            let outputs = tokio::select! {
                _ = &mut shutdown => break,
                _ = ticker.tick() => self.core.handle(self.now(), Input::Tick),
                Some(input) = self.inputs.1.recv() => {
                    self.probed(Some(&input));
                    self.core.handle(self.now(), input)
                }
                Some(req) = admin.recv() => self.admin(req)?,
            };
            self.execute(outputs)?;
        }
        tracing::info!("runtime stopped");
        Ok(())
    }

    /// Carries out an administrative request; returns the core's outputs.
    /// Configuration changes are saved before the request is answered.
    fn admin(&mut self, req: AdminRequest) -> Result<Vec<Output>, RuntimeError> {
        let now = self.now();
        Ok(match req {
            AdminRequest::Failover { group, reply } => {
                let result = self.core.failover(now, &group);
                self.answer(reply, result, |_| Ok(()))?
            }
            AdminRequest::Monitor { group, reply } => {
                let result = self.core.monitor(now, spec(&group));
                self.answer(reply, result, |shell| {
                    tracing::info!(group = %group.name, "monitoring started (SENTINEL MONITOR)");
                    shell.config.groups.push(group);
                    shell.save_config()
                })?
            }
            AdminRequest::Remove { group, reply } => {
                let result = self.core.remove(&group);
                self.answer(reply, result, |shell| {
                    tracing::info!(group = %group, "monitoring stopped (SENTINEL REMOVE)");
                    shell.config.groups.retain(|g| g.name != group);
                    shell.save_config()
                })?
            }
            AdminRequest::Set {
                group,
                changes,
                reply,
            } => {
                let Some(mut g) = self.config.group(&group).cloned() else {
                    let _ = reply.send(Err(AdminError::NoSuchMaster));
                    return Ok(Vec::new());
                };
                for c in &changes {
                    c.apply(&mut g);
                }
                let texts: Vec<String> = changes.iter().map(SetChange::event_text).collect();
                let result = self.core.set(&group, &spec(&g), &texts);
                self.answer(reply, result, |shell| {
                    if let Some(slot) = shell.config.groups.iter_mut().find(|x| x.name == group) {
                        *slot = g;
                    }
                    shell.save_config()?;
                    if changes.iter().any(SetChange::relinks) {
                        shell.relink(&group);
                    }
                    Ok(())
                })?
            }
            AdminRequest::Reset { groups, reply } => {
                let (count, outputs) = self.core.reset(&groups);
                let _ = reply.send(count);
                outputs
            }
            AdminRequest::FlushConfig { reply } => {
                self.save_config()?;
                let _ = reply.send(());
                Vec::new()
            }
            AdminRequest::ConfigGet { reply } => {
                let _ = reply.send(RuntimeConfig::of(&self.config));
                Vec::new()
            }
            AdminRequest::ConfigSet { settings, reply } => {
                let groups = std::mem::take(&mut self.config.groups);
                let acl = self.config.acl.take();
                settings.apply(&mut self.config);
                self.config.groups = groups;
                self.config.acl = acl;
                crate::telemetry::apply_loglevel(&self.config.loglevel);
                self.save_config()?;
                let _ = reply.send(());
                Vec::new()
            }
            AdminRequest::AclSet { users, reply } => {
                self.config.acl = Some(users);
                self.save_config()?;
                let _ = reply.send(());
                Vec::new()
            }
        })
    }

    /// Answers an administrative request with the core's verdict; on
    /// success `then` runs first (saving the configuration), so the reply
    /// never precedes what it promises.
    fn answer(
        &mut self,
        reply: oneshot::Sender<Result<(), AdminError>>,
        result: Result<Vec<Output>, AdminError>,
        then: impl FnOnce(&mut Shell) -> Result<(), RuntimeError>,
    ) -> Result<Vec<Output>, RuntimeError> {
        match result {
            Ok(outputs) => {
                then(self)?;
                let _ = reply.send(Ok(()));
                Ok(outputs)
            }
            Err(e) => {
                let _ = reply.send(Err(e));
                Ok(Vec::new())
            }
        }
    }

    /// Saves the configuration as it now is, with the state: from now on
    /// it is what the daemon starts with.
    fn save_config(&mut self) -> Result<(), RuntimeError> {
        let rc = RuntimeConfig::of(&self.config);
        self.file.save_with(&self.state, Some(&rc))?;
        self.runtime_config = Some(rc);
        Ok(())
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

    /// Ticks off an instance's first probe outcome; releases the
    /// readiness latch when none is left.
    fn probed(&mut self, input: Option<&Input>) {
        if *self.ready.borrow() {
            return;
        }
        if let Some(
            Input::PingOk { group, addr }
            | Input::Info { group, addr, .. }
            | Input::LinkDown { group, addr, .. },
        ) = input
        {
            self.probing.remove(&(group.clone(), addr.clone()));
        }
        if self.probing.is_empty() {
            tracing::info!("ready: every configured instance probed once");
            crate::metrics::set_ready(true);
            self.ready.send_replace(true);
        }
    }

    /// A group's epoch and the instance a failover step concerns when the
    /// step itself names none: the replica being promoted, else the master.
    fn subject(&self, group: &str) -> (u64, Option<Addr>) {
        self.core.groups().get(group).map_or((0, None), |g| {
            let instance = g
                .failover
                .as_ref()
                .map_or_else(|| g.master.clone(), |f| f.promoted.clone());
            (g.epoch, Some(instance))
        })
    }

    fn execute(&mut self, outputs: Vec<Output>) -> Result<(), RuntimeError> {
        let mut topology_changed = false;
        for output in outputs {
            match output {
                Output::Persist { group, state } => {
                    self.state.groups.insert(group, state);
                    self.file
                        .save_with(&self.state, self.runtime_config.as_ref())?;
                }
                Output::Forget { group } => {
                    self.links.retain(|(g, _), _| *g != group);
                    self.urgent.remove(&group);
                    self.state.groups.remove(&group);
                    self.file
                        .save_with(&self.state, self.runtime_config.as_ref())?;
                    topology_changed = true;
                }
                Output::Unwatch { group, addr } => {
                    self.links.remove(&(group, addr));
                }
                Output::Send {
                    group,
                    to,
                    token,
                    command,
                } => {
                    let (epoch, _) = self.subject(&group);
                    tracing::info!(group = %group, epoch, instance = %to, ?command, "sending");
                    match self.links.get(&(group.clone(), to.clone())) {
                        Some(link) => {
                            let _ = link.send(Job { token, command });
                        }
                        None => tracing::warn!(group = %group, instance = %to, "no link"),
                    }
                }
                Output::Event(e) => {
                    crate::metrics::event(&e);
                    match &e.group {
                        Some(group) => {
                            let (epoch, subject) = self.subject(group);
                            let instance = e.instance().or(subject);
                            let instance = instance.as_ref().map(ToString::to_string);
                            tracing::info!(
                                group = %group,
                                epoch,
                                instance = instance.as_deref().unwrap_or(""),
                                channel = e.channel,
                                "{}",
                                e.payload
                            );
                        }
                        None => tracing::info!(channel = e.channel, "{}", e.payload),
                    }
                    let _ = self.events.send(e);
                    // Down/up flags show in the topology too.
                    topology_changed = true;
                }
                Output::Topology { .. } => topology_changed = true,
                Output::Watch { group, addr } => self.watch(group, addr),
                Output::Log { group, message } => {
                    let (epoch, instance) = self.subject(&group);
                    let instance = instance.as_ref().map(ToString::to_string);
                    tracing::warn!(
                        group = %group,
                        epoch,
                        instance = instance.as_deref().unwrap_or(""),
                        "{message}"
                    );
                }
            }
        }
        for (group, epoch, result) in self.observer.failovers(&self.core, Instant::now()) {
            let (_, master) = self.subject(&group);
            let instance = master.as_ref().map(ToString::to_string);
            tracing::info!(
                group = %group,
                epoch,
                instance = instance.as_deref().unwrap_or(""),
                ?result,
                "failover ended"
            );
        }
        for (name, g) in self.core.groups() {
            let trouble = g.failover.is_some() || g.master_instance().is_none_or(|m| m.sdown);
            if let Some(tx) = self.urgent.get(name) {
                tx.send_if_modified(|u| std::mem::replace(u, trouble) != trouble);
            }
        }
        if topology_changed || self.refreshed.elapsed() >= VIEW_REFRESH {
            // Changes notify watchers; the periodic refresh only updates
            // ages (last reply, INFO) that `SENTINEL MASTER` reports.
            self.refreshed = Instant::now();
            self.observer.gauges(&self.core);
            let v = Arc::new(view(&self.core));
            self.topology.send_if_modified(|t| {
                let changed = advertised_differs(t, &v);
                *t = v;
                changed
            });
        }
        Ok(())
    }

    fn watch(&mut self, group: String, addr: Addr) {
        let key = (group.clone(), addr.clone());
        if self.links.contains_key(&key) {
            return;
        }
        let Some(g) = self.config.group(&group) else {
            return;
        };
        let urgent = self
            .urgent
            .entry(group.clone())
            .or_insert_with(|| watch::channel(false).0)
            .subscribe();
        let spec = LinkSpec {
            group,
            addr,
            down_after: g.down_after,
            auth_user: g.auth_user.clone(),
            auth_pass: g.auth_pass.clone(),
            urgent,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(link::run(spec, rx, self.inputs.0.clone()));
        self.links.insert(key, tx);
    }
}

/// The advertised topology of `core`.
pub fn view(core: &Core) -> Topology {
    Topology {
        tilt: core.breaker_tripped(),
        groups: core
            .groups()
            .iter()
            .map(|(name, g)| {
                let master = g.master_instance();
                let advertised = || {
                    g.instances
                        .values()
                        .filter(|i| i.addr != g.master && !i.demoted)
                };
                let failover_state = g.failover.as_ref().map(|f| match f.phase {
                    FailoverPhase::SendNoOne => "send_slaveof_noone",
                    FailoverPhase::Coordinated | FailoverPhase::WaitPromotion => "wait_promotion",
                    FailoverPhase::Reconfiguring => "reconf_slaves",
                });
                let master_details = master.map_or_else(
                    || details(&core::Instance::placeholder(g.master.clone())),
                    details,
                );
                (
                    name.clone(),
                    GroupView {
                        epoch: g.config_epoch,
                        master: g.master.clone(),
                        master_down: master.is_some_and(|m| m.sdown),
                        failover_in_progress: g.failover.is_some(),
                        replicas: advertised().map(details).collect(),
                        quorum: g.spec.quorum,
                        down_after: g.spec.down_after,
                        failover_timeout: g.spec.failover_timeout,
                        parallel_syncs: g.spec.parallel_syncs,
                        odown: g.odown,
                        failover_state,
                        master_details,
                    },
                )
            })
            .collect(),
    }
}

fn details(i: &core::Instance) -> InstanceView {
    let info = i.info.as_ref();
    InstanceView {
        addr: i.addr.clone(),
        run_id: info.map(|x| x.run_id.clone()).unwrap_or_default(),
        down: i.sdown,
        disconnected: i.failure.is_some(),
        last_ok: i.last_ok,
        info_at: i.info_at,
        reports_master: info.is_some_and(|x| matches!(x.role, core::Role::Master)),
        role_since: i.role_since,
        replica_of: info.and_then(|x| match &x.role {
            core::Role::Replica {
                master,
                link_up,
                link_down_secs,
                ..
            } => Some((
                master.clone(),
                *link_up,
                link_down_secs.unwrap_or(0).saturating_mul(1000),
            )),
            core::Role::Master => None,
        }),
        priority: info.map_or(100, |x| x.priority),
        offset: info.map_or(0, |x| x.offset),
    }
}
