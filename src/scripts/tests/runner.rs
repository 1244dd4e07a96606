//! The runner with real `/bin/sh` scripts in a temporary directory: the
//! child's argv, arg0 and working directory, retries, errors, timeouts.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::core::{Channel, Event};
use crate::scripts::{MAX_ATTEMPTS, ScriptTimers, Scripts};

/// A fresh directory for one test.
fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("valkyrie-scripts-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.canonicalize().unwrap()
}

/// Writes an executable script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A runner in `dir` whose events are collected.
fn runner(dir: &Path, timers: ScriptTimers) -> (Scripts, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let scripts = Scripts::spawn(dir.to_path_buf(), timers, move |e| {
        sink.lock().unwrap().push(e);
    })
    .unwrap();
    (scripts, events)
}

/// Waits, at most 10 s, until `f` gives a value.
async fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits, at most 10 s, until the runner has no job left.
async fn drained(scripts: &Scripts) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !scripts.snapshot().await.is_empty() {
        assert!(Instant::now() < deadline, "jobs left");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!((scripts.running(), scripts.queued()), (0, 0));
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

const QUICK: ScriptTimers = ScriptTimers {
    max_runtime: 60_000,
    retry_delay: 1,
};

#[tokio::test]
async fn a_script_gets_sentinels_argv_and_runs_in_dir() {
    let d = dir("argv");
    let record = d.join("record.txt");
    let body = format!(
        "#!/bin/sh\n{{ printf '%s\\n' \"$0\" \"$#\"; for a in \"$@\"; do printf '[%s]\\n' \"$a\"; done; pwd; }} >> '{}'\n",
        record.display()
    );
    let absolute = script(&d, "recorder.sh", &body);
    let (scripts, events) = runner(&d, QUICK);
    // A relative path runs from `dir`. The kernel hands a `#!` script's
    // interpreter the program it executed, absolute, not `argv[0]`: its
    // `$0` is the absolute path (Sentinel's, which executes the relative
    // path in `dir`, is the path as configured).
    scripts.notify("recorder.sh", Channel::Sdown, "master g 10.0.0.1 6379");
    let expected = format!(
        "{}\n2\n[+sdown]\n[master g 10.0.0.1 6379]\n{}\n",
        absolute.display(),
        d.display()
    );
    until("the first record", || {
        (read(&record) == expected).then_some(())
    })
    .await;
    drained(&scripts).await;
    // An absolute one as it is; every argument is one argv element, with
    // no shell to split or expand it.
    let path = absolute.to_str().unwrap().to_string();
    scripts.run(vec![
        path.clone(),
        "g".into(),
        "leader".into(),
        "start".into(),
        "$HOME *".into(),
        "6379".into(),
        "".into(),
        "6380".into(),
    ]);
    let expected = format!(
        "{expected}{path}\n7\n[g]\n[leader]\n[start]\n[$HOME *]\n[6379]\n[]\n[6380]\n{}\n",
        d.display()
    );
    until("the second record", || {
        (read(&record) == expected).then_some(())
    })
    .await;
    drained(&scripts).await;
    assert_eq!(*events.lock().unwrap(), []);
}

#[tokio::test]
async fn a_binary_gets_the_path_as_configured_as_its_argv0() {
    let d = dir("arg0");
    std::os::unix::fs::symlink("/bin/sh", d.join("shell")).unwrap();
    let (scripts, events) = runner(&d, QUICK);
    // `sh -c` without operands: `$0` is the shell's own `argv[0]`.
    scripts.run(vec![
        "shell".into(),
        "-c".into(),
        "printf '%s\\n' \"$0\" > arg0.txt".into(),
    ]);
    let record = d.join("arg0.txt");
    until("arg0.txt", || (read(&record) == "shell\n").then_some(())).await;
    drained(&scripts).await;
    assert_eq!(*events.lock().unwrap(), []);
}

#[tokio::test]
async fn exit_1_is_retried_until_the_10th_attempt() {
    let d = dir("retry");
    let runs = d.join("runs.txt");
    script(
        &d,
        "fail.sh",
        &format!("#!/bin/sh\necho run >> '{}'\nexit 1\n", runs.display()),
    );
    let (scripts, events) = runner(&d, QUICK);
    scripts.run(vec!["fail.sh".into()]);
    let event = until("-script-error", || events.lock().unwrap().first().cloned()).await;
    assert_eq!(
        event,
        Event::new(Channel::ScriptError, "fail.sh 0 1".into())
    );
    assert_eq!(read(&runs).lines().count(), MAX_ATTEMPTS as usize);
    drained(&scripts).await;
}

#[tokio::test]
async fn exit_2_is_given_up_at_once() {
    let d = dir("exit2");
    let runs = d.join("runs.txt");
    script(
        &d,
        "two.sh",
        &format!("#!/bin/sh\necho run >> '{}'\nexit 2\n", runs.display()),
    );
    let (scripts, events) = runner(&d, QUICK);
    scripts.run(vec!["two.sh".into(), "x".into()]);
    let event = until("-script-error", || events.lock().unwrap().first().cloned()).await;
    assert_eq!(event, Event::new(Channel::ScriptError, "two.sh 0 2".into()));
    assert_eq!(read(&runs), "run\n");
    drained(&scripts).await;
}

#[tokio::test]
async fn a_missing_script_is_an_error_2() {
    let d = dir("missing");
    let (scripts, events) = runner(&d, QUICK);
    scripts.run(vec!["nowhere.sh".into()]);
    let event = until("-script-error", || events.lock().unwrap().first().cloned()).await;
    assert_eq!(
        event,
        Event::new(Channel::ScriptError, "nowhere.sh 0 2".into())
    );
    drained(&scripts).await;
}

#[tokio::test]
async fn a_run_past_max_runtime_is_killed_and_retried() {
    let d = dir("timeout");
    // `exec`: the shell becomes `sleep`, so the kill leaves no grandchild.
    script(&d, "slow.sh", "#!/bin/sh\nexec sleep 30\n");
    let (scripts, events) = runner(
        &d,
        ScriptTimers {
            max_runtime: 300,
            retry_delay: 60_000,
        },
    );
    let started = Instant::now();
    scripts.run(vec!["slow.sh".into()]);
    until("a running script", || {
        (scripts.running() == 1).then_some(())
    })
    .await;
    assert_eq!(scripts.queued(), 1);
    let event = until("-script-timeout", || {
        events.lock().unwrap().first().cloned()
    })
    .await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(event.channel, Channel::ScriptTimeout);
    assert_eq!(event.group, None);
    let pid = event
        .payload
        .strip_prefix("slow.sh ")
        .expect("<path> <pid>");
    assert!(pid.parse::<u32>().unwrap() > 0, "{pid}");
    let proc = PathBuf::from(format!("/proc/{pid}"));
    until("the child gone", || (!proc.exists()).then_some(())).await;
    // Retried as any signal: waits for the retry delay.
    let deadline = Instant::now() + Duration::from_secs(10);
    let pending = loop {
        let s = scripts.snapshot().await;
        if s.len() == 1 && !s[0].running {
            break s;
        }
        assert!(Instant::now() < deadline, "{s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!((pending[0].pid, pending[0].retry_num), (0, 1));
    assert!(
        (50_000..=60_000).contains(&pending[0].millis),
        "{pending:?}"
    );
    assert_eq!((scripts.running(), scripts.queued()), (0, 1));
    assert_eq!(events.lock().unwrap().len(), 1, "no -script-error yet");
}

/// A file without `#!` that is not a binary: `execve` fails with
/// ENOEXEC. glibc's `execvp` would then run it with `/bin/sh`; std's
/// `Command` on Linux (posix_spawn, or its own fork and `execvp`) reports
/// the ENOEXEC instead, so the job ends as one that could not be run,
/// `-script-error <path> 0 2`, and the file's commands never run.
#[tokio::test]
async fn a_script_without_a_shebang_is_not_run() {
    let d = dir("noshebang");
    let marker = d.join("marker");
    script(&d, "plain.sh", &format!("touch '{}'\n", marker.display()));
    let (scripts, events) = runner(&d, QUICK);
    scripts.run(vec!["plain.sh".into()]);
    let event = until("-script-error", || events.lock().unwrap().first().cloned()).await;
    assert_eq!(
        event,
        Event::new(Channel::ScriptError, "plain.sh 0 2".into())
    );
    drained(&scripts).await;
    assert!(!marker.exists());
}
