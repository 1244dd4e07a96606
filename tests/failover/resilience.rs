//! Trouble in one place must not become trouble everywhere:
//!
//! - many unreachable groups do not delay a healthy group's PINGs or
//!   timers (no false `+sdown`), against a real master and replica;
//! - a state file that cannot be written refuses `SENTINEL SET` with
//!   Sentinel's error and rolls it back, holds a failover back while its
//!   epoch cannot be saved, and monitoring goes on: once the file can be
//!   written again the topology follows a real master kill;
//! - a runtime that panics makes the process exit non-zero (test hook
//!   `VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS`).
//!
//! `VALKYRIE_RESILIENCE_SECS` lengthens the starvation test's window
//! (default 20 s).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::wire::*;
use support::*;
use valkyrie::config::GroupConfig;
use valkyrie::core::Channel;
use valkyrie::daemon::Daemon;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_groups_do_not_starve_a_healthy_one() {
    let bin = valkey_server();
    let tmp = TempDir::new("starve");
    let pm = free_port();
    let _master = Server::start(&bin, &tmp.0, pm, None);
    let replica = Server::start(&bin, &tmp.0, free_port(), Some(pm));
    wait_until(Duration::from_secs(10), || {
        info_field(replica.port, "master_link_status").as_deref() == Some("up")
    });
    // 1,000 groups whose master refuses every connection (nothing listens
    // on port 1), and one healthy group with down-after 1000 ms.
    let mut groups: Vec<GroupConfig> = (0..1000)
        .map(|i| {
            let mut g = GroupConfig::new(format!("u{i}"), "127.0.0.1", 1, 1);
            g.down_after = Duration::from_millis(1000);
            g
        })
        .collect();
    let mut healthy = fast_group(pm);
    healthy.name = "healthy".into();
    groups.push(healthy);
    let d = Daemon::start(daemon_config(&tmp.0, groups)).await.unwrap();
    let mut events = d.handle.events.subscribe();
    let h = d.handle.clone();
    tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || {
            let t = h.topology.borrow().clone();
            let g = &t.groups["healthy"];
            g.replicas.len() == 1 && g.replicas.iter().all(|r| !r.run_id.is_empty())
        })
    })
    .await
    .unwrap();
    let secs: u64 = std::env::var("VALKYRIE_RESILIENCE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut false_downs = Vec::new();
    let mut sample = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            e = events.recv() => match e {
                Ok(e) => {
                    if e.group.as_deref() == Some("healthy")
                        && matches!(
                            e.channel,
                            Channel::Sdown | Channel::Odown | Channel::TryFailover
                        )
                    {
                        false_downs.push(format!("{} {}", e.channel, e.payload));
                    }
                }
                // The 1,000 dead groups' own events can outrun the
                // channel; the topology samples below still see ours.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event stream: {e}"),
            },
            _ = sample.tick() => {
                let t = d.handle.topology.borrow().clone();
                let g = &t.groups["healthy"];
                if g.master_down || g.replicas.iter().any(|r| r.down) || g.failover_in_progress {
                    false_downs.push(format!("sampled: {g:?}"));
                }
            }
        }
    }
    let t = d.handle.topology.borrow().clone();
    let g = &t.groups["healthy"];
    assert_eq!(g.master.port, pm);
    assert!(!g.master_down && g.replicas.iter().all(|r| !r.down));
    assert_eq!(g.config_epoch, 0, "a failover was attempted");
    assert!(
        false_downs.is_empty(),
        "healthy group marked down while 1,000 others were unreachable: {false_downs:?}"
    );
    d.stop().await.unwrap();
}

/// Blocks the state file's writes: its temporary file becomes a directory
/// (root ignores permissions; it cannot open a directory for writing).
fn block_state(dir: &std::path::Path) -> std::path::PathBuf {
    let tmp = dir.join("valkyrie-state.json.tmp");
    let _ = std::fs::remove_file(&tmp);
    std::fs::create_dir_all(tmp.join("blocked")).unwrap();
    tmp
}

