//! Running the daemon: logging, the runtime, the Sentinel and index
//! listeners, and graceful shutdown on SIGTERM/SIGINT.

use std::net::{IpAddr, SocketAddr};

use tokio::sync::watch;

use crate::config::Config;
use crate::runtime::{self, Handle};
use crate::{index, sentinel};

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

/// Sets up logging: human text, or one JSON object per line.
pub fn init_logging(level: &str, json: bool) {
    let filter = match level {
        "debug" => "valkyrie=debug,info",
        "verbose" | "notice" => "info",
        "warning" => "warn",
        "nothing" => "off",
        other => other,
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("VALKYRIE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// The addresses the Sentinel port listens on.
fn sentinel_addrs(config: &Config) -> Result<Vec<SocketAddr>, DaemonError> {
    if config.bind.is_empty() {
        return Ok(vec![SocketAddr::new(
            IpAddr::from([0, 0, 0, 0]),
            config.port,
        )]);
    }
    config
        .bind
        .iter()
        .map(|b| {
            let b = b.trim_start_matches('-');
            b.parse::<IpAddr>()
                .map(|ip| SocketAddr::new(ip, config.port))
                .map_err(|_| DaemonError::BadBind(b.to_string()))
        })
        .collect()
}

/// The addresses the index port listens on: the Sentinel port's, with
/// `index-port`; none when it is 0.
fn index_addrs(config: &Config) -> Result<Vec<SocketAddr>, DaemonError> {
    if config.index_port == 0 {
        return Ok(Vec::new());
    }
    Ok(sentinel_addrs(config)?
        .into_iter()
        .map(|a| SocketAddr::new(a.ip(), config.index_port))
        .collect())
}

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    /// Handles to the runtime.
    pub handle: Handle,
    /// The Sentinel port's actual addresses (useful with port 0).
    pub sentinel_addrs: Vec<SocketAddr>,
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
        let addrs = sentinel_addrs(&config)?;
        let mut listeners = Vec::new();
        for addr in addrs {
            let l = sentinel::bind(addr)
                .await
                .map_err(|source| DaemonError::Bind { addr, source })?;
            listeners.push(l);
        }
        let mut index_listeners = Vec::new();
        for addr in index_addrs(&config)? {
            let l = index::bind(addr)
                .await
                .map_err(|source| DaemonError::Bind { addr, source })?;
            index_listeners.push(l);
        }
        let security = std::sync::Arc::new(sentinel::auth::Security::from_config(&config));
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
            let sec = security.clone();
            let mut stop_rx = stop.subscribe();
            tokio::spawn(async move {
                tokio::select! {
                    r = sentinel::serve(l, h, sec, maxclients) => {
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
        Ok(Daemon {
            handle,
            sentinel_addrs,
            index_addrs,
            index_stats,
            stop,
            task,
        })
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
