//! Protected mode on the Sentinel port (`docs/security.md`, "Protected
//! mode"), with a real client from outside the loopback: a network
//! namespace this test makes, joined to the host by a veth pair on a
//! private /30 of its own. Without a password, the outside client may read
//! (`get-master-addr-by-name`, `SENTINEL MASTERS`) and gets `-DENIED` for
//! every change (`SET`, `FAILOVER`, `PUBLISH` of a hello, a vote request);
//! the loopback may change things; with a password, a client that logs in
//! may too, from anywhere; `protected-mode no` opens the port.
//!
//! Needs root (`ip netns`, `ip link`), as the partition tests do.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::process::Command;

use support::*;
use valkyrie::daemon::Daemon;

/// A network namespace joined to the host by a veth pair: the host end
/// has `host`, the namespace's end `inside`. Removed on drop.
struct Outside {
    name: String,
    link: String,
    host: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Outside {
    fn new() -> Outside {
        let pid = std::process::id();
        let name = format!("vkpm{pid}");
        let link = format!("vkh{}", pid % 100_000);
        let peer = format!("vkn{}", pid % 100_000);
        // A /30 of 10.254.x.y chosen by the pid, so concurrent runs differ.
        let (x, y) = ((pid / 64) % 250, (pid % 64) * 4);
        let host = format!("10.254.{x}.{}", y + 1);
        let inside = format!("10.254.{x}.{}", y + 2);
        ip(&["netns", "add", &name]);
        let o = Outside {
            name: name.clone(),
            link: link.clone(),
            host: host.clone(),
        };
        ip(&["link", "add", &link, "type", "veth", "peer", "name", &peer]);
        ip(&["link", "set", &peer, "netns", &name]);
        ip(&["addr", "add", &format!("{host}/30"), "dev", &link]);
        ip(&["link", "set", &link, "up"]);
        ip(&[
            "netns",
            "exec",
            &name,
            "ip",
            "addr",
            "add",
            &format!("{inside}/30"),
            "dev",
            &peer,
        ]);
        ip(&["netns", "exec", &name, "ip", "link", "set", &peer, "up"]);
        ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        o
    }

    /// `valkey-cli` run inside the namespace against the host end.
    fn cli(&self, port: u16, args: &[&str]) -> String {
        let port = port.to_string();
        let mut full = vec![
            "netns",
            "exec",
            &self.name,
            "valkey-cli",
            "-h",
            &self.host,
            "-p",
            &port,
        ];
        full.extend_from_slice(args);
        let out = Command::new("ip").args(&full).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
            + String::from_utf8_lossy(&out.stderr).trim()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn local_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("valkey-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

async fn daemon(
    dir: &std::path::Path,
    pm: u16,
    extra: impl FnOnce(&mut valkyrie::config::Config),
) -> Daemon {
    std::fs::create_dir_all(dir).unwrap();
    let mut config = daemon_config(dir, vec![fast_group(pm)]);
    config.bind = vec!["0.0.0.0".into()];
    extra(&mut config);
    Daemon::start(config).await.unwrap()
}

/// `SENTINEL SET mymaster down-after-milliseconds <ms>`, after `-a`
/// with the test's password when `auth`.
fn set_down_after(auth: bool, ms: &'static str) -> Vec<&'static str> {
    let mut args = Vec::new();
    if auth {
        args.extend(["-a", "pm-secret-1", "--no-auth-warning"]);
    }
    args.extend(["SENTINEL", "SET", "mymaster", "down-after-milliseconds", ms]);
    args
}

const CHANGES: [&[&str]; 4] = [
    &[
        "SENTINEL",
        "SET",
        "mymaster",
        "down-after-milliseconds",
        "5000",
    ],
    &["SENTINEL", "FAILOVER", "mymaster"],
    &[
        "PUBLISH",
        "__sentinel__:hello",
        "10.0.0.9,26379,e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0,1,mymaster,10.0.0.9,6379,1",
    ],
    &["SHUTDOWN"],
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_port_refuses_changes_from_outside_the_loopback() {
    let bin = valkey_server();
    let tmp = TempDir::new("protected");
    let master = Server::start(&bin, &tmp.0, free_port(), None);
    let pm = master.port;
    let outside = tokio::task::spawn_blocking(Outside::new).await.unwrap();

    // No password: reads from outside, changes only from the loopback.
    let d = daemon(&tmp.0.join("open"), pm, |_| {}).await;
    let sp = d.sentinel_addrs[0].port();
    let outside = tokio::task::spawn_blocking(move || {
        let addr = outside.cli(sp, &["SENTINEL", "get-master-addr-by-name", "mymaster"]);
        assert!(addr.contains(&pm.to_string()), "{addr}");
        let masters = outside.cli(sp, &["SENTINEL", "MASTERS"]);
        assert!(masters.contains("mymaster"), "{masters}");
        for change in CHANGES {
            let reply = outside.cli(sp, change);
            assert!(reply.contains("DENIED"), "{change:?}: {reply}");
        }
        let vote = outside.cli(
            sp,
            &[
                "SENTINEL",
                "is-master-down-by-addr",
                "127.0.0.1",
                &pm.to_string(),
                "1",
                "e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0",
            ],
        );
        assert!(vote.contains("DENIED"), "{vote}");
        // The bare question only reads.
        let question = outside.cli(
            sp,
            &[
                "SENTINEL",
                "is-master-down-by-addr",
                "127.0.0.1",
                &pm.to_string(),
                "0",
                "*",
            ],
        );
        assert!(!question.contains("DENIED"), "{question}");
        // Nothing changed; the loopback may change it.
        assert_eq!(
            master_field(sp, "down-after-milliseconds").as_deref(),
            Some("1000")
        );
        assert_eq!(local_cli(sp, &set_down_after(false, "2000")), "OK");
        outside
    })
    .await
    .unwrap();
    d.stop().await.unwrap();

    // With a password: a client that logs in may change things from
    // anywhere; one that does not is refused as Valkey refuses it.
    let d = daemon(&tmp.0.join("password"), pm, |c| {
        c.requirepass = Some(valkyrie::config::Secret::new("pm-secret-1"));
    })
    .await;
    let sp = d.sentinel_addrs[0].port();
    let outside = tokio::task::spawn_blocking(move || {
        let reply = outside.cli(sp, &set_down_after(false, "3000"));
        assert!(reply.contains("NOAUTH"), "{reply}");
        let reply = outside.cli(sp, &set_down_after(true, "3000"));
        assert_eq!(reply, "OK");
        outside
    })
    .await
    .unwrap();
    d.stop().await.unwrap();

    // protected-mode no: open to anyone who can reach it.
    let d = daemon(&tmp.0.join("unprotected"), pm, |c| c.protected_mode = false).await;
    let sp = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let reply = outside.cli(sp, &set_down_after(false, "4000"));
        assert_eq!(reply, "OK");
        drop(outside);
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
    drop(master);
}
