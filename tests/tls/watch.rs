//! `valkyrie watch --tls` against the real daemon binary serving its index
//! port over TLS (`index-tls yes`, `tls-auth-clients yes`), with
//! certificates made at test time (tests/support/tls/pki.rs):
//!
//! - `--once --json` over mutual TLS names the group's master, and a watch
//!   left following prints the new master after a SIGKILL failover among
//!   TLS-only `valkey-server`s;
//! - a watch without a client certificate, with one from another CA, with
//!   the wrong CA or the wrong `--sni` is refused with the handshake's
//!   reason; unreadable files are named;
//! - a watch retrying against the wrong CA prints its error once, and
//!   connects once the CA file is replaced (the files are read at every
//!   connection);
//! - bad combinations of the TLS options are usage errors (status 2).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use support::tls::*;
use support::*;

fn valkyrie() -> Command {
    Command::new(env!("CARGO_BIN_EXE_valkyrie"))
}

/// `valkyrie watch --tls --cacert <ca> --addr 127.0.0.1:<index>` and
/// `extra` (the client certificate, `--once`, groups…).
fn watch_cmd(index: u16, ca: &Path, extra: &[&str]) -> Command {
    let mut c = valkyrie();
    c.args(["watch", "--tls", "--cacert"])
        .arg(ca)
        .arg("--addr")
        .arg(format!("127.0.0.1:{index}"))
        .args(extra);
    c
}

/// The client certificate options of this PKI's client.
fn client_cert(pki: &Pki) -> Vec<String> {
    vec![
        "--cert".into(),
        pki.client_cert_file().display().to_string(),
        "--key".into(),
        pki.client_key_file().display().to_string(),
    ]
}

/// Runs `cmd` to its end, bounded: a `--once` watch that hangs fails the
/// test instead of blocking it.
fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            panic!("`valkyrie watch` (pid {pid}) did not end within {limit:?}");
        }
    }
}

/// A `valkyrie watch` left running, its stdout and stderr read line by
/// line into channels; killed by PID on drop.
struct Follower {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
    /// Every stderr line seen so far.
    err_seen: Vec<String>,
}

