//! `valkyrie watch`: subscribe to an index port and print every change,
//! for people (one block per change) or scripts (one JSON object per line).
//!
//! It reconnects when the connection drops (250 ms doubling to 5 s,
//! jittered, and back to 250 ms once subscribed again) and applies the protocol's
//! ordering rule ([`View`]) across reconnects and daemon restarts, so it
//! prints a change only once and never goes back to an older state. An
//! error is printed once, when it first happens (or differs from the
//! previous one), not at every attempt.
//!
//! With `--tls` ([`TlsOptions`]) it speaks TLS to an index port served
//! with `index-tls yes`: rustls checks the server's certificate against
//! `--cacert` and the name dialled (or `--sni`), and presents `--cert`
//! when given (`tls-auth-clients yes` asks for one). The files are read
//! again at every connection, so a rotated CA or client certificate is
//! used from the next reconnect on.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use valkyrie_protocol::index::{ClientError, GroupSnapshot, IndexClient, Outcome, Update, View};

use crate::backoff::Backoff;
use crate::config::TlsSettings;
use crate::tls::{HANDSHAKE_TIMEOUT, Material, Sources, TlsError};

/// First reconnect delay after the connection drops.
const RECONNECT_MIN: Duration = Duration::from_millis(250);
/// Longest reconnect delay.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Options of `valkyrie watch`.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// `host:port` of the index port.
    pub addr: String,
    /// Group names or globs; empty means every group.
    pub groups: Vec<String>,
    /// One JSON object per line instead of text.
    pub json: bool,
    /// Print the current state of the matching groups and exit.
    pub once: bool,
    /// TLS to the index port (`--tls`); `None`: plain TCP.
    pub tls: Option<TlsOptions>,
}

/// `--tls` and its files: what the server's certificate is checked
/// against, the client certificate, the name verified.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    settings: TlsSettings,
    name: ServerName<'static>,
}

impl TlsOptions {
    /// TLS toward `addr` (`host:port`), trusting the CAs of `ca_file`
    /// and `ca_dir` (at least one), presenting `cert` and `key` (both or
    /// neither), verifying `sni` or else the host of `addr` (an IP
    /// address against the certificate's IP SANs). Files are not read
    /// here: a bad combination or name is the only error.
    pub fn new(
        addr: &str,
        ca_file: Option<PathBuf>,
        ca_dir: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        sni: Option<&str>,
    ) -> Result<TlsOptions, String> {
        if ca_file.is_none() && ca_dir.is_none() {
            return Err("--tls needs --cacert (or --cacertdir)".into());
        }
        if cert.is_some() != key.is_some() {
            return Err("--cert and --key go together".into());
        }
        let name = match sni {
            Some(n) => server_name(n).map_err(|e| format!("--sni: {e}"))?,
            None => server_name(host_of(addr))
                .map_err(|e| format!("{e} (in --addr {addr}); name the server with --sni"))?,
        };
        let mut settings = TlsSettings::new();
        // The daemon's client side ("links") is what this is: the same
        // CA check, host check and client certificate.
        settings.replication = true;
        settings.verify_hostnames = true;
        settings.ca_cert_file = ca_file;
        settings.ca_cert_dir = ca_dir;
        settings.client_cert_file = cert;
        settings.client_key_file = key;
        Ok(TlsOptions { settings, name })
    }

    /// The name the server's certificate must hold.
    pub fn server_name(&self) -> &ServerName<'static> {
        &self.name
    }

    /// A connector built from the files as they are now.
    fn connector(&self) -> Result<tokio_rustls::TlsConnector, WatchError> {
        let sources = Sources::read(&self.settings).map_err(WatchError::Files)?;
        let material = Material::build(&self.settings, &sources).map_err(WatchError::Files)?;
        let config = material
            .client
            .ok_or(WatchError::Files(TlsError::Missing("--cacert")))?;
        Ok(tokio_rustls::TlsConnector::from(config))
    }
}

/// The host part of `host:port` or `[v6]:port`.
fn host_of(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        Some((host, _)) => host,
        None => addr,
    }
}

/// A DNS name, or an IP address (bare or in brackets), as rustls checks it.
fn server_name(name: &str) -> Result<ServerName<'static>, String> {
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    match bare.parse::<IpAddr>() {
        Ok(ip) => Ok(ServerName::IpAddress(ip.into())),
        Err(_) => ServerName::try_from(bare.to_string())
            .map_err(|_| format!("'{name}' is not a valid server name")),
    }
}

/// Why a connection of `valkyrie watch` failed.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The index protocol (or the socket under it) failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A file of `--cacert`, `--cacertdir`, `--cert` or `--key` could not
    /// be read or used.
    #[error("TLS files: {0}")]
    Files(TlsError),
    /// The TLS handshake failed: refused by either side, or no answer in
    /// time.
    #[error("TLS handshake with {addr} failed: {reason}")]
    Handshake {
        /// The address dialled.
        addr: String,
        /// rustls's reason.
        reason: String,
    },
}

/// The reconnect pace and the last error printed.
#[derive(Debug)]
struct Retry {
    backoff: Backoff,
    /// Printed already and not followed by a subscription since.
    last_error: Option<String>,
}

impl Retry {
    /// Subscribed: the next disconnection retries quickly again, and its
    /// error is printed even if it is the one printed before.
    fn subscribed(&mut self) {
        self.backoff.reset();
        self.last_error = None;
    }
}

