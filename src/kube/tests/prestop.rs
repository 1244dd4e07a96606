//! The Valkey container's `preStop` hook, run by `sh` against a stand-in
//! `valkey-cli` that answers `INFO replication` from a file the test
//! rewrites: it waits while the pod is a master with replicas, and
//! returns once the switchover made it a replica, or at once when there
//! is nothing to hand over.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::examples;
use super::golden::{example_cr, observed};
use crate::kube::render::render;

/// The hook's command, as the StatefulSet renders it.
fn hook() -> String {
    let (_, text) = examples()
        .into_iter()
        .find(|(s, _)| s == "minimal")
        .unwrap();
    let d = render(&example_cr(&text), &observed()).unwrap();
    let sts = serde_json::to_value(&d.stateful_set).unwrap();
    let command = &sts["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]
        ["command"];
    assert_eq!(command[0], "sh");
    assert_eq!(command[1], "-c");
    command[2].as_str().map(str::to_owned).unwrap()
}

/// Runs the hook with `bin/valkey-cli` printing `dir/info`.
fn start(dir: &Path) -> Child {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let cli = bin.join("valkey-cli");
    std::fs::write(
        &cli,
        format!("#!/bin/sh\ncat {}\n", dir.join("info").display()),
    )
    .unwrap();
    std::fs::set_permissions(&cli, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .arg("-c")
        .arg(hook())
        .env("PATH", path)
        .spawn()
        .unwrap()
}

fn info(dir: &Path, role: &str, replicas: u32) {
    let text = format!("# Replication\r\nrole:{role}\r\nconnected_slaves:{replicas}\r\n");
    std::fs::write(dir.join("info.tmp"), text).unwrap();
    std::fs::rename(dir.join("info.tmp"), dir.join("info")).unwrap();
}

/// Waits for `child` to end, at most `limit`; whether it did. (Real
/// time: the hook is a real process, with its own `sleep`.)
#[allow(clippy::disallowed_methods)]
fn ends_within(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("valkyrie-prestop-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_hook_waits_while_a_master_with_replicas_and_ends_once_it_is_a_replica() {
    let dir = scratch("master");
    info(&dir, "master", 2);
    let mut hook = start(&dir);
    assert!(
        !ends_within(&mut hook, Duration::from_secs(1)),
        "a master with replicas waits for the switchover"
    );
    info(&dir, "slave", 0);
    assert!(
        ends_within(&mut hook, Duration::from_secs(5)),
        "a replica stops"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_hook_ends_at_once_with_nothing_to_hand_over() {
    for (tag, role, replicas) in [("replica", "slave", 0), ("alone", "master", 0)] {
        let dir = scratch(tag);
        info(&dir, role, replicas);
        let mut hook = start(&dir);
        assert!(
            ends_within(&mut hook, Duration::from_secs(5)),
            "{tag}: nothing to wait for"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    // No answer at all (Valkey already gone: the stand-in finds no
    // file and fails): no wait either.
    let dir = scratch("gone");
    let mut hook = start(&dir);
    assert!(ends_within(&mut hook, Duration::from_secs(5)), "gone");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_hook_waits_within_the_grace_period_and_not_at_all_without_room() {
    let (_, text) = examples()
        .into_iter()
        .find(|(s, _)| s == "minimal")
        .unwrap();
    let lifecycle = |grace: Option<i64>| {
        let mut vc = example_cr(&text);
        vc.spec.termination_grace_period_seconds = grace;
        let d = render(&vc, &observed()).unwrap();
        let sts = serde_json::to_value(&d.stateful_set).unwrap();
        let pod = &sts["spec"]["template"]["spec"];
        assert_eq!(pod["terminationGracePeriodSeconds"], grace.unwrap_or(30));
        pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][2]
            .as_str()
            .map(str::to_owned)
    };
    let waits = |hook: Option<String>| {
        hook.map(|h| h.starts_with(&format!("end=$(($(date +%s) + {})); ", 20)))
    };
    assert_eq!(waits(lifecycle(None)), Some(true), "20 s of the default 30");
    assert_eq!(
        waits(lifecycle(Some(120))),
        Some(true),
        "never more than 20 s"
    );
    assert!(
        lifecycle(Some(15)).is_some_and(|h| h.starts_with("end=$(($(date +%s) + 5)); ")),
        "10 s left for Valkey's own stop"
    );
    assert_eq!(lifecycle(Some(10)), None, "no room: no hook");
}
