//! TLS end to end, with real processes: the daemon binary run on a
//! `sentinel.conf` with Valkey 8's TLS directives, real `valkey-server`s
//! reachable over TLS only (`port 0`) and a real `valkey-sentinel` as a
//! peer.
//!
//! - failover with every link over TLS, the hello announcing `tls-port`;
//! - `index-tls` and `admin-tls`;
//! - peers (two Valkyries and a valkey-sentinel) over TLS.
//!
//! The other TLS tests are other modules: tests/clients/tls.rs (real
//! client libraries over TLS through a failover) and tests/tls/reload.rs
//! (`tls-auth-clients`, certificate rotation, `tls-key-file-pass` and
//! `tls-protocols`).
//!
//! Certificates are made at test time (tests/support/tls/pki.rs). Setting
//! `VALKYRIE_TLS_SENTINEL` to a `valkey-sentinel` binary runs the tests
//! on it instead of Valkyrie: the ones that use only Sentinel's own
//! directives (all but the index/admin ports) then check the tests
//! themselves.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::tls::*;
use support::*;
use valkyrie_protocol::Frame;

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
        greeting.starts_with("VALKYRIE-INDEX 2 server="),
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
            launch(
                &daemon_bin(),
                daemon_is_valkyrie(),
                &dir,
                0,
                sp,
                &pki,
                &text,
            )
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

/// At `maxclients`, a client of the TLS port gets Valkey's error over TLS
/// (in plain text it would only see a broken handshake).
#[test]
fn a_full_tls_port_refuses_over_tls() {
    let tmp = TempDir::new("tls-full");
    let pki = Pki::new(&tmp.0.join("pki"));
    let port = free_port();
    let _d = start_daemon(&tmp.0, &pki, 0, port, "yes", "maxclients 1\n");
    let cfg = pki.client_config(Who::Client);
    // The start-up probe's connection may still hold the one slot.
    let mut first = None;
    wait_until(Duration::from_secs(10), || {
        let mut c = TlsConn::connect(port, cfg.clone(), Duration::from_secs(5)).unwrap();
        let pong = c.call(&["PING"]) == Ok(Frame::Simple("PONG".into()));
        first = pong.then_some(c);
        pong
    });
    let mut second = TlsConn::connect(port, cfg, Duration::from_secs(5)).unwrap();
    let refused = second.read().unwrap();
    assert_eq!(
        refused,
        Frame::Error("ERR max number of clients reached".into()),
        "{refused:?}"
    );
}
