//! TLS certificates and their checks, with real processes: the daemon
//! binary run on a `sentinel.conf` with Valkey 8's TLS directives.
//!
//! - `tls-auth-clients` yes / default / optional / no;
//! - certificate rotation under load, a corrupt file refused, SIGHUP;
//! - `tls-key-file-pass` and `tls-protocols`.
//!
//! Certificates are made at test time (tests/support/tls/pki.rs). Setting
//! `VALKYRIE_TLS_SENTINEL` to a `valkey-sentinel` binary runs the tests
//! on it instead of Valkyrie: the ones that use only Sentinel's own
//! directives (all but the rotation) then check the tests themselves.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::tls::*;
use support::*;
use valkyrie_protocol::Frame;

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

    // Certificates no client could verify: expired, not yet valid, from
    // another CA. Each is refused and counted; the second stays served.
    for (what, leaf) in [
        ("expired", pki.ca.server_in((-30, -1))),
        ("not yet valid", pki.ca.server_in((1, 30))),
        ("from another CA", pki.other_ca.server()),
    ] {
        let errors = reloads(admin, "error");
        pki.put_server(&leaf);
        wait_until(Duration::from_secs(10), || reloads(admin, "error") > errors);
        presents(port, &cfg, &second, 5);
        load.more(20);
        let seen = load.take();
        assert!(seen.iter().all(|s| *s == second), "{what}: {seen:?}");
        load.assert_no_failure(what);
    }
    let expiry = metric(
        &metrics_text(admin),
        "valkyrie_tls_cert_expiry_seconds",
        &[("certificate", "server")],
    )
    .expect("expiry");
    assert!(
        expiry > 0.0,
        "the expiry metric is the served certificate's"
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
        daemon_is_valkyrie(),
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
