//! Running the daemon: logging, the runtime, the Sentinel listener, and
//! graceful shutdown on SIGTERM/SIGINT.

use std::net::{IpAddr, SocketAddr};

use tokio::sync::watch;

use crate::config::Config;
use crate::runtime::{self, Handle};
use crate::sentinel;

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

/// The tracing filter for a Sentinel `loglevel`.
fn level_filter(level: &str) -> tracing_subscriber::EnvFilter {
    let directive = match level {
        "debug" => "valkyrie=debug,info",
        "verbose" | "notice" => "info",
        "warning" => "warn",
        "nothing" => "off",
        other => other,
    };
    tracing_subscriber::EnvFilter::new(directive)
}

type Reload = Box<dyn Fn(&str) + Send + Sync>;

/// Changes the log level at runtime (`SENTINEL CONFIG SET loglevel`).
static RELOAD: std::sync::OnceLock<Reload> = std::sync::OnceLock::new();

/// Sets up logging: human text, or one JSON object per line. `VALKYRIE_LOG`
/// (an `EnvFilter` directive) wins over `level`, and then also over later
/// `SENTINEL CONFIG SET loglevel`.
pub fn init_logging(level: &str, json: bool) {
    use tracing_subscriber::prelude::*;
    let from_env = tracing_subscriber::EnvFilter::try_from_env("VALKYRIE_LOG").ok();
    let fixed = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| level_filter(level));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let installed = if json {
        registry.with(fmt.json()).try_init()
    } else {
        registry.with(fmt).try_init()
    };
    if installed.is_ok() && !fixed {
        let _ = RELOAD.set(Box::new(move |level| {
            let _ = handle.reload(level_filter(level));
        }));
    }
}

/// Applies a Sentinel `loglevel` to the running logger, if logging was set
/// up by [`init_logging`] without `VALKYRIE_LOG`.
pub fn apply_loglevel(level: &str) {
    if let Some(reload) = RELOAD.get() {
        reload(level);
    }
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

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    /// Handles to the runtime.
    pub handle: Handle,
    /// The Sentinel port's actual addresses (useful with port 0).
    pub sentinel_addrs: Vec<SocketAddr>,
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
        let shared = std::sync::Arc::new(sentinel::connection::Shared {
            security: std::sync::Arc::new(sentinel::auth::Security::from_config(&config)),
            registry: Default::default(),
            pubsub_limit: config.pubsub_limit,
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
        Ok(Daemon {
            handle,
            sentinel_addrs,
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
