//! The imperative shell around the core, and what the rest of the daemon
//! sees of it: the public types ([`Handle`], [`Health`], [`RuntimeError`])
//! and [`start`], which restores the state file, builds the core and spawns
//! the shell.
//!
//! The runtime is split by seam:
//!
//! - `shell.rs`: the actor — one select loop that feeds the core link
//!   results (drained in batches; a link failure the core already knows
//!   about is not fed to it again, so unreachable instances cost the other
//!   groups nothing), ticks and requests from the ports. It owns the core
//!   and three parts:
//!   - `persistence.rs`: the state file, the groups whose decisions are
//!     not written yet (held back), and `/healthz`'s view of it;
//!   - `links.rs`: the instance and peer links, the urgent-INFO flags,
//!     the `SENTINEL DEBUG` timers they read (`debug.rs` changes them) and
//!     the TLS material (`peering.rs`: which peer links, and the hellos);
//!   - `publication.rs`: what is shown — the topology's [`Advertiser`],
//!     the events, the gauges, the readiness latch ([`Handle::ready`]) and
//!     the role hook (`hooks.rs`);
//! - `execute.rs`: a short dispatcher handing each of the core's outputs,
//!   in order, to the part that owns what it acts on (a `Persist` is
//!   written before anything after it runs, and a group whose state
//!   cannot be written does not act until it can);
//! - `refusal.rs`: a failover or switchover held back, vetoed, given up
//!   or refused becomes a warning, a counter and a `valkyrie:failover-reason`
//!   event with a JSON payload;
//! - `handle.rs`: the [`Handle`] the ports hold, with the typed methods
//!   that send [`Request`]s (`requests.rs`: an operator's
//!   [`OperatorRequest`], a peer's [`PeerRequest`], a custom resource's
//!   [`ManagedRequest`], a role hook; [`SetChange`], [`Refusal`]) and wait
//!   for the answer; `request.rs` (and `managed.rs`, `hooks.rs` with the
//!   hook's types in `role_hook.rs`) is how the shell carries them out —
//!   configuration changes are saved before they are applied, and refused
//!   when they cannot be;
//! - `spec.rs`: a configured group in the core's terms.
//!
//! What the protocol servers are shown is the read side's
//! ([`crate::topology`]): the shell feeds its [`Advertiser`] the groups
//! each step changed.
//!
//! The runtime stops when its shutdown future resolves. Any other end —
//! an error, a panic — is the daemon's end: `daemon.rs` makes the process
//! exit non-zero rather than serve a topology nobody updates.

mod debug;
mod execute;
mod handle;
mod hooks;
mod links;
mod managed;
mod peering;
mod persistence;
mod publication;
mod refusal;
mod request;
mod requests;
mod role_hook;
mod route;
mod scripts;
mod shell;
mod spec;
#[cfg(test)]
mod tests;

pub use handle::{Handle, Health, RuntimeError, ScriptPolicy};
pub use persistence::SAVE_RETRY;
pub use requests::{ManagedRequest, OperatorRequest, PeerRequest, Refusal, Request, SetChange};
pub use role_hook::{HookFuture, MasterSwitch, ROLE_HOOK_WAIT, RoleHook, RouteFuture, RouteTo};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::core::Addr;
use crate::core::{Core, GroupSpec, GroupState, KnownPeer, Millis, Settings, State, Timers};
use crate::link;
use crate::metrics::CoreObserver;
use crate::state::StateFile;
use crate::topology::Advertiser;
use links::Links;
use persistence::Persistence;
use publication::Publication;
use shell::Shell;
use spec::spec;

/// The state to start from: the state file's, with what a sentinel's own
/// file says (`known-sentinel`, `current-epoch`, `config-epoch`,
/// `leader-epoch`) for every group the state file does not know yet — so
/// a sentinel replaced by Valkyrie keeps its peers and epochs.
fn seeded(restored: Option<State>, config: &Config) -> Option<State> {
    let mut state = restored.clone().unwrap_or_default();
    let mut seeded = false;
    for g in &config.groups {
        if state.groups.contains_key(&g.name)
            || (g.known_sentinels.is_empty() && g.config_epoch == 0 && g.leader_epoch == 0)
        {
            continue;
        }
        seeded = true;
        let known_peers: Vec<KnownPeer> = g
            .known_sentinels
            .iter()
            .map(|(runid, host, port)| KnownPeer {
                runid: runid.clone(),
                addr: Addr::new(host.clone(), *port),
            })
            .collect();
        state.groups.insert(
            g.name.clone(),
            GroupState {
                epoch: 0,
                config_epoch: g.config_epoch,
                master: Addr::new(g.host.clone(), g.port),
                demoted: Vec::new(),
                master_lost: None,
                paused: false,
                failover: None,
                leader: None,
                leader_epoch: g.leader_epoch,
                peered: !known_peers.is_empty(),
                replicas: Vec::new(),
                known_peers,
            },
        );
    }
    if restored.is_none() && config.current_epoch > 0 {
        seeded = true;
        state.current_epoch = config.current_epoch;
    }
    if seeded { Some(state) } else { restored }
}

