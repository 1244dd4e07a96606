//! The notification and client-reconfig scripts, run by a real daemon
//! beside real servers (`src/scripts/`, `src/runtime/scripts.rs`): each
//! script is a `/bin/sh` recorder named relative to `dir`, which appends
//! its argument count, its arguments and its working directory to a file.
//!
//! - `SENTINEL SET mymaster quorum 1` runs the notification script with
//!   `+set` and the event's payload, two arguments, in `dir`;
//! - `SENTINEL FAILOVER` runs the client-reconfig script as the leader,
//!   from the old master to the new one, and the notification script with
//!   `+switch-master`;
//! - `SENTINEL SET` refuses a path that is not a program, clears with
//!   `""`, and refuses any change under `deny-scripts-reconfig yes`;
//! - `SENTINEL REMOVE` runs the script with `-monitor`;
//! - `SENTINEL PENDING-SCRIPTS` and INFO show a script that is running.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::*;
use valkyrie_protocol::Frame;

/// Writes the recorder `name` in `dir`, recording to `<name>.log`.
fn recorder(dir: &Path, name: &str) -> PathBuf {
    let log = dir.join(format!("{name}.log"));
    let script = dir.join(name);
    std::fs::write(
        &script,
        format!(
            // One write per run: runs go on at once, and appends of one
            // write each do not interleave.
            "#!/bin/sh\nline=\"$#\"\nfor a in \"$@\"; do line=\"$line [$a]\"; done\n\
             printf '%s cwd=%s\\n' \"$line\" \"$(pwd)\" >> '{}'\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    log
}

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `args` on `port`, answered `+OK`.
fn ok(port: u16, args: &[&str]) {
    assert_eq!(call(port, args), Frame::Simple("OK".into()), "{args:?}");
}

/// `SENTINEL SET mymaster notification-script <path>`'s reply.
fn set_notification_script(port: u16, path: &str) -> Frame {
    call(
        port,
        &["SENTINEL", "SET", "mymaster", "notification-script", path],
    )
}

/// A recorder's line: its argument count and arguments, then `dir`.
fn recorded(args: &str, dir: &Path) -> String {
    format!("{args} cwd={}", dir.display())
}

fn text(f: &Frame) -> String {
    f.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

async fn daemon(dir: &Path, master: u16, deny: bool) -> valkyrie::daemon::Daemon {
    let mut g = fast_group(master);
    g.quorum = 1;
    g.notification_script = Some("notify.sh".into());
    g.client_reconfig_script = Some("reconf.sh".into());
    let mut cfg = daemon_config(dir, vec![g]);
    cfg.deny_scripts_reconfig = deny;
    valkyrie::daemon::Daemon::start(cfg).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_run_with_sentinels_arguments_in_dir() {
    let tmp = TempDir::new("scripts");
    let (master, r1, r2) = start_trio(&valkey_server(), &tmp.0);
    let dir = tmp.0.join("state");
    std::fs::create_dir_all(&dir).unwrap();
    let dir = std::path::absolute(&dir).unwrap();
    let notified = recorder(&dir, "notify.sh");
    let reconfigured = recorder(&dir, "reconf.sh");
    let d = daemon(&dir, master.port, false).await;
    let sp = d.sentinel_addrs[0].port();
    replicas_known(&d.handle, 2).await;

    // At the start, each group's `+monitor`, as Sentinel's.
    let monitor = recorded(
        &format!(
            "2 [+monitor] [master mymaster 127.0.0.1 {} quorum 1]",
            master.port
        ),
        &dir,
    );
    wait_until(Duration::from_secs(10), || {
        lines(&notified).contains(&monitor)
    });
    // A `+set` runs the notification script: two arguments, in `dir`.
    ok(sp, &["SENTINEL", "SET", "mymaster", "quorum", "1"]);
    let set = recorded(
        &format!(
            "2 [+set] [master mymaster 127.0.0.1 {} quorum 1]",
            master.port
        ),
        &dir,
    );
    wait_until(Duration::from_secs(10), || lines(&notified).contains(&set));

    // A switchover: the leader's client-reconfig call, old → new.
    ok(sp, &["SENTINEL", "FAILOVER", "mymaster"]);
    wait_until(Duration::from_secs(20), || !lines(&reconfigured).is_empty());
    let call_line = lines(&reconfigured).remove(0);
    let promoted = [r1.port, r2.port]
        .into_iter()
        .find(|p| call_line.contains(&format!("[127.0.0.1] [{p}] cwd")))
        .unwrap_or_else(|| panic!("no replica promoted in {call_line:?}"));
    assert_eq!(
        call_line,
        recorded(
            &format!(
                "7 [mymaster] [leader] [start] [127.0.0.1] [{}] [127.0.0.1] [{promoted}]",
                master.port
            ),
            &dir
        )
    );
    let switch = recorded(
        &format!(
            "2 [+switch-master] [mymaster 127.0.0.1 {} 127.0.0.1 {promoted}]",
            master.port
        ),
        &dir,
    );
    wait_until(Duration::from_secs(10), || {
        lines(&notified).contains(&switch)
    });
    // NOTICE events run nothing.
    assert!(
        !lines(&notified).iter().any(|l| l.contains("[+slave]")),
        "{:?}",
        lines(&notified)
    );

    // SET: only programs, `""` clears.
    std::fs::write(dir.join("test.txt"), "not a program\n").unwrap();
    assert_eq!(
        set_notification_script(sp, "test.txt"),
        Frame::Error("ERR Notification script seems non existing or non executable".into())
    );
    assert_eq!(
        call(
            sp,
            &[
                "SENTINEL",
                "SET",
                "mymaster",
                "client-reconfig-script",
                "nosuch.sh"
            ]
        ),
        Frame::Error(
            "ERR Client reconfiguration script seems non existing or non executable".into()
        )
    );

    // A script that is running shows in PENDING-SCRIPTS and INFO.
    let slow = dir.join("slow.sh");
    std::fs::write(&slow, "#!/bin/sh\nexec sleep 3\n").unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        set_notification_script(sp, "slow.sh"),
        Frame::Simple("OK".into())
    );
    wait_until(Duration::from_secs(10), || {
        let Frame::Array(jobs) = call(sp, &["SENTINEL", "PENDING-SCRIPTS"]) else {
            return false;
        };
        jobs.iter().any(|j| {
            let Frame::Array(kv) = j else { return false };
            let names: Vec<String> = kv.chunks(2).map(|p| text(&p[0])).collect();
            names == ["argv", "flags", "pid", "run-time", "retry-num"] && text(&kv[3]) == "running"
        })
    });
    let running = info_running(sp);
    assert!(running >= 1, "sentinel_running_scripts {running}");
    assert_eq!(set_notification_script(sp, ""), Frame::Simple("OK".into()));
    // Removed: its `-monitor` still runs its script.
    assert_eq!(
        set_notification_script(sp, "notify.sh"),
        Frame::Simple("OK".into())
    );
    ok(sp, &["SENTINEL", "REMOVE", "mymaster"]);
    wait_until(Duration::from_secs(10), || {
        lines(&notified)
            .iter()
            .any(|l| l.starts_with("2 [-monitor] [master mymaster "))
    });
    d.stop().await.unwrap();
}

fn info_running(port: u16) -> u64 {
    let Frame::Bulk(b) = call(port, &["INFO", "sentinel"]) else {
        panic!("no INFO");
    };
    String::from_utf8_lossy(&b)
        .lines()
        .find_map(|l| l.strip_prefix("sentinel_running_scripts:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_deny_scripts_reconfig_yes_no_script_is_set_at_runtime() {
    let tmp = TempDir::new("scripts-deny");
    let master = Server::start(&valkey_server(), &tmp.0, free_port(), None);
    let dir = std::path::absolute(tmp.0.join("state")).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    recorder(&dir, "notify.sh");
    recorder(&dir, "reconf.sh");
    let d = daemon(&dir, master.port, true).await;
    let sp = d.sentinel_addrs[0].port();
    let denied = Frame::Error(
        "ERR Reconfiguration of scripts path is denied for security reasons. Check the \
         deny-scripts-reconfig configuration directive in your Sentinel configuration"
            .into(),
    );
    for value in ["notify.sh", ""] {
        assert_eq!(set_notification_script(sp, value), denied);
    }
    d.stop().await.unwrap();
}
