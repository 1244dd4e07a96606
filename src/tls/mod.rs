//! TLS for every port and every link, with certificates reloaded while
//! the daemon runs.
//!
//! This module owns the certificate material in use ([`TlsContext`]), its
//! reload, and the stream type the ports and links read and write
//! ([`stream::Stream`]). The settings come from [`crate::config::tls`];
//! rustls (with ring) does the TLS: no OpenSSL in the binary.
//!
//! **Reload.** [`TlsContext::watch`] reads the files every
//! [`POLL_EVERY`] and on SIGHUP. When their bytes differ from what is in
//! use (a write in place, an atomic rename, a Kubernetes Secret volume's
//! `..data` swap), new rustls configurations are built; new connections
//! take them at their handshake, connections already up keep theirs. A
//! file that does not build (unreadable, not PEM, a key that does not
//! match its certificate) is refused: the material in use stays, a warning
//! is logged and `valkyrie_tls_reloads_total{result="error"}` counts it —
//! once the broken content has stayed for [`SETTLE`], so the moment
//! between a rotation's certificate and its key being renamed is not
//! reported as a failure. A port is never left without a certificate.

mod check;
mod error;
pub mod group;
pub mod material;
pub mod stream;
#[cfg(test)]
mod tests;
mod verify;

pub use error::TlsError;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::config::TlsSettings;
pub use material::{CertInfo, Material, Sources};
pub use stream::Stream;

/// How often the files are read for changes.
pub const POLL_EVERY: Duration = Duration::from_millis(250);
/// How long a changed file set that does not build must stay unchanged
/// before it is reported as refused.
pub const SETTLE: Duration = Duration::from_secs(1);
/// The longest a TLS handshake may take, on a port or on a link.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate material in use and the settings it was built from.
#[derive(Debug)]
pub struct TlsContext {
    settings: TlsSettings,
    current: RwLock<Current>,
}

#[derive(Debug)]
struct Current {
    sources: Sources,
    material: Arc<Material>,
}

impl TlsContext {
    /// Reads and builds the material; an error here stops the daemon
    /// before it listens.
    pub fn load(settings: &TlsSettings) -> Result<Arc<TlsContext>, TlsError> {
        let sources = Sources::read(settings)?;
        let material = Arc::new(Material::build(settings, &sources)?);
        Ok(Arc::new(TlsContext {
            settings: settings.clone(),
            current: RwLock::new(Current { sources, material }),
        }))
    }

    /// The settings.
    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// The material in use now.
    pub fn material(&self) -> Arc<Material> {
        match self.current.read() {
            Ok(c) => c.material.clone(),
            Err(poisoned) => poisoned.into_inner().material.clone(),
        }
    }

    /// An acceptor with the material in use now, or `None` when no port
    /// serves TLS.
    pub fn acceptor(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.material()
            .server
            .clone()
            .map(tokio_rustls::TlsAcceptor::from)
    }

    /// Reads the files again and, when they changed and build, puts the
    /// new material in use. `Ok(true)`: new material in use; `Ok(false)`:
    /// nothing changed (unless `force`, which rebuilds even then).
    pub fn reload(&self, force: bool) -> Result<bool, TlsError> {
        let sources = Sources::read(&self.settings)?;
        self.replace(sources, force)
    }

    /// Material built from `sources` (bytes given, not read from files:
    /// a group's Secret).
    pub fn from_sources(settings: TlsSettings, sources: Sources) -> Result<TlsContext, TlsError> {
        let material = Arc::new(Material::build(&settings, &sources)?);
        Ok(TlsContext {
            settings,
            current: RwLock::new(Current { sources, material }),
        })
    }

    /// A context with no material yet: links using it fail their
    /// handshake until [`TlsContext::replace`] gives it some.
    pub fn empty(settings: TlsSettings) -> TlsContext {
        let material = Arc::new(Material {
            server: None,
            client: None,
            certs: Vec::new(),
        });
        TlsContext {
            settings,
            current: RwLock::new(Current {
                sources: Sources::default(),
                material,
            }),
        }
    }

    /// Builds `sources` and, when they differ from the material in use
    /// (or `force`), puts them in use for new connections; on error the
    /// material in use stays.
    pub fn replace(&self, sources: Sources, force: bool) -> Result<bool, TlsError> {
        if !force && self.in_use(&sources) {
            return Ok(false);
        }
        let material = Arc::new(Material::build_checked(
            &self.settings,
            &sources,
            now_unix(),
        )?);
        let mut current = match self.current.write() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        *current = Current { sources, material };
        Ok(true)
    }

    fn in_use(&self, sources: &Sources) -> bool {
        match self.current.read() {
            Ok(c) => c.sources == *sources,
            Err(poisoned) => poisoned.into_inner().sources == *sources,
        }
    }