impl Follower {
    fn start(mut cmd: Command) -> Follower {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = |r: Box<dyn std::io::Read + Send>| {
            let (tx, rx) = channel();
            std::thread::spawn(move || {
                for line in BufReader::new(r).lines() {
                    let Ok(line) = line else { return };
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
            rx
        };
        let out = lines(Box::new(child.stdout.take().unwrap()));
        let err = lines(Box::new(child.stderr.take().unwrap()));
        Follower {
            child,
            out,
            err,
            err_seen: Vec::new(),
        }
    }

    /// Reads stdout until a line (JSON) satisfies `want`, within `limit`;
    /// returns it. Fails naming what was seen otherwise.
    fn wait_json(
        &mut self,
        limit: Duration,
        what: &str,
        mut want: impl FnMut(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + limit;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(line) => {
                    let v: serde_json::Value = serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                    if want(&v) {
                        return v;
                    }
                    seen.push(line);
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    self.drain_err();
                    panic!(
                        "no {what} within {limit:?}; stdout: {seen:#?}; stderr: {:#?}",
                        self.err_seen
                    );
                }
            }
        }
    }

    /// Reads stderr until a line contains `needle`, within `limit`.
    fn wait_err(&mut self, limit: Duration, needle: &str) {
        let deadline = Instant::now() + limit;
        if self.err_seen.iter().any(|l| l.contains(needle)) {
            return;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.err.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.err_seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => panic!(
                    "no stderr line with {needle:?} within {limit:?}: {:#?}",
                    self.err_seen
                ),
            }
        }
    }

    /// Collects the stderr lines that have arrived, without waiting.
    fn drain_err(&mut self) {
        while let Ok(line) = self.err.try_recv() {
            self.err_seen.push(line);
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Over mutual TLS to an index port served with `index-tls yes`: `watch
/// --once --json` prints the group's snapshot (its master, both replicas),
/// and a watch following the group prints the new master after the master
/// is SIGKILLed and the daemon fails it over (every link over TLS).
#[test]
fn watch_over_mutual_tls_once_and_through_a_failover() {
    let bin = valkey_server();
    let tmp = TempDir::new("tls-watch");
    let pki = Pki::new(&tmp.0.join("pki"));
    let (mut master, r1, r2) = start_tls_trio(&bin, &tmp.0, &pki);
    let (sp, index) = (free_port(), free_port());
    let extra = format!(
        "index-port {index}\nindex-tls yes\n{}{}",
        pki.replication_directives(true),
        monitor(master.port, 1)
    );
    let _d = start_daemon(&tmp.0, &pki, 0, sp, "yes", &extra);
    wait_replicas_known(sp, &pki);

    let mut args = client_cert(&pki);
    args.extend(["--once", "--json", "mymaster"].map(String::from));
    let out = run_bounded(
        watch_cmd(
            index,
            &pki.ca_file(),
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let snap = &lines[0];
    assert_eq!(snap["group"], "mymaster", "{snap}");
    assert_eq!(snap["master"]["host"], "127.0.0.1", "{snap}");
    assert_eq!(snap["master"]["port"], master.port, "{snap}");
    assert_eq!(snap["master"]["state"], "up", "{snap}");
    let mut replicas: Vec<u64> = snap["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["port"].as_u64().unwrap())
        .collect();
    replicas.sort_unstable();
    let mut expected = vec![u64::from(r1.port), u64::from(r2.port)];
    expected.sort_unstable();
    assert_eq!(replicas, expected, "{snap}");

    // Following: the current state first, then the change.
    let mut args = client_cert(&pki);
    args.extend(["--json", "mymaster"].map(String::from));
    let mut follower = Follower::start(watch_cmd(
        index,
        &pki.ca_file(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let first = follower.wait_json(Duration::from_secs(20), "first snapshot", |v| {
        v["group"] == "mymaster"
    });
    assert_eq!(first["master"]["port"], master.port, "{first}");

    master.kill();
    let new = wait_failover(sp, &pki, [r1.port, r2.port], Duration::from_secs(60));
    let promoted = follower.wait_json(
        Duration::from_secs(20),
        &format!("snapshot with the new master {new}"),
        |v| v["group"] == "mymaster" && v["master"]["port"] == new,
    );
    assert_eq!(promoted["master"]["host"], "127.0.0.1", "{promoted}");
    assert!(
        promoted["epoch"].as_u64().unwrap() > first["epoch"].as_u64().unwrap(),
        "the failover's epoch: {first} then {promoted}"
    );
    assert!(
        promoted["version"].as_u64().unwrap() > first["version"].as_u64().unwrap(),
        "{first} then {promoted}"
    );
    // The follower stayed connected: nothing on stderr.
    follower.drain_err();
    assert!(
        follower.err_seen.is_empty(),
        "stderr: {:#?}",
        follower.err_seen
    );
}

/// Refusals name their reason: no client certificate (the server's
/// `tls-auth-clients yes` refuses it), a client certificate from another
/// CA, a server certificate checked against the wrong CA or for the wrong
/// name, an unreadable file. A watch retrying against the wrong CA prints
/// the error once (not at every attempt) and subscribes once the CA file
/// is replaced by the right one.
#[test]
fn watch_over_tls_refusals_and_a_ca_replaced_while_retrying() {
    let bin = valkey_server();
    let tmp = TempDir::new("tls-watch-refused");
    let pki = Pki::new(&tmp.0.join("pki"));
    let master = TlsServer::start(&bin, &tmp.0, &pki, free_port(), None, "yes");
    let (sp, index, admin) = (free_port(), free_port(), free_port());
    let extra = format!(
        "index-port {index}\nindex-tls yes\nadmin-port {admin}\n{}{}",
        pki.replication_directives(true),
        monitor(master.port, 1)
    );
    let _d = start_daemon(&tmp.0, &pki, 0, sp, "yes", &extra);
    let refused = |cmd: Command, reason: &str| {
        let out = run_bounded(cmd, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        assert!(stderr.contains(reason), "wanted {reason:?}: {stderr}");
        stderr.into_owned()
    };
    let handshake = format!("TLS handshake with 127.0.0.1:{index} failed");

    // The right CA and client certificate work (the baseline the refusals
    // below differ from by one thing each).
    let mut ok = client_cert(&pki);
    ok.extend(["--once", "--json"].map(String::from));
    let ok: Vec<&str> = ok.iter().map(String::as_str).collect();
    let out = run_bounded(
        watch_cmd(index, &pki.ca_file(), &ok),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"group\":\"mymaster\""),
        "{out:?}"
    );

    // No client certificate.
    let stderr = refused(watch_cmd(index, &pki.ca_file(), &["--once"]), &handshake);
    assert!(stderr.contains("CertificateRequired"), "{stderr}");

    // A client certificate from another CA.
    let stranger = [
        "--cert",
        &pki.stranger_cert_file().display().to_string(),
        "--key",
        &pki.stranger_key_file().display().to_string(),
        "--once",
    ]
    .map(String::from);
    let stranger: Vec<&str> = stranger.iter().map(String::as_str).collect();
    refused(watch_cmd(index, &pki.ca_file(), &stranger), &handshake);

    // The server's certificate checked against another CA.
    let other_ca = pki.dir.join("other-ca.crt");
    let stderr = refused(watch_cmd(index, &other_ca, &ok), &handshake);
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");

    // A name the server's certificate does not hold; `localhost`, which
    // it does, works.
    let mut wrong_name = ok.clone();
    wrong_name.extend(["--sni", "wrong.example"]);
    let stderr = refused(watch_cmd(index, &pki.ca_file(), &wrong_name), &handshake);
    assert!(stderr.contains("not valid for name"), "{stderr}");
    let mut right_name = ok.clone();
    right_name.extend(["--sni", "localhost"]);
    let out = run_bounded(
        watch_cmd(index, &pki.ca_file(), &right_name),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{out:?}");

    // Unreadable files are named.
    let missing = pki.dir.join("missing.crt");
    let stderr = refused(watch_cmd(index, &missing, &ok), "TLS files: cannot read");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    let mut missing_key = vec!["--cert", "/nonexistent/client.crt"];
    missing_key.extend(["--key", "/nonexistent/client.key", "--once"]);
    refused(
        watch_cmd(index, &pki.ca_file(), &missing_key),
        "cannot read /nonexistent/client.crt",
    );

    // Following with the wrong CA in the file: one error line however
    // many attempts, then the right CA is renamed into place and the
    // next attempt subscribes.
    let ca_copy = pki.dir.join("rotating-ca.crt");
    write_atomic(&ca_copy, pki.other_ca.cert_pem.as_bytes());
    let mut follow = client_cert(&pki);
    follow.push("--json".into());
    let mut follower = Follower::start(watch_cmd(
        index,
        &ca_copy,
        &follow.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    follower.wait_err(Duration::from_secs(20), "UnknownIssuer");
    // Three more refused attempts (the daemon counts them) before the
    // file changes.
    let failures = || {
        let (code, text) = http_get(admin, "/metrics").unwrap();
        assert_eq!(code, 200, "{text}");
        metric(
            &text,
            "valkyrie_tls_handshakes_total",
            &[("port", "index"), ("result", "error")],
        )
        .unwrap_or(0.0)
    };
    let before = failures();
    wait_until(Duration::from_secs(20), || failures() >= before + 3.0);
    write_atomic(&ca_copy, pki.ca.cert_pem.as_bytes());
    let snap = follower.wait_json(Duration::from_secs(20), "snapshot", |v| {
        v["group"] == "mymaster"
    });
    assert_eq!(snap["master"]["port"], master.port, "{snap}");
    follower.drain_err();
    let errors: Vec<&String> = follower
        .err_seen
        .iter()
        .filter(|l| l.contains("UnknownIssuer"))
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "the same error printed once: {:#?}",
        follower.err_seen
    );
}

/// Bad combinations of the TLS options are usage errors (status 2, as
/// clap's): each fails before any connection is tried.
#[test]
fn watch_tls_usage_errors() {
    let cases: &[&[&str]] = &[
        &["--tls"],
        &["--cacert", "/ca.crt"],
        &["--tls", "--cacert", "/ca.crt", "--cert", "/c.crt"],
        &["--tls", "--cacert", "/ca.crt", "--key", "/c.key"],
        &["--cert", "/c.crt", "--key", "/c.key"],
        &["--sni", "localhost"],
        &["--tls", "--cacert", "/ca.crt", "--sni", "not a name"],
    ];
    for args in cases {
        let mut cmd = valkyrie();
        cmd.arg("watch").args(*args).args(["--once", "--addr"]);
        cmd.arg(format!("127.0.0.1:{}", free_port()));
        let out = run_bounded(cmd, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("error:"), "{args:?}: {stderr}");
    }
}
