//! Running the daemon: the runtime, the Sentinel, index and admin
//! listeners, and graceful shutdown on SIGTERM/SIGINT. Logging is set up
//! in [`crate::telemetry`].
//!
//! Every task the daemon starts is tracked (`TaskTracker`) and stops when
//! one `CancellationToken` is cancelled. The runtime is supervised: if it
//! ends by itself — an error or a panic — the error is logged, every
//! listener is stopped at once (nothing keeps answering from a topology no
//! one updates), and [`Daemon::wait`] returns the error so the process
//! exits non-zero and its supervisor (systemd, Kubernetes) restarts it.

use std::net::{IpAddr, SocketAddr};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::runtime::{self, Handle};
use crate::{http, index, metrics, sentinel};

/// Errors that stop the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The runtime failed (state file).
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
    /// The runtime ended by itself (a panic, or a stop nobody asked for).
    #[error("the runtime died: {0}")]
    RuntimeDied(String),
    /// The admin port's credentials could not be read.
    #[error("admin auth: {0}")]
    AdminAuth(#[from] http::auth::AuthError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A bind address is not an IP address.
    #[error("bind address {0:?} is not an IP address")]
    BadBind(String),
    /// The TLS certificates, key or CA could not be used.
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

/// The addresses a port listens on: every `bind` address, or all
/// interfaces.
fn listen_addrs(config: &Config, port: u16) -> Result<Vec<SocketAddr>, DaemonError> {
    if config.bind.is_empty() {
        return Ok(vec![SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port)]);
    }
    config
        .bind
        .iter()
        .map(|b| {
            let b = b.trim_start_matches('-');
            b.parse::<IpAddr>()
                .map(|ip| SocketAddr::new(ip, port))
                .map_err(|_| DaemonError::BadBind(b.to_string()))
        })
        .collect()
}

/// Binds `port` on every listen address with `bind` (port 0: any free
/// port).
async fn bind_port<F, Fut>(
    config: &Config,
    port: u16,
    bind: F,
) -> Result<Vec<tokio::net::TcpListener>, DaemonError>
where
    F: Fn(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = std::io::Result<tokio::net::TcpListener>>,
{
    let mut listeners = Vec::new();
    for addr in listen_addrs(config, port)? {
        let l = bind(addr)
            .await
            .map_err(|source| DaemonError::Bind { addr, source })?;
        listeners.push(l);
    }
    Ok(listeners)
}

/// The listeners of an index or admin port, or `None` when the port was
/// left at its default and another process (typically a second daemon on
/// the host, started from an ordinary `sentinel.conf` that differs only in
/// `port`) already holds it: that port is then off, with a warning, as
/// two sentinels with different `port` lines both start. A port that was
/// asked for (`directive` in the file, a flag, the environment) and cannot
/// be bound stays an error.
fn unless_taken(
    bound: Result<Vec<tokio::net::TcpListener>, DaemonError>,
    given: bool,
    directive: &str,
) -> Result<Option<Vec<tokio::net::TcpListener>>, DaemonError> {
    match bound {
        Err(DaemonError::Bind { addr, source })
            if !given && source.kind() == std::io::ErrorKind::AddrInUse =>
        {
            tracing::warn!(
                "{directive} is off: its default {addr} is taken (another Valkyrie on this \
                 host?); set '{directive}' in the configuration to choose a free one"
            );
            Ok(None)
        }
        other => other.map(Some),
    }
}

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    /// Handles to the runtime.
    pub handle: Handle,
    /// The Sentinel port's actual addresses (useful with port 0).
    pub sentinel_addrs: Vec<SocketAddr>,
    /// The Sentinel TLS port's actual addresses (empty without
    /// `tls-port`).
    pub tls_addrs: Vec<SocketAddr>,
    /// The admin port's actual addresses (empty when disabled).
    pub admin_addrs: Vec<SocketAddr>,
    /// The index port's actual addresses (empty when disabled).
    pub index_addrs: Vec<SocketAddr>,
    /// The index server's counters.
    pub index_stats: std::sync::Arc<index::Stats>,
    cancel: CancellationToken,
    tasks: TaskTracker,
    ended: Option<oneshot::Receiver<Result<(), DaemonError>>>,
}