/// Runs until interrupted (or, with `once`, after the first state).
pub async fn run(opts: WatchOptions) -> Result<(), WatchError> {
    let patterns: Vec<&str> = if opts.groups.is_empty() {
        vec!["*"]
    } else {
        opts.groups.iter().map(String::as_str).collect()
    };
    let mut view = View::new();
    let mut retry = Retry {
        backoff: Backoff::new(RECONNECT_MIN, RECONNECT_MAX, 20),
        last_error: None,
    };
    loop {
        let result = session(&opts, &patterns, &mut view, &mut retry).await;
        match result {
            Ok(()) => return Ok(()),
            Err(e) if opts.once => return Err(e),
            Err(e) => {
                let wait = retry.backoff.next_delay();
                let text = e.to_string();
                if retry.last_error.as_deref() != Some(text.as_str()) {
                    eprintln!(
                        "valkyrie watch: {text}; reconnecting in {wait:?}, then backing off \
                         up to {RECONNECT_MAX:?} (printed once until it changes)"
                    );
                    retry.last_error = Some(text);
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
}

async fn session(
    opts: &WatchOptions,
    patterns: &[&str],
    view: &mut View,
    retry: &mut Retry,
) -> Result<(), WatchError> {
    let Some(tls) = &opts.tls else {
        let client = IndexClient::connect(opts.addr.as_str()).await?;
        return follow(client, opts, patterns, view, retry).await;
    };
    // The files first: a broken one is reported as such, not as a
    // refused connection.
    let connector = tls.connector()?;
    let tcp = TcpStream::connect(opts.addr.as_str())
        .await
        .map_err(ClientError::Io)?;
    tcp.set_nodelay(true).map_err(ClientError::Io)?;
    let handshake_failed = |reason: String| WatchError::Handshake {
        addr: opts.addr.clone(),
        reason,
    };
    let stream =
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(tls.name.clone(), tcp))
            .await
        {
            Err(_) => {
                return Err(handshake_failed(format!(
                    "no answer in {HANDSHAKE_TIMEOUT:?}"
                )));
            }
            Ok(Err(e)) => return Err(handshake_failed(e.to_string())),
            Ok(Ok(s)) => s,
        };
    // In TLS 1.3 the server checks the client's certificate after the
    // client has finished its part of the handshake: a refusal (an alert)
    // arrives instead of the greeting.
    let client = match IndexClient::over(stream).await {
        Ok(c) => c,
        Err(ClientError::Io(e)) => match tls_error(&e) {
            Some(reason) => return Err(handshake_failed(reason)),
            None => return Err(ClientError::Io(e).into()),
        },
        Err(e) => return Err(e.into()),
    };
    follow(client, opts, patterns, view, retry).await
}

/// rustls's own error inside an I/O error of a TLS stream, as text.
fn tls_error(e: &std::io::Error) -> Option<String> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .map(rustls::Error::to_string)
}

async fn follow<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: IndexClient<S>,
    opts: &WatchOptions,
    patterns: &[&str],
    view: &mut View,
    retry: &mut Retry,
) -> Result<(), WatchError> {
    view.set_run(&client.greeting().run);
    client.watch(patterns).await?;
    retry.subscribed();
    if opts.once {
        // The answer to a PING comes after the snapshots the WATCH caused.
        client.ping().await?;
        while let Some(u) = client.pending() {
            show(opts, view, u);
        }
        return Ok(());
    }
    loop {
        let u = client.next().await?;
        show(opts, view, u);
    }
}

fn show(opts: &WatchOptions, view: &mut View, u: Update) {
    let line = match u {
        Update::Snapshot(s) => {
            let text = if opts.json { json(&s) } else { text(&s) };
            if view.apply(s) != Outcome::Changed {
                return;
            }
            text
        }
        Update::Gone(g) => {
            if !view.remove(&g) {
                return;
            }
            if opts.json {
                serde_json::json!({ "group": g, "gone": true }).to_string()
            } else {
                format!("{g}: no longer monitored")
            }
        }
    };
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) ends nothing here; the next write fails
    // the same way and the user has already left.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn text(s: &GroupSnapshot) -> String {
    let mut t = format!(
        "{} epoch {} version {}: master {}:{} {}",
        s.group,
        s.epoch,
        s.version,
        s.master.host,
        s.master.port,
        s.master.state.as_str()
    );
    if let Some(f) = &s.master.failover {
        t.push_str(&format!(" (failover: {f})"));
    }
    for r in &s.replicas {
        t.push_str(&format!(
            "\n  replica {}:{} {} offset {} priority {}",
            r.host,
            r.port,
            r.state.as_str(),
            r.offset,
            r.priority
        ));
    }
    t
}

fn json(s: &GroupSnapshot) -> String {
    serde_json::json!({
        "group": s.group,
        "epoch": s.epoch,
        "version": s.version,
        "master": {
            "host": s.master.host,
            "port": s.master.port,
            "state": s.master.state.as_str(),
            "failover": s.master.failover,
        },
        "replicas": s.replicas.iter().map(|r| serde_json::json!({
            "host": r.host,
            "port": r.port,
            "state": r.state.as_str(),
            "offset": r.offset,
            "priority": r.priority,
        })).collect::<Vec<_>>(),
    })
    .to_string()
}
