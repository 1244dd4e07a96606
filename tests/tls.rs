//! TLS end to end, with real processes: the daemon binary run on a
//! `sentinel.conf` with Valkey 8's TLS directives, real `valkey-server`s
//! reachable over TLS only (`port 0`), real clients and a real
//! `valkey-sentinel` as a peer.
//!
//! - failover with every link over TLS, the hello announcing `tls-port`;
//! - valkey-cli, redis-py, valkey-py and ioredis over TLS to the Sentinel
//!   port and the data nodes, through a failover
//!   (tests/clients/tls_client.py, tests/clients/tls_client.js);
//! - peers (two Valkyries and a valkey-sentinel) over TLS;
//! - `tls-auth-clients` yes / default / optional / no;
//! - certificate rotation under load, a corrupt file refused, SIGHUP;
//! - `index-tls` and `admin-tls`;
//! - `tls-key-file-pass` and `tls-protocols`.
//!
//! Certificates are made at test time (tests/support/tls.rs). Setting
//! `VALKYRIE_TLS_SENTINEL` to a `valkey-sentinel` binary runs the tests
//! on it instead of Valkyrie: the ones that use only Sentinel's own
//! directives (all but the rotation and the index/admin ports) then
//! check the tests themselves.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::clients::Proc;
use support::tls::*;
use support::*;
use valkyrie_protocol::Frame;

/// The daemon under test.
fn daemon_bin() -> PathBuf {
    match std::env::var_os("VALKYRIE_TLS_SENTINEL") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_valkyrie")),
    }
}

/// Whether the daemon under test is Valkyrie (not a real Sentinel).
fn valkyrie() -> bool {
    std::env::var_os("VALKYRIE_TLS_SENTINEL").is_none()
}

/// Starts the daemon in `dir` on `port plain` (0: none), the TLS
/// directives of `pki` and `extra`; returns once its TLS port completes a
/// handshake. Valkyrie's index and admin ports are off unless `extra`
/// sets them (their defaults are fixed ports).
fn start_daemon(
    dir: &Path,
    pki: &Pki,
    plain: u16,
    tls_port: u16,
    auth: &str,
    extra: &str,
) -> DaemonProc {
    let text = format!("{}{extra}", pki.server_directives(tls_port, auth));
    launch(&daemon_bin(), valkyrie(), dir, plain, tls_port, pki, &text)
}