impl Daemon {
    /// Starts the runtime and the listeners.
    pub async fn start(mut config: Config) -> Result<Daemon, DaemonError> {
        // Certificates first: a daemon that cannot use them never listens.
        let tls = match config.tls.enabled() {
            true => Some(crate::tls::TlsContext::load(&config.tls)?),
            false => None,
        };
        // As Valkey: `port 0` beside a TLS port means no plain-text port.
        let listeners = match (config.port, config.tls.port) {
            (0, Some(_)) => Vec::new(),
            (port, _) => bind_port(&config, port, sentinel::bind).await?,
        };
        let tls_listeners = match config.tls.port {
            None => Vec::new(),
            Some(port) => bind_port(&config, port, sentinel::bind).await?,
        };
        if let (Some(0), Some(l)) = (config.tls.port, tls_listeners.first()) {
            // Any free port was asked for: hellos announce the one taken.
            config.tls.port = l.local_addr().ok().map(|a| a.port());
        }
        // For these two, port 0 disables the listener.
        let index_listeners = match config.index_port {
            0 => Vec::new(),
            port => {
                let bound = bind_port(&config, port, index::bind).await;
                match unless_taken(bound, config.index_port_given, "index-port")? {
                    Some(listeners) => listeners,
                    None => {
                        config.index_port = 0;
                        Vec::new()
                    }
                }
            }
        };
        // `admin-bind`, when given, replaces `bind` for the admin port.
        let admin_bind = Config {
            bind: match config.admin_bind.is_empty() {
                true => config.bind.clone(),
                false => config.admin_bind.clone(),
            },
            ..Config::default()
        };
        let admin_listeners = match config.admin_port {
            0 => Vec::new(),
            port => {
                let bound = bind_port(&admin_bind, port, http::bind).await;
                match unless_taken(bound, config.admin_port_given, "admin-port")? {
                    Some(listeners) => listeners,
                    None => {
                        config.admin_port = 0;
                        Vec::new()
                    }
                }
            }
        };
        let admin_auth = http::auth::Auth::load(
            config.admin_auth_token_file.as_deref(),
            config.admin_auth_basic_file.as_deref(),
        )?
        .map(std::sync::Arc::new);
        // Installed before the runtime starts, so its first gauges land.
        let recorder = (!admin_listeners.is_empty()).then(|| {
            let recorder = metrics::install(&[
                #[cfg(feature = "kubernetes")]
                crate::kube::metrics::EXTENSION,
            ]);
            metrics::set_ready(false);
            recorder
        });
        // As Valkey: the open-file limit raised so `maxclients` fits, or
        // `maxclients` lowered to what does.
        let maxclients = crate::listen::adjust_nofile(config.maxclients);
        let index_max_per_address = config.index_max_per_address;
        // What the Sentinel clients and index subscribers may hold
        // together; recounted below as the links change.
        let nofile = crate::listen::budget::nofile();
        let budget = crate::listen::ConnectionLimit::new(crate::listen::budget::clients(nofile, 0));
        // The Sentinel port's clients, counters and ids: this daemon's
        // own, shared by its listen addresses.
        let shared = std::sync::Arc::new(sentinel::connection::Shared::new(
            std::sync::Arc::new(security(&config)),
            config.pubsub_limit,
            maxclients,
            Some(budget.clone()),
        ));
        let cancel = CancellationToken::new();
        let tasks = TaskTracker::new();
        if let Some(tls) = &tls {
            tasks.spawn(tls.clone().watch(cancel.clone()));
        }
        let outbound = tls
            .clone()
            .filter(|_| config.tls.replication)
            .map(crate::tls::Outbound::new);
        let index_tls = tls.clone().filter(|_| config.tls.index);
        let admin_tls = tls.clone().filter(|_| config.tls.admin);
        let (handle, task) =
            runtime::start_with_tls(config, outbound, cancel.clone().cancelled_owned()).await?;
        let (ended_tx, ended) = oneshot::channel();
        tasks.spawn(supervise(task, cancel.clone(), ended_tx));
        let mut sentinel_addrs = Vec::new();
        let mut tls_addrs = Vec::new();
        let plain = listeners.into_iter().map(|l| (l, None));
        let secure = tls_listeners.into_iter().map(|l| (l, tls.clone()));
        for (l, tls) in plain.chain(secure) {
            if let Ok(a) = l.local_addr() {
                if tls.is_some() {
                    tracing::info!("Sentinel protocol over TLS on {a}");
                    tls_addrs.push(a);
                } else {
                    tracing::info!("Sentinel protocol on {a}");
                    sentinel_addrs.push(a);
                }
            }
            let h = handle.clone();
            let sh = shared.clone();
            let stop = cancel.clone();
            tasks.spawn(async move {
                tokio::select! {
                    () = sentinel::serve(l, h, sh, tls) => {}
                    _ = stop.cancelled() => {}
                }
            });
        }
        // One publication for every index listener and the status page.
        let feed = index::spawn_feed(handle.topology.clone());
        let index_stats = std::sync::Arc::new(index::Stats::default());
        let index_limits = index::Limits {
            max_per_address: index_max_per_address,
            ..index::Limits::default()
        };
        let index_admission = index::Admission::within(
            &index_limits,
            crate::listen::ConnectionLimit::within(index_limits.max_subscribers, budget.clone()),
        );
        tasks.spawn(keep_budget(
            handle.topology.clone(),
            budget.clone(),
            nofile,
            cancel.clone(),
        ));
        let mut index_addrs = Vec::new();
        for l in index_listeners {
            if let Ok(a) = l.local_addr() {
                tracing::info!("index protocol on {a}");
                index_addrs.push(a);
            }
            let h = handle.clone();
            let stats = index_stats.clone();
            let admission = index_admission.clone();
            let stop = cancel.clone();
            let tls = index_tls.clone();
            let feed = feed.clone();
            tasks.spawn(async move {
                let served =
                    index::serve_limited(l, feed, &h.myid, index_limits, stats, admission, tls);
                tokio::select! {
                    () = served => {}
                    _ = stop.cancelled() => {}
                }
            });
        }
        let admin_addrs = match recorder {
            Some(recorder) => {
                let admin = AdminParts {
                    listeners: admin_listeners,
                    recorder,
                    tls: admin_tls,
                    auth: admin_auth,
                    published: feed.first,
                };
                start_admin(admin, &handle, &cancel, &tasks)
            }
            None => Vec::new(),
        };
        Ok(Daemon {
            handle,
            sentinel_addrs,
            tls_addrs,
            admin_addrs,
            index_addrs,
            index_stats,
            cancel,
            tasks,
            ended: Some(ended),
        })
    }

