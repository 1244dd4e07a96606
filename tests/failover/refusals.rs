//! `valkyrie:failover-reason` with real valkey-servers and Valkyrie as
//! its own process: why a failover was not done, on the Sentinel port.
//!
//! - Valkyrie cut from the master while its replicas still hear it (an
//!   observer partition, tests/support/cut.rs): a `vetoed` event, reason
//!   `witness_veto`, cause `vouched`.
//! - `SENTINEL FAILOVER` with every replica at `replica-priority 0`: a
//!   `refused` event, reason `no_eligible_replica`, before the error reply.
//!
//! In both, a `PSUBSCRIBE *` subscriber on the same port (as Sentinel
//! clients subscribe) receives nothing on that channel, and the status
//! API's failover history files the event (`vetoed` once the master is
//! back, `refused`), with it as the timeline's `reason`.
//!
//! Needs root and iptables, as `partition.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use support::cut::{Cut, CutProcess, require_root, spawn_as_cut_user};
use support::observe::Events;
use support::*;
use valkyrie_protocol::Frame;

const CHANNEL: &str = "valkyrie:failover-reason";

struct Setup {
    _tmp: TempDir,
    master: Server,
    replicas: Vec<Server>,
    sentinel_port: u16,
    admin_port: u16,
    _daemon: CutProcess,
}

fn setup(tag: &str) -> Setup {
    require_root();
    let bin = valkey_server();
    let tmp = TempDir::new(tag);
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let state = tmp.0.join("valkyrie");
    std::fs::create_dir_all(&state).unwrap();
    let (sentinel_port, admin_port) = (free_port(), free_port());
    let conf = state.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {sentinel_port}\nbind 127.0.0.1\ndir {dir}\nindex-port 0\n\
             admin-port {admin_port}\nadmin-bind 127.0.0.1\n\
             sentinel monitor mymaster 127.0.0.1 {pm} 2\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 10000\n",
            dir = state.display(),
            pm = master.port,
        ),
    )
    .unwrap();
    let daemon = spawn_as_cut_user(
        std::path::Path::new(env!("CARGO_BIN_EXE_valkyrie")),
        &[conf.to_str().unwrap()],
        &state,
        "valkyrie.log",
    );
    wait_until(Duration::from_secs(15), || {
        matches!(
            try_call(sentinel_port, &["SENTINEL", "REPLICAS", "mymaster"]),
            Ok(Frame::Array(r)) if r.len() == 2
        ) && master_field(sentinel_port, "num-slaves").as_deref() == Some("2")
    });
    Setup {
        _tmp: tmp,
        master,
        replicas: vec![r1, r2],
        sentinel_port,
        admin_port,
        _daemon: daemon,
    }
}

/// The last failover timeline of `mymaster` in the status API, if any.
fn last_timeline(admin: u16) -> Option<Value> {
    let (_, body) = support::http::http_get(admin, "/api/v1/groups").ok()?;
    let doc: Value = serde_json::from_str(&body).ok()?;
    doc["groups"][0]["failovers"].as_array()?.last().cloned()
}

/// Every payload published on [`CHANNEL`] (an exact `SUBSCRIBE`), parsed,
/// collected by a thread until dropped.
struct Reasons {
    seen: Arc<Mutex<Vec<Value>>>,
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Reasons {
    fn watch(port: u16) -> Reasons {
        let mut sub = Client::connect_timeout(port, Duration::from_millis(500)).unwrap();
        let confirmed = sub.call(&["SUBSCRIBE", CHANNEL]).unwrap();
        assert!(matches!(confirmed, Frame::Array(_)), "{confirmed:?}");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (seen, running) = (seen.clone(), running.clone());
            std::thread::spawn(move || {
                while running.load(Ordering::Relaxed) {
                    let Ok(Frame::Array(parts)) = sub.read() else {
                        continue;
                    };
                    // message <channel> <payload>
                    if let [_, _, payload] = parts.as_slice()
                        && let Some(bytes) = payload.as_bytes()
                    {
                        let value = serde_json::from_slice(bytes).expect("a JSON payload");
                        seen.lock().unwrap().push(value);
                    }
                }
            })
        };
        Reasons {
            seen,
            running,
            thread: Some(thread),
        }
    }

