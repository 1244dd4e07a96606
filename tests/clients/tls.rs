//! Real clients over TLS, with real processes: valkey-cli, redis-py,
//! valkey-py and ioredis reach the daemon's Sentinel TLS port and the
//! TLS-only data nodes, discover the master and a replica, and follow a
//! failover (tests/clients/tls_client.py, tests/clients/tls_client.js).
//!
//! Certificates are made at test time (tests/support/tls/pki.rs). Setting
//! `VALKYRIE_TLS_SENTINEL` to a `valkey-sentinel` binary runs the test on
//! it instead of Valkyrie, which checks the test itself.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::clients::Proc;
use support::tls::*;
use support::*;

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