fn role(port: u16) -> Option<String> {
    info_field(port, "role")
}

fn healthz(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwritable_state_refuses_changes_and_holds_failover_back() {
    let bin = valkey_server();
    let tmp = TempDir::new("unwritable");
    let state_dir = tmp.0.join("state");
    std::fs::create_dir_all(&state_dir).unwrap();
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let pm = master.port;
    let mut cfg = daemon_config(&state_dir, vec![fast_group(pm)]);
    cfg.admin_port = free_port();
    let admin = cfg.admin_port;
    let d = Daemon::start(cfg).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    replicas_known(&d.handle, 2).await;

    // An administrative change that cannot be saved: refused with
    // Sentinel's exact reply, and not made.
    let blocked = block_state(&state_dir);
    let mut c = Raw::connect(sp);
    assert_eq!(
        c.ask(&cmd(&["SENTINEL", "SET", "mymaster", "quorum", "7"])),
        "-ERR Failed to save config file. Check server logs.\r\n"
    );
    assert_eq!(d.handle.topology.borrow().groups["mymaster"].quorum, 2);
    assert_eq!(
        c.ask(&cmd(&["SENTINEL", "FLUSHCONFIG"])),
        "-ERR Failed to save config file. Check server logs.\r\n"
    );
    // Still monitoring: PING answered, the master still advertised.
    assert_eq!(c.ask(&cmd(&["PING"])), "+PONG\r\n");

    // A failover whose epoch cannot be saved does not act.
    master.kill();
    let body = tokio::task::spawn_blocking(move || {
        let mut body = String::new();
        wait_until(Duration::from_secs(10), || {
            body = healthz(admin);
            body.contains("degraded: state file not writable")
        });
        body
    })
    .await
    .unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    // Several seconds past down-after: nothing promoted, nothing advertised.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(role(r1.port).as_deref(), Some("slave"));
    assert_eq!(role(r2.port).as_deref(), Some("slave"));
    assert_eq!(
        d.handle.topology.borrow().groups["mymaster"].master.port,
        pm
    );

    // Space is back: the failover goes ahead and the topology follows.
    std::fs::remove_dir_all(&blocked).unwrap();
    let h = d.handle.clone();
    tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(30), || {
            let p = h.topology.borrow().groups["mymaster"].master.port;
            p == r1.port || p == r2.port
        })
    })
    .await
    .unwrap();
    let new_master = d.handle.topology.borrow().groups["mymaster"].master.port;
    assert_eq!(role(new_master).as_deref(), Some("master"));
    tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || healthz(admin).ends_with("ok\n"))
    })
    .await
    .unwrap();
    // And changes are accepted again.
    assert_eq!(
        c.ask(&cmd(&["SENTINEL", "SET", "mymaster", "quorum", "3"])),
        "+OK\r\n"
    );
    drop((r1, r2));
    d.stop().await.unwrap();
}

#[test]
fn a_runtime_panic_ends_the_process_with_a_failure() {
    let tmp = TempDir::new("panic");
    let conf = tmp.0.join("sentinel.conf");
    let port = free_port();
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\nadmin-port 0\nindex-port 0\ndir {}\n\
             sentinel monitor mymaster 127.0.0.1 1 1\n",
            tmp.0.display()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_valkyrie"))
        .arg(&conf)
        .env("VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS", "1500")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Serving before the panic.
    wait_until(Duration::from_secs(10), || {
        matches!(
            try_call(port, &["PING"]),
            Ok(valkyrie_protocol::Frame::Simple(_))
        )
    });
    let mut status = None;
    wait_until(Duration::from_secs(20), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let status = status.unwrap();
    let mut log = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(!status.success(), "exited with {status:?}\n{log}");
    assert!(log.contains("the runtime died: panicked"), "{log}");
    // Nothing answers from the dead runtime.
    assert!(try_call(port, &["PING"]).is_err());
}