    /// Resolves when a client asked the daemon to exit (`SHUTDOWN`).
    pub async fn shutdown_requested(&self) {
        self.handle.shutdown.cancelled().await;
    }

    /// Resolves only if the runtime ended by itself (an error or a panic),
    /// with that error; every listener has been stopped by then. Call
    /// [`Daemon::stop`] afterwards to wait for the rest.
    pub async fn wait(&mut self) -> DaemonError {
        let result = match self.ended.as_mut() {
            Some(ended) => ended.await,
            None => return std::future::pending().await,
        };
        self.ended = None;
        match result {
            Ok(Err(e)) => e,
            Ok(Ok(())) | Err(_) => DaemonError::RuntimeDied("stopped unexpectedly".into()),
        }
    }

    /// Stops everything and waits for the runtime to finish; its error,
    /// or a panic, is returned.
    pub async fn stop(mut self) -> Result<(), DaemonError> {
        self.cancel.cancel();
        let result = match self.ended.take() {
            Some(ended) => ended
                .await
                .unwrap_or_else(|_| Err(DaemonError::RuntimeDied("supervisor lost".into()))),
            None => Ok(()),
        };
        self.tasks.close();
        // Listeners end at once; bounded all the same.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.tasks.wait()).await;
        result
    }
}

/// Waits for the runtime task. Stopped on request: its result. Ended by
/// itself — an error, a panic, or a return nobody asked for — it is the
/// daemon's end: logged, and every listener is stopped (cancelled) so
/// nothing answers from a topology the runtime no longer updates.
async fn supervise(
    task: tokio::task::JoinHandle<Result<(), runtime::RuntimeError>>,
    cancel: CancellationToken,
    ended: oneshot::Sender<Result<(), DaemonError>>,
) {
    let joined = task.await;
    let asked = cancel.is_cancelled();
    let result = match joined {
        Ok(Ok(())) if asked => Ok(()),
        Ok(Ok(())) => Err(DaemonError::RuntimeDied("stopped unexpectedly".into())),
        Ok(Err(e)) => Err(DaemonError::Runtime(e)),
        Err(e) if e.is_panic() => Err(DaemonError::RuntimeDied("panicked".into())),
        Err(e) => Err(DaemonError::RuntimeDied(e.to_string())),
    };
    if let Err(e) = &result {
        tracing::error!("{e}: stopping every listener; the daemon exits");
    }
    cancel.cancel();
    let _ = ended.send(result);
}