/// What [`start`] returns: the handle, and the runtime's task.
pub type Started = (Handle, tokio::task::JoinHandle<Result<(), RuntimeError>>);

/// Starts the runtime with plain-text links; it runs until `shutdown`
/// resolves.
pub async fn start(
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Started, RuntimeError> {
    start_with_tls(config, None, shutdown).await
}

/// Starts the runtime; with `tls`, links to instances and peers speak TLS
/// (`tls-replication yes`).
pub async fn start_with_tls(
    mut config: Config,
    tls: Option<crate::tls::Outbound>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Started, RuntimeError> {
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
    let restored = seeded(saved.map(|s| s.state), &config);
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
    let (core, first) = Core::new(
        Settings {
            myid: myid.clone(),
            resolve_hostnames: config.resolve_hostnames,
            timers: Timers::default(),
        },
        specs,
        restored.as_ref(),
        0,
    );
    let labels = config
        .groups
        .iter()
        .filter_map(|g| Some((g.name.clone(), g.owner.labels()?.clone())))
        .collect();
    let advertiser = Advertiser::with_labels(&core, 0, labels);
    let topology_rx = advertiser.subscribe();
    let events_tx = crate::events::EventBus::new();
    let (requests_tx, requests_rx) = mpsc::channel(64);
    let (input_tx, input_rx) = mpsc::channel(link::INPUT_QUEUE);
    let (health_tx, health_rx) = watch::channel(Health::default());
    crate::metrics::set_state_file_writable(true);
    let probing: BTreeSet<(String, Addr)> = core
        .groups()
        .iter()
        .flat_map(|(name, g)| g.instances.keys().map(|a| (name.clone(), a.clone())))
        .collect();
    let (ready_tx, ready_rx) = watch::channel(false);
    let (timers_tx, timers_rx) = watch::channel(*core.timers());
    let texts = crate::link::InfoTexts::default();
    let resolved = crate::link::Resolved::default();
    let announce_hostnames = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(
        config.announce_hostnames,
    ));
    let tick = config
        .groups
        .iter()
        .map(|g| g.down_after / 20)
        .min()
        .unwrap_or(Duration::from_millis(100))
        .clamp(Duration::from_millis(5), Duration::from_millis(100));
    let scripts = scripts::runner(&config.dir, core.timers(), events_tx.clone())
        .map_err(RuntimeError::Scripts)?;
    let script_policy = ScriptPolicy {
        deny: config.deny_scripts_reconfig,
        dir: config.dir.clone(),
    };
    let mut shell = Shell {
        config,
        core,
        start,
        persistence: Persistence {
            file,
            runtime_config,
            state: restored.unwrap_or_default(),
            unsaved: BTreeSet::new(),
            dirty: false,
            health: health_tx,
        },
        links: Links {
            instances: BTreeMap::new(),
            urgent: BTreeMap::new(),
            timers: timers_tx,
            input_tx,
            tasks: TaskTracker::new(),
            peers: BTreeMap::new(),
            tls,
            group_tls: BTreeMap::new(),
            texts: texts.clone(),
            resolved: resolved.clone(),
        },
        publication: Publication {
            advertiser,
            events: events_tx.clone(),
            // The first refresh sets the gauges.
            gauges_set: start
                .checked_sub(publication::GAUGES_REFRESH)
                .unwrap_or(start),
            observer: CoreObserver::default(),
            probing,
            ready: ready_tx,
            role_hook: None,
            announce_hostnames: announce_hostnames.clone(),
        },
        routes: BTreeMap::new(),
        inputs: input_rx,
        jitter: crate::backoff::Rng::new(),
        panic_at: test_panic_at(),
        scripts: scripts.clone(),
    };
    shell.publication.probed(None);
    shell.execute(first).await;
    let now = shell.now();
    shell
        .publication
        .set_gauges(&shell.core, now, &shell.links.group_tls);
    let handle = Handle {
        topology: topology_rx,
        events: events_tx,
        requests: requests_tx,
        myid,
        start,
        shutdown: CancellationToken::new(),
        health: health_rx,
        timers: timers_rx,
        ready: ready_rx,
        texts,
        scripts,
        script_policy,
        crash_points: std::sync::Arc::default(),
        resolved,
        announce_hostnames: announce_hostnames.clone(),
    };
    let task = tokio::spawn(shell.run(tick, requests_rx, shutdown));
    Ok((handle, task))
}

/// Test hook, for the tests that check that a dead runtime ends the
/// process: `VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS=<ms>` makes the runtime
/// panic that long after it starts. Only in debug builds (the tests'):
/// a release binary never reads it.
#[cfg(not(debug_assertions))]
fn test_panic_at() -> Option<Millis> {
    None
}

/// See above: the debug build's hook.
#[cfg(debug_assertions)]
fn test_panic_at() -> Option<Millis> {
    let at = std::env::var("VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS").ok()?;
    let at = at.parse().ok()?;
    tracing::warn!(
        "VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS is set: the runtime will panic (test hook)"
    );
    Some(at)
}
