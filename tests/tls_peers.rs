//! Peers over TLS: two Valkyries and a real valkey-sentinel, every link
//! TLS (`tls-replication yes`, `port 0`), find each other through hellos
//! on TLS-only valkey-servers, elect a leader over their TLS peer links
//! and fail a SIGKILLed master over; all three then advertise the new
//! master.

mod support;

use std::path::Path;
use std::time::Duration;

use support::tls::{DaemonProc, Pki, Who, start_tls_trio, tls_call, tls_master_addr};
use support::{TempDir, free_port, valkey_server, wait_until};
use valkyrie_protocol::Frame;

fn valkey_sentinel() -> std::path::PathBuf {
    let path = std::env::var("VALKEY_SENTINEL").unwrap_or_else(|_| "valkey-sentinel".into());
    let found = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(found, "valkey-sentinel not found ({path}); run scripts/test");
    path.into()
}

/// A sentinel.conf for one peer: TLS only, quorum 2.
fn conf(dir: &Path, pki: &Pki, tls_port: u16, master: u16, valkyrie: bool) -> std::path::PathBuf {
    let mut text = format!(
        "port 0\nbind 127.0.0.1\ndir {}\n{}{}\
         sentinel monitor mymaster 127.0.0.1 {master} 2\n\
         sentinel down-after-milliseconds mymaster 1000\n\
         sentinel failover-timeout mymaster 10000\n",
        dir.display(),
        pki.server_directives(tls_port, "yes"),
        pki.replication_directives(false),
    );
    if valkyrie {
        text.push_str("index-port 0\nadmin-port 0\n");
    }
    let path = dir.join("sentinel.conf");
    std::fs::write(&path, text).unwrap();
    path
}

/// How many other sentinels `port` lists for the group.
fn peers_known(port: u16, pki: &Pki) -> usize {
    match tls_call(
        port,
        pki.client_config(Who::Client),
        &["SENTINEL", "sentinels", "mymaster"],
    ) {
        Ok(Frame::Array(v)) => v.len(),
        _ => 0,
    }
}

#[test]
fn two_valkyries_and_a_sentinel_fail_over_with_every_link_tls() {
    let tmp = TempDir::new("tls-peers");
    let pki = Pki::new(&tmp.0.join("pki"));
    let (mut master, r1, r2) = start_tls_trio(&valkey_server(), &tmp.0, &pki);
    let bin = Path::new(env!("CARGO_BIN_EXE_valkyrie"));
    let mut daemons = Vec::new();
    let mut ports = Vec::new();
    for (i, valkyrie) in [true, true, false].into_iter().enumerate() {
        let dir = tmp.0.join(format!("s{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let conf = conf(&dir, &pki, port, master.port, valkyrie);
        let exe = if valkyrie {
            bin.to_path_buf()
        } else {
            valkey_sentinel()
        };
        daemons.push(DaemonProc::start(&exe, &conf, &dir.join("log")));
        ports.push(port);
    }
    // Hellos over the TLS pub/sub links, then peer links over TLS: each
    // lists the other two.
    wait_until(Duration::from_secs(20), || {
        ports.iter().all(|&p| peers_known(p, &pki) == 2)
    });
    for &p in &ports {
        assert_eq!(
            tls_master_addr(p, pki.client_config(Who::Client), "mymaster"),
            Some(("127.0.0.1".into(), master.port))
        );
    }
    master.kill();
    // An election over TLS peer links, a promotion over a TLS link: all
    // three advertise the same replica as the new master.
    let replicas = [r1.port, r2.port];
    wait_until(Duration::from_secs(30), || {
        let seen: Vec<_> = ports
            .iter()
            .map(|&p| tls_master_addr(p, pki.client_config(Who::Client), "mymaster"))
            .collect();
        seen.iter().all(|s| {
            s.as_ref()
                .is_some_and(|(_, port)| replicas.contains(port) && Some(s) == seen.first())
        })
    });
    let (_, promoted) =
        tls_master_addr(ports[0], pki.client_config(Who::Client), "mymaster").unwrap();
    let role = support::tls::tls_info_field(
        promoted,
        pki.client_config(Who::Client),
        "replication",
        "role",
    );
    assert_eq!(role.as_deref(), Some("master"));
    // The other replica follows it.
    let other = if promoted == r1.port { r2.port } else { r1.port };
    wait_until(Duration::from_secs(20), || {
        support::tls::tls_info_field(
            other,
            pki.client_config(Who::Client),
            "replication",
            "master_port",
        ) == Some(promoted.to_string())
    });
    for d in &mut daemons {
        assert!(d.running(), "a sentinel died: {}", d.log_text());
    }
}