/// Serves the admin port on `listeners` and runs the metrics recorder's
/// upkeep, until `stop`. The recorder is installed only when the admin
/// port is enabled: otherwise nothing would render or drain it.
fn start_admin(
    parts: AdminParts,
    handle: &Handle,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
) -> Vec<SocketAddr> {
    let AdminParts {
        listeners,
        recorder,
        tls,
        auth,
        published,
    } = parts;
    let plans = crate::plan::Plans::new(handle.clone());
    let state = http::AdminState {
        metrics: recorder,
        ready: handle.ready.clone(),
        health: handle.health.clone(),
        tls,
        status: Some(http::hub::Hub::start(
            handle.topology.clone(),
            published,
            &handle.events,
            Some(plans.watch()),
        )),
        auth,
        plans: Some(plans),
    };
    let stop = cancel.clone();
    let upkeep = http::upkeep(state.metrics.clone());
    tasks.spawn(async move {
        tokio::select! {
            _ = upkeep => {}
            _ = stop.cancelled() => {}
        }
    });
    let mut addrs = Vec::new();
    for l in listeners {
        if let Ok(a) = l.local_addr() {
            tracing::info!("admin HTTP (status page, /api/v1, /metrics, /healthz, /readyz) on {a}");
            addrs.push(a);
        }
        let state = state.clone();
        let stop = cancel.clone();
        tasks.spawn(async move {
            tokio::select! {
                () = http::serve(l, state, http::Limits::default()) => {}
                _ = stop.cancelled() => {}
            }
        });
    }
    addrs
}

/// What the admin port is made of.
struct AdminParts {
    listeners: Vec<tokio::net::TcpListener>,
    recorder: metrics_exporter_prometheus::PrometheusHandle,
    tls: Option<std::sync::Arc<crate::tls::TlsContext>>,
    auth: Option<std::sync::Arc<http::auth::Auth>>,
    /// The index port's publication, which the status page shows.
    published: tokio::sync::watch::Receiver<std::sync::Arc<index::publish::Published>>,
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {}
                _ = i.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The Sentinel port's users: from the configuration, or as last changed
/// by `ACL SETUSER`/`DELUSER` when the state file says so (the runtime
/// reads the rest of that file; an unreadable file stops it there).
fn security(config: &Config) -> sentinel::auth::Security {
    let saved = crate::state::StateFile::in_dir(&config.dir)
        .load_saved()
        .ok()
        .flatten()
        .and_then(|s| s.config)
        .and_then(|c| c.acl);
    match saved {
        Some(acl) => {
            let mut c = config.clone();
            c.acl = Some(acl);
            sentinel::auth::Security::from_config(&c)
        }
        None => sentinel::auth::Security::from_config(config),
    }
}

/// Keeps the client budget at what the open-file limit leaves once the
/// links of the current topology are counted (`listen::budget`).
async fn keep_budget(
    mut topology: tokio::sync::watch::Receiver<std::sync::Arc<crate::topology::Topology>>,
    budget: std::sync::Arc<crate::listen::ConnectionLimit>,
    nofile: u64,
    stop: CancellationToken,
) {
    loop {
        let links = topology.borrow_and_update().link_descriptors();
        let clients = crate::listen::budget::clients(nofile, links);
        if clients != budget.max() {
            tracing::debug!(links, clients, "descriptor budget for clients");
            budget.set_max(clients);
        }
        tokio::select! {
            changed = topology.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = stop.cancelled() => return,
        }
    }
}