    /// Reloads on every change of the files and on SIGHUP until `stop`,
    /// and keeps `valkyrie_tls_cert_expiry_seconds` current.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangup = signal(SignalKind::hangup()).ok();
        let mut tick = tokio::time::interval(POLL_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut refused = Refused::default();
        self.record_expiry();
        loop {
            let force = tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => false,
                Some(()) = async {
                    match hangup.as_mut() {
                        Some(h) => h.recv().await,
                        None => std::future::pending().await,
                    }
                } => true,
            };
            let context = self.clone();
            let attempt =
                tokio::task::spawn_blocking(move || context.reload(force).map_err(|e| (e, force)))
                    .await;
            match attempt {
                Ok(Ok(true)) => {
                    refused = Refused::default();
                    crate::metrics::tls_reloaded(true);
                    let m = self.material();
                    tracing::info!(
                        serial = m.server_serial().unwrap_or("-"),
                        "TLS certificates reloaded; new connections use them"
                    );
                }
                Ok(Ok(false)) => refused = Refused::default(),
                Ok(Err((e, forced))) => {
                    if refused.report(&e, forced) {
                        crate::metrics::tls_reloaded(false);
                        tracing::warn!("TLS reload refused, the certificates in use stay: {e}");
                    }
                }
                Err(e) => tracing::warn!("TLS reload task failed: {e}"),
            }
            self.record_expiry();
        }
    }

    #[allow(clippy::disallowed_methods)] // a certificate's expiry is wall-clock time
    fn record_expiry(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        for cert in &self.material().certs {
            crate::metrics::tls_cert_expiry(cert.role, &cert.path, cert.not_after - now);
        }
    }

    /// Connects TLS over `tcp` to `host` (a name or an IP address),
    /// checking the server's certificate against the CA and the name;
    /// `None` when links do not use TLS.
    pub fn connector(&self) -> Option<tokio_rustls::TlsConnector> {
        self.material()
            .client
            .clone()
            .map(tokio_rustls::TlsConnector::from)
    }
}

/// When a refused reload is reported: once per broken content, after it
/// stayed for [`SETTLE`] (at once when asked by SIGHUP).
#[derive(Debug, Default)]
struct Refused {
    error: Option<TlsError>,
    since: Option<tokio::time::Instant>,
    reported: bool,
}

impl Refused {
    fn report(&mut self, e: &TlsError, forced: bool) -> bool {
        let now = tokio::time::Instant::now();
        if self.error.as_ref() != Some(e) {
            *self = Refused {
                error: Some(e.clone()),
                since: Some(now),
                reported: false,
            };
        }
        let settled = self.since.is_some_and(|s| now.duration_since(s) >= SETTLE);
        if !self.reported && (forced || settled) {
            self.reported = true;
            return true;
        }
        false
    }
}

/// Links' TLS: the context whose client material they use, and the
/// handshake failures already logged.
#[derive(Clone, Debug)]
pub struct Outbound {
    context: Arc<TlsContext>,
    /// A group's own TLS: where its material comes from (for the error
    /// while there is none yet).
    source: Option<Arc<str>>,
    warned: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

/// Addresses whose last handshake failure is remembered (the map is
/// cleared when full: an address then warns once more).
const WARNED_MAX: usize = 4096;

impl Outbound {
    /// Links' TLS with `context`'s client material.
    pub fn new(context: Arc<TlsContext>) -> Outbound {
        Outbound {
            context,
            source: None,
            warned: Arc::default(),
        }
    }

    /// Links' TLS with `context`, the material of a group's own TLS from
    /// `source`.
    pub fn of_group(context: Arc<TlsContext>, source: &str) -> Outbound {
        Outbound {
            context,
            source: Some(source.into()),
            warned: Arc::default(),
        }
    }

    /// The context whose client material links use.
    pub fn context(&self) -> &Arc<TlsContext> {
        &self.context
    }

    /// Logs a handshake failure toward `addr` as a warning when it is new
    /// for that address (a link retries every second; the log says it
    /// once), else at debug level.
    pub fn warn_once(&self, addr: &impl std::fmt::Display, e: &HandshakeError) {
        let (key, text) = (addr.to_string(), e.to_string());
        let mut warned = match self.warned.lock() {
            Ok(w) => w,
            Err(poisoned) => poisoned.into_inner(),
        };
        if warned.get(&key) == Some(&text) {
            tracing::debug!(instance = %key, "{text}");
            return;
        }
        if warned.len() >= WARNED_MAX {
            warned.clear();
        }
        tracing::warn!(instance = %key, "{text}");
        warned.insert(key, text);
    }

