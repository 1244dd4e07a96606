//! Running the daemon: the runtime, the Sentinel, index and admin
//! listeners, and graceful shutdown on SIGTERM/SIGINT. Logging is set up
//! in [`crate::telemetry`].

use std::net::{IpAddr, SocketAddr};

use tokio::sync::watch;

use crate::config::Config;
use crate::runtime::{self, Handle};
use crate::{admin, index, metrics, sentinel};

/// Errors that stop the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The runtime failed (state file).
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
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

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    /// Handles to the runtime.
    pub handle: Handle,
    /// The Sentinel port's actual addresses (useful with port 0).
    pub sentinel_addrs: Vec<SocketAddr>,
    /// The admin port's actual addresses (empty when disabled).
    pub admin_addrs: Vec<SocketAddr>,
    /// The index port's actual addresses (empty when disabled).
    pub index_addrs: Vec<SocketAddr>,
    /// The index server's counters.
    pub index_stats: std::sync::Arc<index::Stats>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), runtime::RuntimeError>>,
}

impl Daemon {
    /// Starts the runtime and the listeners.
    pub async fn start(config: Config) -> Result<Daemon, DaemonError> {
        let listeners = bind_port(&config, config.port, sentinel::bind).await?;
        // For these two, port 0 disables the listener.
        let index_listeners = match config.index_port {
            0 => Vec::new(),
            port => bind_port(&config, port, index::bind).await?,
        };
        let admin_listeners = match config.admin_port {
            0 => Vec::new(),
            port => bind_port(&config, port, admin::bind).await?,
        };
        // Installed before the runtime starts, so its first gauges land.
        let recorder = (!admin_listeners.is_empty()).then(|| {
            let recorder = metrics::install();
            metrics::set_ready(false);
            recorder
        });
        let shared = std::sync::Arc::new(sentinel::connection::Shared {
            security: std::sync::Arc::new(security(&config)),
            registry: Default::default(),
            pubsub_limit: config.pubsub_limit,
            maxclients: config.maxclients,
        });
        let maxclients = config.maxclients;
        let (stop, mut stop_rx) = watch::channel(false);
        let (handle, task) = runtime::start(config, async move {
            let _ = stop_rx.wait_for(|s| *s).await;
        })
        .await?;
        let mut sentinel_addrs = Vec::new();
        for l in listeners {
            if let Ok(a) = l.local_addr() {
                sentinel_addrs.push(a);
            }
            let h = handle.clone();
            let sh = shared.clone();
            let mut stop_rx = stop.subscribe();
            tokio::spawn(async move {
                tokio::select! {
                    r = sentinel::serve(l, h, sh, maxclients) => {
                        if let Err(e) = r { tracing::error!("sentinel listener failed: {e}"); }
                    }
                    _ = stop_rx.wait_for(|s| *s) => {}
                }
            });
        }
        for a in &sentinel_addrs {
            tracing::info!("Sentinel protocol on {a}");
        }
        let index_stats = std::sync::Arc::new(index::Stats::default());
        let mut index_addrs = Vec::new();
        for l in index_listeners {
            if let Ok(a) = l.local_addr() {
                tracing::info!("index protocol on {a}");
                index_addrs.push(a);
            }
            let h = handle.clone();
            let stats = index_stats.clone();
            let mut stop_rx = stop.subscribe();
            tokio::spawn(async move {
                tokio::select! {
                    r = index::serve(l, h.topology.clone(), &h.myid, index::Limits::default(), stats) => {
                        if let Err(e) = r { tracing::error!("index listener failed: {e}"); }
                    }
                    _ = stop_rx.wait_for(|s| *s) => {}
                }
            });
        }
        let admin_addrs = match recorder {
            Some(recorder) => start_admin(admin_listeners, recorder, &handle, &stop),
            None => Vec::new(),
        };
        Ok(Daemon {
            handle,
            sentinel_addrs,
            admin_addrs,
            index_addrs,
            index_stats,
            stop,
            task,
        })
    }

    /// Resolves when a client asked the daemon to exit (`SHUTDOWN`).
    pub async fn shutdown_requested(&self) {
        self.handle.shutdown.notified().await;
    }

    /// Stops everything and waits for the runtime to finish.
    pub async fn stop(self) -> Result<(), DaemonError> {
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(r) => Ok(r?),
            Err(_) => Ok(()),
        }
    }
}

/// Serves the admin port on `listeners` and runs the metrics recorder's
/// upkeep, until `stop`. The recorder is installed only when the admin
/// port is enabled: otherwise nothing would render or drain it.
fn start_admin(
    listeners: Vec<tokio::net::TcpListener>,
    recorder: metrics_exporter_prometheus::PrometheusHandle,
    handle: &Handle,
    stop: &watch::Sender<bool>,
) -> Vec<SocketAddr> {
    let state = admin::AdminState {
        metrics: recorder,
        ready: handle.ready.clone(),
    };
    let mut stop_rx = stop.subscribe();
    let upkeep = admin::upkeep(state.metrics.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = upkeep => {}
            _ = stop_rx.wait_for(|s| *s) => {}
        }
    });
    let mut addrs = Vec::new();
    for l in listeners {
        if let Ok(a) = l.local_addr() {
            tracing::info!("admin HTTP (/metrics, /healthz, /readyz) on {a}");
            addrs.push(a);
        }
        let state = state.clone();
        let mut stop_rx = stop.subscribe();
        tokio::spawn(async move {
            tokio::select! {
                r = admin::serve(l, state, admin::Limits::default()) => {
                    if let Err(e) = r { tracing::error!("admin listener failed: {e}"); }
                }
                _ = stop_rx.wait_for(|s| *s) => {}
            }
        });
    }
    addrs
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
