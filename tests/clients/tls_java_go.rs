//! The Java and Go Sentinel clients of tests/clients/java_go.rs over TLS,
//! through a real SIGKILL failover: against one Valkyrie and, in the same
//! run, against one real valkey-sentinel, both with `port 0`, a
//! `tls-port`, `tls-replication yes` and the same certificates, watching
//! TLS-only valkey-servers (a master and two replicas, `tls-auth-clients
//! yes`, Valkey's default).
//!
//! Every client speaks TLS to the sentinel and to the data nodes, trusts
//! the test CA and presents the test client certificate, configured the
//! library's own way (tests/clients/java, tests/clients/go: the drivers
//! take the PEM files from VALKYRIE_CLIENT_TLS_CA, _CERT and _KEY):
//! Jedis (`JedisSentinelPool`, ssl and an SSLSocketFactory for the master
//! and the sentinel configs), Lettuce (RESP3, RESP2 and `MasterReplica`:
//! SSL sentinel URIs and SslOptions from the PEM files), Redisson
//! (`rediss://` sentinel addresses, trust and key manager factories; one
//! sentinel, so with `checkSentinelsList(false)`), Spring Data Redis
//! (`useSsl()` and Lettuce's SslOptions) and go-redis v9
//! (`FailoverOptions.TLSConfig`: `NewFailoverClient` in RESP3 and RESP2,
//! `NewFailoverClusterClient`).
//!
//! Each client discovers the master and the replicas, writes, reads the
//! write back from a replica, then the master is SIGKILLed and the same
//! client object writes again; the table printed at the end gives each
//! client's time from the kill to its first acknowledged write, on
//! Valkyrie and on valkey-sentinel (`VALKYRIE_CLIENT_TRIALS=N` repeats
//! both N times). Certificates are made at test time
//! (tests/support/tls/pki.rs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::clients::{
    Driver, GO_CLIENTS as GO, JAVA_ONE_SENTINEL as JAVA, RecoveryTable, driver_command,
};
use support::sentinel::valkey_sentinel;
use support::tls::*;
use support::{TempDir, free_port, valkey_server};
use valkyrie_protocol::Frame;

const S: Duration = Duration::from_secs(1);

/// `GET key` on the TLS-only node at `port`.
fn tls_get(port: u16, pki: &Pki, key: &str) -> Frame {
    tls_call(port, pki.client_config(Who::Client), &["GET", key])
        .unwrap_or_else(|e| panic!("GET {key} on {port}: {e}"))
}

/// One failover of a fresh TLS deployment watched by `daemon` (Valkyrie
/// when `is_valkyrie`, else valkey-sentinel), with both drivers attached:
/// each client's recovery time, and the failover's own (kill to the
/// sentinel advertising the new master with the other replica following
/// it).
fn one_failover(
    tag: &str,
    dir: &Path,
    pki: &Pki,
    daemon: &Path,
    is_valkyrie: bool,
) -> (Vec<(&'static str, u64)>, Duration) {
    let dir = dir.join(tag);
    let (mut master, r1, r2) = start_tls_trio(&valkey_server(), &dir, pki);
    let sp = free_port();
    let text = format!(
        "{}{}{}",
        pki.server_directives(sp, ""),
        pki.replication_directives(false),
        monitor(master.port, 1)
    );
    let _daemon = launch(daemon, is_valkyrie, &dir.join("daemon"), 0, sp, pki, &text);
    wait_replicas_known(sp, pki);
    let old = master.port;
    let replicas = [r1.port, r2.port];
    let mut running: Vec<Driver> = [("VALKYRIE_JAVA_CLIENTS", JAVA), ("VALKYRIE_GO_CLIENTS", GO)]
        .into_iter()
        .map(|(var, clients)| {
            let mut cmd = driver_command(var);
            cmd.env("VALKYRIE_CLIENT_TLS_CA", pki.ca_file())
                .env("VALKYRIE_CLIENT_TLS_CERT", pki.client_cert_file())
                .env("VALKYRIE_CLIENT_TLS_KEY", pki.client_key_file());
            Driver::start(cmd, &format!("{tag}/{var}"), &[sp], clients)
        })
        .collect();
    for r in &mut running {
        r.expect_before(old, &replicas);
    }
    master.kill();
    let killed = Instant::now();
    for r in &mut running {
        r.proc.go();
    }
    let new = wait_failover(sp, pki, replicas, 40 * S);
    let failover = killed.elapsed();
    let switch = format!("mymaster 127.0.0.1 {old} 127.0.0.1 {new}");
    let cfg = pki.client_config(Who::Client);
    let moved_on = || {
        let now = tls_master_addr(sp, cfg.clone(), "mymaster").map(|(_, p)| p);
        if now.is_some_and(|m| m != new) {
            assert!(!is_valkyrie, "{tag}: Valkyrie failed over a second time");
            eprintln!("{tag}: the sentinel failed over again, to {now:?}");
        }
        now
    };
    let get = |port: u16, key: &str| tls_get(port, pki, key);
    let mut recovered = Vec::new();
    for r in &mut running {
        recovered.extend(r.expect_after(new, &switch, &moved_on, &get));
    }
    (recovered, failover)
}

#[test]
fn java_and_go_clients_over_tls_follow_a_failover() {
    let trials: usize = std::env::var("VALKYRIE_CLIENT_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1)
        .max(1);
    let tmp = TempDir::new("tls-java-go");
    let pki = Pki::new(&tmp.0.join("pki"));
    let kinds: [(&'static str, PathBuf, bool); 2] = [
        (
            "valkyrie",
            PathBuf::from(env!("CARGO_BIN_EXE_valkyrie")),
            true,
        ),
        ("sentinel", valkey_sentinel(), false),
    ];
    let mut table = RecoveryTable::default();
    for trial in 0..trials {
        for (kind, bin, is_valkyrie) in &kinds {
            let tag = format!("{kind}-{trial}");
            let (recovered, failover) = one_failover(&tag, &tmp.0, &pki, bin, *is_valkyrie);
            eprintln!("tls {tag}: failover settled {failover:?} after the kill: {recovered:?}");
            table.add(kind, recovered, failover);
        }
    }
    table.print(
        &format!(
            "tls: 1 sentinel, {trials} trial(s); median ms from SIGKILL to the first acknowledged write, everything over TLS"
        ),
        "1 × Valkyrie (TLS)",
        "1 × valkey-sentinel (TLS)",
    );
}