    /// Forgets `addr`'s failure after a handshake succeeded.
    fn succeeded(&self, addr: &str) {
        if let Ok(mut warned) = self.warned.lock()
            && !warned.is_empty()
        {
            warned.remove(addr);
        }
    }

    /// Runs the TLS handshake over `tcp` toward `host` (its certificate
    /// must name it) on `port`, within `timeout`.
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<Stream, HandshakeError> {
        let connector = self.context.connector().ok_or_else(|| match &self.source {
            Some(source) => HandshakeError::NoMaterial(source.to_string()),
            None => HandshakeError::NotConfigured,
        })?;
        let name = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => ServerName::try_from(host.to_string())
                .map_err(|_| HandshakeError::Failed(format!("'{host}' is not a valid name")))?,
        };
        match tokio::time::timeout(timeout, connector.connect(name, tcp)).await {
            Err(_) => Err(HandshakeError::Timeout),
            Ok(Err(e)) => Err(HandshakeError::Failed(e.to_string())),
            Ok(Ok(s)) => {
                self.succeeded(&format!("{host}:{port}"));
                Ok(Stream::Client(Box::new(s)))
            }
        }
    }
}

/// Why a TLS handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// No answer in time.
    #[error("TLS handshake timed out")]
    Timeout,
    /// Refused or broken (bad certificate, wrong name, connection closed).
    #[error("TLS handshake failed: {0}")]
    Failed(String),
    /// TLS links are not configured.
    #[error("TLS links are not configured (tls-replication)")]
    NotConfigured,
    /// A group's own TLS material has not been read, or did not build.
    #[error("no usable TLS material from {0} yet")]
    NoMaterial(String),
}

/// Accepts a TLS connection over `tcp` with the material in use now,
/// within [`HANDSHAKE_TIMEOUT`]; failures are counted per `port`.
pub async fn accept(
    context: &TlsContext,
    tcp: TcpStream,
    port: &'static str,
) -> Result<Stream, HandshakeError> {
    let acceptor = context.acceptor().ok_or(HandshakeError::NotConfigured)?;
    let result = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Err(_) => Err(HandshakeError::Timeout),
        Ok(Err(e)) => Err(HandshakeError::Failed(e.to_string())),
        Ok(Ok(s)) => Ok(Stream::Server(Box::new(s))),
    };
    crate::metrics::tls_handshake(port, result.is_ok());
    result
}

/// Answers a connection refused at a port's limit with `message`, over
/// TLS on a TLS port (a plain-text error would reach a TLS client as a
/// broken handshake), then closes it. Bounded by [`HANDSHAKE_TIMEOUT`] and
/// one second for the write.
/// TLS refusals in flight (each holds its connection's descriptor for
/// its handshake); past [`MAX_REFUSING`] a connection is closed at once.
static REFUSING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// At most this many TLS refusals at once: a flood of connections past a
/// port's limit must not hold descriptors the budget did not count.
pub const MAX_REFUSING: usize = 8;

/// Turns a connection away from the accept loop itself, so refusals never
/// pile up as tasks holding descriptors: plain TCP gets `message` written
/// at once (a fresh socket's buffer takes it; at most 50 ms otherwise);
/// TLS gets a task doing the handshake first ([`refuse`]), at most
/// [`MAX_REFUSING`] at a time, past which the connection is just closed.
pub async fn turn_away(
    context: Option<Arc<TlsContext>>,
    tcp: TcpStream,
    port: &'static str,
    message: bytes::Bytes,
) {
    use std::sync::atomic::Ordering;
    if context.is_none() {
        let _ =
            tokio::time::timeout(Duration::from_millis(50), refuse(None, tcp, port, message)).await;
        return;
    }
    if REFUSING.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
        REFUSING.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    tokio::spawn(async move {
        refuse(context, tcp, port, message).await;
        REFUSING.fetch_sub(1, Ordering::AcqRel);
    });
}

/// Writes `message` (after the TLS handshake, with `context`) and closes.
pub async fn refuse(
    context: Option<Arc<TlsContext>>,
    tcp: TcpStream,
    port: &'static str,
    message: bytes::Bytes,
) {
    use tokio::io::AsyncWriteExt;
    let mut stream = match context {
        None => Stream::Plain(tcp),
        Some(context) => match accept(&context, tcp, port).await {
            Ok(s) => s,
            Err(_) => return,
        },
    };
    let write = async {
        stream.write_all(&message).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// Wall-clock time, for certificate validity (the only clock TLS reads).
#[allow(clippy::disallowed_methods)] // a certificate's window is wall-clock time
fn now_unix() -> rustls_pki_types::UnixTime {
    rustls_pki_types::UnixTime::now()
}