    fn all(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    /// The first payload whose `outcome` and `reason` are these.
    fn find(&self, outcome: &str, reason: &str) -> Option<Value> {
        self.all()
            .into_iter()
            .find(|v| v["outcome"] == outcome && v["reason"] == reason)
    }
}

impl Drop for Reasons {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `PSUBSCRIBE *` saw nothing on [`CHANNEL`].
fn pattern_untouched(events: &Events) {
    assert_eq!(
        events.count(CHANNEL),
        0,
        "PSUBSCRIBE * got Valkyrie's own channel: {:?}",
        events.all()
    );
}

#[test]
fn an_observer_partition_is_said_vetoed_by_the_witnesses() {
    let s = setup("reason-veto");
    let reasons = Reasons::watch(s.sentinel_port);
    let events = Events::watch(s.sentinel_port);
    let cut = Cut::new(&[s.master.port]);
    wait_until(Duration::from_secs(20), || {
        reasons.find("vetoed", "witness_veto").is_some()
    });
    let veto = reasons.find("vetoed", "witness_veto").unwrap();
    assert_eq!(veto["group"], "mymaster");
    assert_eq!(veto["op"], "failover");
    assert_eq!(veto["cause"], "vouched", "{veto}");
    assert_eq!(veto["vouching"], 2, "{veto}");
    assert_eq!(veto["fresh"], 2, "{veto}");
    assert!(
        veto["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("vetoed: ")),
        "{veto}"
    );
    // Said once, not at every step, while the cut lasts.
    std::thread::sleep(Duration::from_secs(3));
    let vetoes = reasons
        .all()
        .iter()
        .filter(|v| v["reason"] == "witness_veto")
        .count();
    assert_eq!(vetoes, 1, "{:?}", reasons.all());
    assert!(
        events.saw("+sdown", "master mymaster"),
        "{:?}",
        events.all()
    );
    assert!(
        !events.all().iter().any(|(c, _)| c == "+try-failover"),
        "{:?}",
        events.all()
    );
    cut.heal();
    // Back: the history keeps the partition, closed as vetoed.
    wait_until(Duration::from_secs(15), || {
        last_timeline(s.admin_port).is_some_and(|t| t["outcome"] == "vetoed")
    });
    let timeline = last_timeline(s.admin_port).unwrap();
    assert_eq!(timeline["reason"]["reason"], "witness_veto", "{timeline}");
    assert!(
        timeline["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["channel"] == CHANNEL),
        "{timeline}"
    );
    pattern_untouched(&events);
    eprintln!("reasons: {:?}", reasons.all());
}

#[test]
fn a_refused_failover_is_said_before_the_reply() {
    let s = setup("reason-refused");
    for r in &s.replicas {
        call(r.port, &["CONFIG", "SET", "replica-priority", "0"]);
    }
    // Valkyrie sees the priorities in the replicas' next INFO.
    wait_until(Duration::from_secs(15), || {
        matches!(
            try_call(s.sentinel_port, &["SENTINEL", "REPLICAS", "mymaster"]),
            Ok(Frame::Array(rs)) if rs.iter().all(|r| match r {
                Frame::Array(kv) => kv.chunks(2).any(|p| {
                    p[0].as_bytes().map(|b| &b[..]) == Some(&b"slave-priority"[..])
                        && p[1].as_bytes().map(|b| &b[..]) == Some(&b"0"[..])
                }),
                _ => false,
            })
        )
    });
    let reasons = Reasons::watch(s.sentinel_port);
    let events = Events::watch(s.sentinel_port);
    let reply = try_call(s.sentinel_port, &["SENTINEL", "FAILOVER", "mymaster"]).unwrap();
    assert!(
        matches!(&reply, Frame::Error(e) if e.starts_with(b"NOGOODSLAVE")),
        "{reply:?}"
    );
    wait_until(Duration::from_secs(5), || {
        reasons.find("refused", "no_eligible_replica").is_some()
    });
    let refused = reasons.find("refused", "no_eligible_replica").unwrap();
    assert_eq!(refused["group"], "mymaster");
    // The master is up: it was a switchover.
    assert_eq!(refused["op"], "switchover", "{refused}");
    assert_eq!(refused["text"], "no replica can be promoted", "{refused}");
    // Give a pattern delivery the time it would have taken.
    std::thread::sleep(Duration::from_millis(500));
    pattern_untouched(&events);
    // A timeline of one step in the status history.
    let timeline = last_timeline(s.admin_port).expect("a timeline");
    assert_eq!(timeline["outcome"], "refused", "{timeline}");
    assert_eq!(timeline["reason"]["reason"], "no_eligible_replica");
    eprintln!("reasons: {:?}", reasons.all());
}
