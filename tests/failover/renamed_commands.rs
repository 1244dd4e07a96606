//! `sentinel rename-command`: on Valkey servers started with `REPLICAOF`
//! and `CONFIG` renamed (and `SLAVEOF` disabled), a failover through
//! Valkyrie completes: the links send the renamed commands, as Sentinel
//! does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;
use valkyrie_protocol::Frame;

const REPLICAOF: &str = "replicaof-7f3a";
const CONFIG: &str = "config-7f3a";

/// A valkey-server with commands renamed, killed by PID on drop.
struct Renamed {
    child: Child,
    port: u16,
}

/// A renamed master and two renamed replicas, once both replicas report
/// an up link.
async fn renamed_trio(bin: &Path, dir: &Path) -> (Renamed, Renamed, Renamed) {
    let pm = free_port();
    let master = Renamed::start(bin, dir, pm, None);
    let r1 = Renamed::start(bin, dir, free_port(), Some(pm));
    let r2 = Renamed::start(bin, dir, free_port(), Some(pm));
    let (p1, p2) = (r1.port, r2.port);
    tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || {
            [p1, p2]
                .iter()
                .all(|&p| info_field(p, "master_link_status").as_deref() == Some("up"))
        })
    })
    .await
    .unwrap();
    (master, r1, r2)
}

impl Renamed {
    fn start(bin: &Path, dir: &Path, port: u16, replicaof: Option<u16>) -> Renamed {
        let dir = dir.join(format!("n{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(["--rename-command", "REPLICAOF", REPLICAOF])
            .args(["--rename-command", "CONFIG", CONFIG])
            .args(["--rename-command", "SLAVEOF", ""])
            .args([
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ]);
        if let Some(m) = replicaof {
            cmd.args(["--replicaof", "127.0.0.1"]).arg(m.to_string());
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_until(Duration::from_secs(10), || {
            matches!(try_call(port, &["PING"]), Ok(Frame::Simple(_)))
        });
        Renamed { child, port }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Renamed {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_completes_with_renamed_commands() {
    let bin = valkey_server();
    let tmp = TempDir::new("renamed");
    let (mut master, _r1, _r2) = renamed_trio(&bin, &tmp.0).await;
    let (pm, p1, p2) = (master.port, _r1.port, _r2.port);
    // The servers really refuse the original names.
    assert!(matches!(
        call(p1, &["REPLICAOF", "NO", "ONE"]),
        Frame::Error(_)
    ));
    assert!(matches!(
        call(p1, &["CONFIG", "GET", "port"]),
        Frame::Error(_)
    ));

    let mut g = fast_group(pm);
    g.renamed_commands = vec![
        ("replicaof".into(), REPLICAOF.into()),
        ("CONFIG".into(), CONFIG.into()),
    ];
    let state = tmp.0.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let d = valkyrie::daemon::Daemon::start(daemon_config(&state, vec![g]))
        .await
        .unwrap();
    replicas_known(&d.handle, 2).await;

    master.kill();
    let topo = d.handle.topology.clone();
    let new_master = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(30), || {
            topo.borrow().groups["mymaster"].master.port != pm
        });
        let new_master = topo.borrow().groups["mymaster"].master.port;
        let other = if new_master == p1 { p2 } else { p1 };
        match call(new_master, &["ROLE"]) {
            Frame::Array(items) => assert_eq!(items[0], Frame::bulk("master")),
            other => panic!("{other:?}"),
        }
        // The other replica was told (renamed REPLICAOF) to follow it.
        wait_until(Duration::from_secs(20), || {
            info_field(other, "master_port").as_deref() == Some(&new_master.to_string())
        });
        new_master
    })
    .await
    .unwrap();
    assert!(new_master == p1 || new_master == p2);
    d.stop().await.unwrap();
}

/// A rename made with `SENTINEL SET` applies to the links at once: they
/// reconnect under it, and the failover that follows sends the renamed
/// commands. A rename onto another real command is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_set_at_run_time_applies_to_every_link() {
    let bin = valkey_server();
    let tmp = TempDir::new("renamed-set");
    let (mut master, _r1, _r2) = renamed_trio(&bin, &tmp.0).await;
    let (pm, p1, p2) = (master.port, _r1.port, _r2.port);
    let state = tmp.0.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let d = valkyrie::daemon::Daemon::start(daemon_config(&state, vec![fast_group(pm)]))
        .await
        .unwrap();
    replicas_known(&d.handle, 2).await;
    let sp = d.sentinel_addrs[0].port();
    let set = move |args: &[&str]| {
        let mut full = vec!["SENTINEL", "SET", "mymaster", "rename-command"];
        full.extend_from_slice(args);
        call(sp, &full)
    };
    let topo = d.handle.topology.clone();
    let new_master = tokio::task::spawn_blocking(move || {
        assert!(matches!(set(&["PING", "FLUSHALL"]), Frame::Error(_)));
        assert_eq!(set(&["REPLICAOF", REPLICAOF]), Frame::simple("OK"));
        assert_eq!(set(&["CONFIG", CONFIG]), Frame::simple("OK"));
        master.kill();
        wait_until(Duration::from_secs(30), || {
            topo.borrow().groups["mymaster"].master.port != pm
        });
        let new_master = topo.borrow().groups["mymaster"].master.port;
        match call(new_master, &["ROLE"]) {
            Frame::Array(items) => assert_eq!(items[0], Frame::bulk("master")),
            other => panic!("{other:?}"),
        }
        new_master
    })
    .await
    .unwrap();
    assert!(new_master == p1 || new_master == p2);
    d.stop().await.unwrap();
}

/// Without the renames, the promotion is refused (`REPLICAOF` is unknown
/// to the servers) and never confirms: the readiness verdict shows the
/// failover running, then the back-off window until its end, as the
/// failover-timeout sets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_promotion_shows_the_window_in_the_verdict() {
    let bin = valkey_server();
    let tmp = TempDir::new("renamed-window");
    let (mut master, _r1, _r2) = renamed_trio(&bin, &tmp.0).await;
    let pm = master.port;
    let mut g = fast_group(pm);
    g.failover_timeout = Duration::from_millis(3_000);
    let state = tmp.0.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let d = valkyrie::daemon::Daemon::start(daemon_config(&state, vec![g]))
        .await
        .unwrap();
    replicas_known(&d.handle, 2).await;

    master.kill();
    let topo = d.handle.topology.clone();
    let (running, window) = tokio::task::spawn_blocking(move || {
        let label = || {
            let t = topo.borrow().clone();
            t.readiness.get("mymaster").map(|v| {
                let r = &v.readiness;
                let until = r.holds.iter().find_map(|h| match h {
                    valkyrie::core::Reason::Window { until } => Some(until - v.at),
                    _ => None,
                });
                (r.label(), until, v.text())
            })
        };
        let mut seen = None;
        wait_until(Duration::from_secs(20), || {
            seen = label().filter(|(l, ..)| *l == "failover_running");
            seen.is_some()
        });
        let running = seen.take().unwrap();
        wait_until(Duration::from_secs(20), || {
            seen = label().filter(|(l, ..)| *l == "window");
            seen.is_some()
        });
        (running, seen.unwrap())
    })
    .await
    .unwrap();
    assert!(
        running
            .2
            .starts_with("a failover is running (epoch 1, promoting 127.0.0.1:"),
        "{}",
        running.2
    );
    let left = window.1.unwrap();
    assert!(
        left > 0 && left <= 3_000,
        "the window ends within the failover-timeout: {left} ms"
    );
    assert!(window.2.starts_with("no new failover for "), "{}", window.2);
    d.stop().await.unwrap();
}