/// Writes `dir/sentinel.conf` (`port plain`, loopback, `dir`, then
/// `text`; for Valkyrie, index and admin ports off unless `text` sets
/// them) and starts `bin` on it; returns once `tls_port` completes a
/// handshake.
fn launch(
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

/// mTLS on the Sentinel TLS port: with `tls-auth-clients yes` (and
/// without the directive: Valkey's default) only a certificate from the
/// CA gets in; with `optional` no certificate is fine too, a certificate
/// from another CA still is not; with `no` every client gets in. A client
/// that does not speak TLS gets no reply.
#[test]
fn client_certificates_are_checked_as_tls_auth_clients_says() {
    let tmp = TempDir::new("tls-mtls");
    let pki = Pki::new(&tmp.0.join("pki"));
    for (auth, anonymous, stranger) in [
        ("yes", false, false),
        ("", false, false),
        ("optional", true, false),
        ("no", true, true),
    ] {
        let label = if auth.is_empty() { "default" } else { auth };
        let dir = tmp.0.join(label);
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let _d = start_daemon(&dir, &pki, 0, port, auth, "");
        let right = tls_ping(port, pki.client_config(Who::Client));
        assert_eq!(
            right.as_deref(),
            Ok(pki.server.serial.as_str()),
            "{label}: a certificate from the CA"
        );
        let none = tls_ping(port, pki.client_config(Who::Anonymous));
        assert_eq!(none.is_ok(), anonymous, "{label}: no certificate: {none:?}");
        let other = tls_ping(port, pki.client_config(Who::Stranger));
        assert_eq!(
            other.is_ok(),
            stranger,
            "{label}: a certificate from another CA: {other:?}"
        );
        eprintln!("{label}: no certificate: {none:?}; another CA's: {other:?}");
        let plain = try_call(port, &["PING"]);
        assert!(
            !matches!(plain, Ok(Frame::Simple(_))),
            "{label}: plain PING answered: {plain:?}"
        );
    }
}

/// `SENTINEL MASTER mymaster`'s field `name`, over TLS.
fn master_field_tls(port: u16, pki: &Pki, name: &str) -> Option<String> {
    match tls_call(
        port,
        pki.client_config(Who::Client),
        &["SENTINEL", "MASTER", "mymaster"],
    )
    .ok()?
    {
        Frame::Array(kv) => kv
            .chunks(2)
            .find(|p| p[0].as_bytes().map(|b| &b[..]) == Some(name.as_bytes()))
            .and_then(|p| p[1].as_bytes())
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// The monitoring lines of `mymaster` at `master` (down after 1 s,
/// failover bounded by 10 s).
fn monitor(master: u16, quorum: u32) -> String {
    format!(
        "sentinel monitor mymaster 127.0.0.1 {master} {quorum}\n\
         sentinel down-after-milliseconds mymaster 1000\n\
         sentinel failover-timeout mymaster 10000\n"
    )
}

/// Waits until the daemon on `sp` knows both replicas of `mymaster`.
fn wait_replicas_known(sp: u16, pki: &Pki) {
    wait_until(Duration::from_secs(20), || {
        master_field_tls(sp, pki, "num-slaves").as_deref() == Some("2")
            && master_field_tls(sp, pki, "flags").as_deref() == Some("master")
    });
}

/// After the master was killed: waits until the daemon on `sp` advertises
/// one of `replicas`, that one is a master, and the other replica
/// replicates from it with its link up (all over TLS); the new master.
fn wait_failover(sp: u16, pki: &Pki, replicas: [u16; 2], limit: Duration) -> u16 {
    let cfg = pki.client_config(Who::Client);
    let mut new = 0;
    wait_until(limit, || {
        match tls_master_addr(sp, cfg.clone(), "mymaster") {
            Some((ip, p)) if replicas.contains(&p) => {
                assert_eq!(ip, "127.0.0.1");
                new = p;
                true
            }
            _ => false,
        }
    });
    let other = if new == replicas[0] {
        replicas[1]
    } else {
        replicas[0]
    };
    wait_until(Duration::from_secs(30), || {
        tls_info_field(new, cfg.clone(), "replication", "role").as_deref() == Some("master")
            && tls_info_field(other, cfg.clone(), "replication", "master_port")
                == Some(new.to_string())
            && tls_info_field(other, cfg.clone(), "replication", "master_link_status").as_deref()
                == Some("up")
    });
    new
}

/// A master and two replicas reachable over TLS only, monitored by the
/// daemon over TLS only (`tls-replication yes`, the links presenting the
/// client certificate): it finds both replicas, its hello on the
/// instances announces its TLS port, and a SIGKILL of the master ends
/// with a replica promoted, advertised on the Sentinel TLS port, and the
/// other replica following it.
#[test]
fn failover_over_tls_only_links() {
    let bin = valkey_server();
    let tmp = TempDir::new("tls-failover");
    let pki = Pki::new(&tmp.0.join("pki"));
    let (mut master, r1, r2) = start_tls_trio(&bin, &tmp.0, &pki);
    let sp = free_port();
    let extra = format!(
        "{}{}",
        pki.replication_directives(true),
        monitor(master.port, 1)
    );
    let _d = start_daemon(&tmp.0, &pki, 0, sp, "yes", &extra);
    wait_replicas_known(sp, &pki);
    let cfg = pki.client_config(Who::Client);
    assert_eq!(
        tls_master_addr(sp, cfg.clone(), "mymaster"),
        Some(("127.0.0.1".to_string(), master.port))
    );

    // The hello the daemon publishes on a replica (over its TLS link)
    // announces the Sentinel TLS port.
    let mut sub = TlsConn::connect(r1.port, cfg.clone(), Duration::from_secs(10)).unwrap();
    sub.call(&["SUBSCRIBE", "__sentinel__:hello"]).unwrap();
    let hello = match sub.read().unwrap() {
        Frame::Array(v) if v.len() == 3 => {
            String::from_utf8_lossy(v[2].as_bytes().unwrap()).into_owned()
        }
        other => panic!("hello: {other:?}"),
    };
    let fields: Vec<&str> = hello.split(',').collect();
    assert_eq!(fields[0], "127.0.0.1", "{hello}");
    assert_eq!(
        fields[1],
        sp.to_string(),
        "the hello announces tls-port: {hello}"
    );
    drop(sub);

    master.kill();
    let new = wait_failover(sp, &pki, [r1.port, r2.port], Duration::from_secs(40));
    eprintln!("promoted {new}");
}

fn required(var: &str) -> std::ffi::OsString {
    std::env::var_os(var).unwrap_or_else(|| {
        panic!("{var} is not set: run scripts/test (or source scripts/deps.sh && valkyrie_deps)")
    })
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name)
}

/// `valkey-cli --tls … SENTINEL get-master-addr-by-name mymaster` on `sp`:
/// its output lines.
fn cli_master_addr(cli: &std::ffi::OsStr, sp: u16, pki: &Pki) -> Vec<String> {
    let out = Command::new(cli)
        .args(["--tls", "--cacert"])
        .arg(pki.ca_file())
        .arg("--cert")
        .arg(pki.client_cert_file())
        .arg("--key")
        .arg(pki.client_key_file())
        .args(["-h", "127.0.0.1", "-p", &sp.to_string()])
        .args(["SENTINEL", "get-master-addr-by-name", "mymaster"])
        .output()
        .unwrap_or_else(|e| panic!("valkey-cli: {e}"));
    assert!(
        out.status.success(),
        "valkey-cli: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Real clients over TLS to the Sentinel TLS port and to the data nodes:
/// valkey-cli, redis-py and valkey-py (ssl=True for the Sentinel
/// connection and the data connection) and ioredis (sentinelTLS, tls,
/// enableTLSForSentinelMode) discover the master and a replica, then the
/// same client objects follow a failover. The daemon's links present
/// `tls-cert-file` (no `tls-client-cert-file`).
#[test]
fn clients_over_tls_discover_and_follow_a_failover() {
    let py = required("VALKYRIE_PYTHON");
    let node_path = required("VALKYRIE_NODE_PATH");
    let cli = std::env::var_os("VALKEY_CLI").unwrap_or_else(|| "valkey-cli".into());
    let bin = valkey_server();
    let tmp = TempDir::new("tls-clients");
    let pki = Pki::new(&tmp.0.join("pki"));
    let (mut master, r1, r2) = start_tls_trio(&bin, &tmp.0, &pki);
    let sp = free_port();
    let extra = format!(
        "{}{}",
        pki.replication_directives(false),
        monitor(master.port, 1)
    );
    let _d = start_daemon(&tmp.0, &pki, 0, sp, "yes", &extra);
    wait_replicas_known(sp, &pki);

    assert_eq!(
        cli_master_addr(&cli, sp, &pki),
        ["127.0.0.1".to_string(), master.port.to_string()]
    );
    let mut procs = Vec::new();
    for module in ["redis", "valkey"] {
        let mut cmd = Command::new(&py);
        cmd.arg(script("tls_client.py"))
            .args([module, module, &sp.to_string()])
            .arg(&pki.dir);
        procs.push((module, Proc::spawn(module, cmd)));
    }
    let mut cmd = Command::new("node");
    cmd.arg(script("tls_client.js"))
        .arg(sp.to_string())
        .arg(&pki.dir)
        .env("NODE_PATH", &node_path);
    let mut ioredis = Proc::spawn("ioredis", cmd);

    let limit = Duration::from_secs(30);
    let pm = master.port.to_string();
    for (_, p) in &mut procs {
        assert_eq!(p.expect("master ", limit), pm);
        assert_eq!(p.expect("master-node ", limit), pm);
        assert_eq!(p.expect("replica-read ", limit), "1");
        assert_eq!(p.expect("replica-role ", limit), "slave");
        p.expect("ready", limit);
    }
    assert_eq!(ioredis.expect("ioredis-master ", limit), pm);
    assert_eq!(ioredis.expect("ioredis-replica-read ", limit), "1");
    assert_eq!(ioredis.expect("ioredis-replica-role ", limit), "slave");
    ioredis.expect("ready", limit);

    master.kill();
    let new = wait_failover(sp, &pki, [r1.port, r2.port], Duration::from_secs(40)).to_string();
    assert_eq!(
        cli_master_addr(&cli, sp, &pki),
        ["127.0.0.1".to_string(), new.clone()]
    );
    for (_, p) in &mut procs {
        p.go();
    }
    ioredis.go();
    for (module, p) in &mut procs {
        assert_eq!(p.expect("followed ", limit), new, "{module}");
        assert_eq!(p.expect("followed-node ", limit), new, "{module}");
        let status = p.wait_exit(limit);
        assert!(status.success(), "{module}: exit {status}");
    }
    assert_eq!(ioredis.expect("followed-ioredis ", limit), new);
    let status = ioredis.wait_exit(limit);
    assert!(status.success(), "ioredis: exit {status}");
}

/// Connections to the Sentinel TLS port in a loop, from several threads,
/// each a full handshake and `PING`: the failures, and the serials the
/// server presented since the last [`Load::take`].
struct Load {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
    serials: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(port: u16, cfg: Arc<rustls::ClientConfig>, threads: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let serials = Arc::new(Mutex::new(Vec::new()));
        let threads = (0..threads)
            .map(|_| {
                let (stop, done, failures, serials, cfg) = (
                    stop.clone(),
                    done.clone(),
                    failures.clone(),
                    serials.clone(),
                    cfg.clone(),
                );
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        match tls_ping(port, cfg.clone()) {
                            Ok(serial) => serials.lock().unwrap().push(serial),
                            Err(e) => failures.lock().unwrap().push(e),
                        }
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        Load {
            stop,
            done,
            failures,
            serials,
            threads,
        }
    }

    /// Waits until `n` more connections were made.
    fn more(&self, n: u64) {
        let from = self.done.load(Ordering::SeqCst);
        wait_until(Duration::from_secs(30), || {
            self.done.load(Ordering::SeqCst) >= from + n
        });
    }

    /// The serials presented since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.serials.lock().unwrap())
    }

    fn assert_no_failure(&self, when: &str) {
        let f = self.failures.lock().unwrap();
        assert!(
            f.is_empty(),
            "{when}: {} of {} connections failed: {:?}",
            f.len(),
            self.done.load(Ordering::SeqCst),
            &f[..f.len().min(5)]
        );
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
        self.done.load(Ordering::SeqCst)
    }
}

/// The admin port's /metrics, in clear.
fn metrics_text(admin: u16) -> String {
    let (code, body) = http_get(admin, "/metrics").unwrap();
    assert_eq!(code, 200);
    body
}

fn reloads(admin: u16, result: &str) -> f64 {
    metric_sum(
        &metrics_text(admin),
        "valkyrie_tls_reloads_total",
        &[("result", result)],
    )
}

/// Waits until `count` fresh connections in a row present `serial`.
fn presents(port: u16, cfg: &Arc<rustls::ClientConfig>, serial: &str, count: usize) {
    for i in 0..count {
        let got = tls_ping(port, cfg.clone()).unwrap();
        assert_eq!(got, serial, "connection {i} after the switch");
    }
}

/// The server certificate and key replaced (by rename) while clients
/// connect to the Sentinel TLS port in a loop: no connection fails, and
/// new connections present the new serial within a bounded wait. Then a
/// corrupt certificate file: no connection fails, the old serial stays,
/// `valkyrie_tls_reloads_total{result="error"}` counts the refusal. Then a
/// good certificate again, and SIGHUP with the files unchanged reloads
/// them (`{result="ok"}` counts it) with no failure either.
/// `valkyrie_tls_cert_expiry_seconds` tells the server certificate's
/// remaining validity.
#[test]
fn certificate_rotation_under_load() {
    let tmp = TempDir::new("tls-rotate");
    let mut pki = Pki::new(&tmp.0.join("pki"));
    let (port, admin) = (free_port(), free_port());
    let mut d = start_daemon(
        &tmp.0,
        &pki,
        0,
        port,
        "yes",
        &format!("admin-port {admin}\n"),
    );
    wait_until(Duration::from_secs(10), || {
        http_get(admin, "/healthz").is_ok_and(|(c, _)| c == 200)
    });
    let expiry = metric(
        &metrics_text(admin),
        "valkyrie_tls_cert_expiry_seconds",
        &[("certificate", "server")],
    )
    .expect("valkyrie_tls_cert_expiry_seconds{certificate=\"server\"}");
    let valid = (VALID_DAYS * 86_400) as f64;
    assert!(
        expiry <= valid && expiry > valid - 600.0,
        "expiry {expiry} s, the certificate has {valid} s"
    );

    let cfg = pki.client_config(Who::Client);
    let first = pki.server.serial.clone();
    // A connection made before any change: it keeps working throughout.
    let mut early = TlsConn::connect(port, cfg.clone(), Duration::from_secs(5)).unwrap();
    let mut early_ping = || {
        assert_eq!(
            early.call(&["PING"]),
            Ok(Frame::Simple("PONG".into())),
            "the connection made before the changes"
        );
    };
    early_ping();
    let load = Load::start(port, cfg.clone(), 4);
    load.more(40);
    assert!(load.take().iter().all(|s| *s == first));
    load.assert_no_failure("before the rotation");

    // Rotation: a new key and certificate, renamed into place.
    let second = pki.rotate_server().serial;
    assert_ne!(first, second);
    let t = Instant::now();
    wait_until(Duration::from_secs(5), || {
        presented_serial(port, cfg.clone()).as_deref() == Ok(second.as_str())
    });
    eprintln!("new certificate served {:?} after the rename", t.elapsed());
    presents(port, &cfg, &second, 20);
    load.more(40);
    let seen = load.take();
    assert!(seen.iter().all(|s| *s == first || *s == second), "{seen:?}");
    assert!(seen.contains(&second));
    load.assert_no_failure("during the rotation");
    early_ping();

    // A corrupt certificate file: refused, the second one stays.
    let errors = reloads(admin, "error");
    pki.corrupt_server_cert();
    wait_until(Duration::from_secs(10), || reloads(admin, "error") > errors);
    load.more(40);
    presents(port, &cfg, &second, 20);
    let seen = load.take();
    assert!(seen.iter().all(|s| *s == second), "{seen:?}");
    load.assert_no_failure("with a corrupt certificate file");
    early_ping();
    assert!(d.running());
    let cert_file = pki.cert_file().display().to_string();
    let log = d.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains(&cert_file) && l.to_uppercase().contains("WARN")),
        "no warning naming {cert_file} in the log:\n{log}"
    );

    // A good certificate again, then SIGHUP with nothing changed.
    let oks = reloads(admin, "ok");
    let third = pki.rotate_server().serial;
    wait_until(Duration::from_secs(5), || {
        presented_serial(port, cfg.clone()).as_deref() == Ok(third.as_str())
    });
    wait_until(Duration::from_secs(5), || reloads(admin, "ok") > oks);
    let oks = reloads(admin, "ok");
    d.signal("HUP");
    wait_until(Duration::from_secs(5), || reloads(admin, "ok") > oks);
    load.more(40);
    presents(port, &cfg, &third, 20);
    load.take();
    load.assert_no_failure("after SIGHUP");
    early_ping();
    let total = load.stop();
    eprintln!("{total} connections, none failed");
    assert!(d.running());
}

/// `index-tls yes` and `admin-tls yes`: the index port and the admin port
/// speak TLS with the same certificate and client check (a plain
/// connection gets no greeting and no HTTP reply; a TLS one from a client
/// of the CA gets the greeting and a 200 on /healthz; one without a
/// certificate is refused), next to a plain Sentinel port that stays
/// plain.
#[test]
fn index_and_admin_ports_over_tls() {
    let tmp = TempDir::new("tls-ports");
    let pki = Pki::new(&tmp.0.join("pki"));
    let (plain, port, index, admin) = (free_port(), free_port(), free_port(), free_port());
    let _d = start_daemon(
        &tmp.0,
        &pki,
        plain,
        port,
        "yes",
        &format!("index-port {index}\nindex-tls yes\nadmin-port {admin}\nadmin-tls yes\n"),
    );
    let cfg = pki.client_config(Who::Client);
    // The plain Sentinel port stays plain.
    assert_eq!(call(plain, &["PING"]), Frame::Simple("PONG".into()));

    wait_until(Duration::from_secs(10), || {
        https_get(admin, cfg.clone(), "/healthz").is_ok_and(|(c, _)| c == 200)
    });
    let (code, body) = https_get(admin, cfg.clone(), "/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("valkyrie_tls_cert_expiry_seconds"), "{body}");
    assert_eq!(
        presented_serial(admin, cfg.clone()).unwrap(),
        pki.server.serial
    );
    let plain_http = http_get(admin, "/healthz");
    assert!(
        !matches!(plain_http, Ok((200, _))),
        "plain HTTP on the admin TLS port: {plain_http:?}"
    );
    let anonymous = https_get(admin, pki.client_config(Who::Anonymous), "/healthz");
    assert!(anonymous.is_err(), "no client certificate: {anonymous:?}");

    let mut c = TlsConn::connect(index, cfg.clone(), Duration::from_secs(5)).unwrap();
    let greeting = c.line().unwrap();
    assert!(
        greeting.starts_with("VALKYRIE-INDEX 1 server="),
        "{greeting}"
    );
    c.send(b"PING abc\n").unwrap();
    assert_eq!(c.line().unwrap(), "PONG abc");
    assert_eq!(c.peer_serial(), pki.server.serial);
    let plain_index = plain_lines(index, b"PING abc\n");
    assert!(
        !plain_index.contains("VALKYRIE-INDEX") && !plain_index.contains("PONG"),
        "plain connection to the index TLS port got {plain_index:?}"
    );
    let anonymous = TlsConn::connect(
        index,
        pki.client_config(Who::Anonymous),
        Duration::from_secs(5),
    )
    .and_then(|mut c| c.line());
    assert!(anonymous.is_err(), "no client certificate: {anonymous:?}");
}

/// What a plain connection that sends `bytes` reads back until the server
/// closes it or 2 s pass.
fn plain_lines(port: u16, bytes: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Peers over TLS only: two Valkyries and a real valkey-sentinel (all
/// `port 0`, `tls-replication yes`, quorum 2) find each other through the
/// hellos, which announce their TLS ports, and after a SIGKILL of the
/// master they agree on the promoted replica, which all three advertise.
#[test]
fn peers_over_tls_agree_on_a_failover() {
    let bin = valkey_server();
    let tmp = TempDir::new("tls-peers");
    let pki = Pki::new(&tmp.0.join("pki"));
    let (mut master, r1, r2) = start_tls_trio(&bin, &tmp.0, &pki);
    let real = support::sentinel::valkey_sentinel();
    let mut daemons = Vec::new();
    let mut ports = Vec::new();
    for i in 0..3 {
        let sp = free_port();
        let text = format!(
            "{}{}{}",
            pki.server_directives(sp, "yes"),
            pki.replication_directives(true),
            monitor(master.port, 2)
        );
        let dir = tmp.0.join(format!("s{i}"));
        let d = if i == 2 {
            launch(&real, false, &dir, 0, sp, &pki, &text)
        } else {
            launch(&daemon_bin(), valkyrie(), &dir, 0, sp, &pki, &text)
        };
        daemons.push(d);
        ports.push(sp);
    }
    wait_until(Duration::from_secs(30), || {
        ports.iter().all(|&p| {
            master_field_tls(p, &pki, "num-other-sentinels").as_deref() == Some("2")
                && master_field_tls(p, &pki, "num-slaves").as_deref() == Some("2")
        })
    });
    // Each knows the others by their TLS ports.
    let cfg = pki.client_config(Who::Client);
    for &p in &ports {
        let Ok(Frame::Array(peers)) =
            tls_call(p, cfg.clone(), &["SENTINEL", "SENTINELS", "mymaster"])
        else {
            panic!("SENTINEL SENTINELS on {p}");
        };
        let mut known: Vec<u16> = peers
            .iter()
            .filter_map(|peer| match peer {
                Frame::Array(kv) => kv
                    .chunks(2)
                    .find(|f| f[0].as_bytes().map(|b| &b[..]) == Some(&b"port"[..]))
                    .and_then(|f| String::from_utf8_lossy(f[1].as_bytes()?).parse().ok()),
                Frame::Map(kv) => kv
                    .iter()
                    .find(|(k, _)| k.as_bytes().map(|b| &b[..]) == Some(&b"port"[..]))
                    .and_then(|(_, v)| String::from_utf8_lossy(v.as_bytes()?).parse().ok()),
                _ => None,
            })
            .collect();
        known.sort_unstable();
        let mut others: Vec<u16> = ports.iter().copied().filter(|&o| o != p).collect();
        others.sort_unstable();
        assert_eq!(known, others, "the peers {p} knows");
    }

    master.kill();
    let new = wait_failover(ports[0], &pki, [r1.port, r2.port], Duration::from_secs(60));
    wait_until(Duration::from_secs(30), || {
        ports
            .iter()
            .all(|&p| tls_master_addr(p, cfg.clone(), "mymaster").map(|a| a.1) == Some(new))
    });
    eprintln!("promoted {new}");
    drop(daemons);
}

/// `tls-key-file-pass` opens an encrypted (PKCS#8) key, and
/// `tls-protocols "TLSv1.2"` keeps TLS 1.3 clients out.
#[test]
fn key_passphrase_and_protocol_versions() {
    let tmp = TempDir::new("tls-pass");
    let pki = Pki::new(&tmp.0.join("pki"));
    let key = pki.dir.join("server-encrypted.key");
    write_atomic(&key, pki.server.encrypted_key_pem("s3cret pass").as_bytes());
    let port = free_port();
    let text = format!(
        "tls-port {port}\ntls-cert-file {}\ntls-key-file {}\n\
         tls-key-file-pass \"s3cret pass\"\ntls-ca-cert-file {}\n\
         tls-protocols \"TLSv1.2\"\n",
        pki.cert_file().display(),
        key.display(),
        pki.ca_file().display()
    );
    let _d = launch(
        &daemon_bin(),
        valkyrie(),
        &tmp.0.join("d"),
        0,
        port,
        &pki,
        &text,
    );
    let roots = [pki.ca.cert_der.clone()];
    let tls12 = client_config_versions(&roots, Some(&pki.client), &[&rustls::version::TLS12]);
    let mut c = TlsConn::connect(port, tls12, Duration::from_secs(5)).unwrap();
    assert_eq!(c.call(&["PING"]), Ok(Frame::Simple("PONG".into())));
    assert_eq!(c.version(), Some(rustls::ProtocolVersion::TLSv1_2));
    assert_eq!(c.peer_serial(), pki.server.serial);
    let tls13 = client_config_versions(&roots, Some(&pki.client), &[&rustls::version::TLS13]);
    let refused = tls_ping(port, tls13);
    assert!(refused.is_err(), "a TLS 1.3 client: {refused:?}");
}
