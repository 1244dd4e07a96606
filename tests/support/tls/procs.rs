//! The processes of a TLS test, each stopped by PID on drop: TLS-only
//! `valkey-server`s ([`TlsServer`], a master and two replicas with
//! [`start_tls_trio`]) and a Sentinel daemon process ([`DaemonProc`]:
//! Valkyrie, or a real `valkey-sentinel` for comparison) that can be
//! signalled by PID, and the daemon under test started on a
//! `sentinel.conf` with TLS directives ([`start_daemon`], [`launch`]).
//!
//! Setting `VALKYRIE_TLS_SENTINEL` to a `valkey-sentinel` binary makes
//! that binary the daemon under test instead of Valkyrie ([`daemon_bin`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::conn::{presented_serial, tls_info_field, tls_ping};
use super::pki::{Pki, Who};
use crate::support::{free_port, wait_until};

/// A `valkey-server` reachable over TLS only (`port 0`), replicating over
/// TLS, stopped by PID on drop.
pub struct TlsServer {
    pub port: u16,
    child: Option<Child>,
    pub dir: PathBuf,
}

impl TlsServer {
    /// Starts one on `tls_port` (a replica of `replicaof` when given), with
    /// `tls-auth-clients auth_clients`, and returns once it answers `PING`
    /// to a client with the PKI's client certificate.
    pub fn start(
        bin: &Path,
        dir: &Path,
        pki: &Pki,
        tls_port: u16,
        replicaof: Option<u16>,
        auth_clients: &str,
    ) -> TlsServer {
        let dir = dir.join(format!("tls{tls_port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut conf = format!(
            "port 0\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir {}\nlogfile {}\n\
             repl-diskless-sync yes\nrepl-diskless-sync-delay 0\n",
            dir.display(),
            dir.join("valkey.log").display()
        );
        conf.push_str(&pki.server_directives(tls_port, auth_clients));
        conf.push_str(&pki.replication_directives(false));
        if let Some(m) = replicaof {
            conf.push_str(&format!("replicaof 127.0.0.1 {m}\n"));
        }
        let path = dir.join("valkey.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(bin)
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = TlsServer {
            port: tls_port,
            child: Some(child),
            dir,
        };
        let cfg = pki.client_config(Who::Client);
        wait_until(Duration::from_secs(10), || {
            tls_ping(tls_port, cfg.clone()).is_ok()
        });
        s
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TLS-only master and two replicas, returned once both replicas report
/// an up link to the master.
pub fn start_tls_trio(bin: &Path, dir: &Path, pki: &Pki) -> (TlsServer, TlsServer, TlsServer) {
    let pm = free_port();
    let master = TlsServer::start(bin, dir, pki, pm, None, "yes");
    let r1 = TlsServer::start(bin, dir, pki, free_port(), Some(pm), "yes");
    let r2 = TlsServer::start(bin, dir, pki, free_port(), Some(pm), "yes");
    let cfg = pki.client_config(Who::Client);
    wait_until(Duration::from_secs(10), || {
        [r1.port, r2.port].iter().all(|&p| {
            tls_info_field(p, cfg.clone(), "replication", "master_link_status").as_deref()
                == Some("up")
        })
    });
    (master, r1, r2)
}

/// A Sentinel daemon process (Valkyrie's binary, or a real
/// `valkey-sentinel`) run on a configuration file, its stderr and stdout
/// in a log file; killed by PID on drop.
pub struct DaemonProc {
    child: Option<Child>,
    pub conf: PathBuf,
    pub log: PathBuf,
}

impl DaemonProc {
    /// Starts `bin conf`; nothing is waited for.
    pub fn start(bin: &Path, conf: &Path, log: &Path) -> DaemonProc {
        let out = std::fs::File::create(log).unwrap();
        let err = out.try_clone().unwrap();
        let child = Command::new(bin)
            .arg(conf)
            .env_remove("VALKYRIE_LOG")
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        DaemonProc {
            child: Some(child),
            conf: conf.to_path_buf(),
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Sends a signal by PID (`HUP`, `TERM`).
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{sig} {}", self.pid());
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for DaemonProc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- {} ---\n{}",
                self.log.display(),
                self.log_text()
                    .lines()
                    .rev()
                    .take(60)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        self.kill();
    }
}

/// The daemon under test: `VALKYRIE_TLS_SENTINEL`, else Valkyrie.
pub fn daemon_bin() -> PathBuf {
    match std::env::var_os("VALKYRIE_TLS_SENTINEL") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_valkyrie")),
    }
}

/// Whether the daemon under test is Valkyrie (not a real Sentinel).
pub fn daemon_is_valkyrie() -> bool {
    std::env::var_os("VALKYRIE_TLS_SENTINEL").is_none()
}

/// Starts the daemon in `dir` on `port plain` (0: none), the TLS
/// directives of `pki` and `extra`; returns once its TLS port completes a
/// handshake. Valkyrie's index and admin ports are off unless `extra`
/// sets them (their defaults are fixed ports).
pub fn start_daemon(
    dir: &Path,
    pki: &Pki,
    plain: u16,
    tls_port: u16,
    auth: &str,
    extra: &str,
) -> DaemonProc {
    let text = format!("{}{extra}", pki.server_directives(tls_port, auth));
    launch(
        &daemon_bin(),
        daemon_is_valkyrie(),
        dir,
        plain,
        tls_port,
        pki,
        &text,
    )
}

/// Writes `dir/sentinel.conf` (`port plain`, loopback, `dir`, then
/// `text`; for Valkyrie, index and admin ports off unless `text` sets
/// them) and starts `bin` on it; returns once `tls_port` completes a
/// handshake.
pub fn launch(
    bin: &Path,
    is_valkyrie: bool,
    dir: &Path,
    plain: u16,
    tls_port: u16,
    pki: &Pki,
    text: &str,
) -> DaemonProc {
    std::fs::create_dir_all(dir).unwrap();
    let conf = dir.join("sentinel.conf");
    let mut full = format!(
        "port {plain}\nbind 127.0.0.1\ndir {}\n{text}",
        dir.display()
    );
    if is_valkyrie {
        for port in ["index-port", "admin-port"] {
            if !text.contains(port) {
                full.push_str(&format!("{port} 0\n"));
            }
        }
    }
    std::fs::write(&conf, full).unwrap();
    let mut d = DaemonProc::start(bin, &conf, &dir.join("daemon.log"));
    let cfg = pki.client_config(Who::Client);
    wait_until(Duration::from_secs(10), || {
        assert!(d.running(), "the daemon exited:\n{}", d.log_text());
        presented_serial(tls_port, cfg.clone()).is_ok()
    });
    d
}
