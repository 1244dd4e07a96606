//! The readiness verdict against real valkey-servers: the replica it names
//! right before the master is SIGKILLed is the one the failover promotes,
//! in 20 runs over four set-ups (distinct priorities; one replica behind;
//! equal priorities and offsets, the tie broken by run id; one replica at
//! priority 0). Each run is a fresh trio and an in-process runtime.
//!
//! The verdict predicts from the last INFO reports, as the failover
//! decides: set-ups whose offsets differ only by what a master's ping
//! adds between two samples are avoided (writes stop before the verdict
//! is read), or the prediction could legitimately flip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::*;
use valkyrie::core::{Addr, Readiness};
use valkyrie::runtime::{self, Handle};

const RUNS: usize = 20;

/// How each run shapes the replicas before the verdict is read.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Priorities 10 and 50: the lower wins.
    Priorities,
    /// One replica stopped while the other acknowledges writes, and
    /// until the failover is over: the one ahead wins.
    Behind,
    /// Equal priorities and offsets: the smaller run id wins.
    Tie,
    /// One replica at priority 0: the other is the only choice.
    PriorityZero,
}

const SHAPES: [Shape; 4] = [
    Shape::Priorities,
    Shape::Behind,
    Shape::Tie,
    Shape::PriorityZero,
];

fn verdict(handle: &Handle) -> Option<Readiness> {
    let t = handle.topology.borrow().clone();
    t.readiness.get("mymaster").map(|v| v.readiness.clone())
}

/// Waits, bounded, for a ready verdict that `check` accepts; returns it.
fn wait_verdict(handle: &Handle, check: impl Fn(&Readiness) -> bool) -> Readiness {
    let mut last = None;
    wait_until(Duration::from_secs(20), || {
        last = verdict(handle);
        last.as_ref().is_some_and(|r| r.ready && check(r))
    });
    last.unwrap()
}

fn candidate(r: &Readiness) -> Addr {
    r.candidate.as_ref().unwrap().addr.clone()
}

fn addr(port: u16) -> Addr {
    Addr::new("127.0.0.1", port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replica_the_verdict_names_is_the_one_a_kill_promotes() {
    let bin = valkey_server();
    let mut agreed = 0;
    for run in 0..RUNS {
        let shape = SHAPES[run % SHAPES.len()];
        let tmp = TempDir::new("readiness-kill");
        let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
        let pm = master.port;
        // Which replica the shape favours changes from run to run.
        let (favoured, other) = if run % 2 == 0 { (&r1, &r2) } else { (&r2, &r1) };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let config = daemon_config(&tmp.0.join("v"), vec![fast_group(pm)]);
        std::fs::create_dir_all(&config.dir).unwrap();
        let (handle, task) = runtime::start(config, async {
            let _ = stop_rx.await;
        })
        .await
        .unwrap();
        replicas_known(&handle, 2).await;
        let mut events = handle.events.subscribe();
        if let Shape::Behind = shape {
            other.signal("STOP");
        }
        let (fp, op) = (favoured.port, other.port);
        let h = handle.clone();
        let predicted = tokio::task::spawn_blocking(move || predict(&h, shape, pm, fp, op))
            .await
            .unwrap();

        master.kill();
        let promoted = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match events.recv().await {
                    Ok(e) if e.channel.as_str() == "+switch-master" => {
                        let words: Vec<&str> = e.payload.split(' ').collect();
                        return Addr::new(words[3], words[4].parse().unwrap());
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("event bus closed: {e}"),
                }
            }
        })
        .await
        .expect("+switch-master within 30 s");
        // Continued only now: the stopped replica's socket still holds
        // what the master sent it, and reading it would make it as far
        // ahead as the other (an observation after the verdict).
        if let Shape::Behind = shape {
            other.signal("CONT");
        }
        eprintln!("run {run} ({shape:?}): predicted {predicted}, promoted {promoted}");
        assert_eq!(promoted, predicted, "run {run} ({shape:?})");
        agreed += 1;
        let _ = stop_tx.send(());
        task.await.unwrap().unwrap();
    }
    assert_eq!(agreed, RUNS);
}

/// Shapes the replicas (for `Behind`, `other` is stopped already), then
/// reads the verdict the kill will be checked against.
fn predict(handle: &Handle, shape: Shape, pm: u16, favoured: u16, other: u16) -> Addr {
    let want = addr(favoured);
    let r = match shape {
        Shape::Priorities => {
            set_priority(favoured, 10);
            set_priority(other, 50);
            wait_verdict(handle, |r| {
                candidate(r) == want && r.candidate.as_ref().unwrap().priority == 10
            })
        }
        Shape::Behind => {
            // Only the favoured replica acknowledges these.
            write_acknowledged(pm, 200, 1);
            wait_verdict(handle, |r| {
                let ahead = r.candidate.as_ref().unwrap().offset;
                candidate(r) == want
                    && r.replicas
                        .iter()
                        .any(|x| x.addr == addr(other) && x.offset.is_some_and(|o| o < ahead))
            })
        }
        Shape::Tie => {
            write_acknowledged(pm, 50, 2);
            let offsets_equal = |r: &Readiness| {
                let offsets: Vec<Option<u64>> = r.replicas.iter().map(|x| x.offset).collect();
                offsets.len() == 2 && offsets[0].is_some() && offsets[0] == offsets[1]
            };
            let first = wait_verdict(handle, offsets_equal);
            std::thread::sleep(Duration::from_secs(1));
            let second = wait_verdict(handle, offsets_equal);
            assert_eq!(
                candidate(&first),
                candidate(&second),
                "a tie must be stable"
            );
            return candidate(&second);
        }
        Shape::PriorityZero => {
            set_priority(other, 0);
            wait_verdict(handle, |r| {
                candidate(r) == want
                    && r.replicas.iter().any(|x| {
                        x.addr == addr(other)
                            && x.skip.is_some_and(|s| s.label() == "priority_zero")
                    })
            })
        }
    };
    let c = r.candidate.as_ref().unwrap();
    assert!(c.lag_bytes.is_some(), "the lag is known: {c:?}");
    c.addr.clone()
}

fn set_priority(port: u16, priority: u32) {
    let p = priority.to_string();
    assert_eq!(
        call(port, &["CONFIG", "SET", "replica-priority", &p]),
        valkyrie_protocol::Frame::simple("OK")
    );
}

/// `VALKYRIE READINESS mymaster` on a Sentinel port: its scalar fields
/// by name (`holds` and `replicas` left out).
pub(crate) fn sentinel_verdict(
    sentinel_port: u16,
) -> Option<std::collections::BTreeMap<String, String>> {
    group_verdict(sentinel_port, "mymaster")
}

/// As [`sentinel_verdict`], for group `name`.
pub(crate) fn group_verdict(
    sentinel_port: u16,
    name: &str,
) -> Option<std::collections::BTreeMap<String, String>> {
    let reply = try_call(sentinel_port, &["VALKYRIE", "READINESS", name]).ok()?;
    let valkyrie_protocol::Frame::Array(kv) = reply else {
        return None;
    };
    Some(
        kv.chunks(2)
            .filter_map(|p| {
                let key = String::from_utf8_lossy(p[0].as_bytes()?).into_owned();
                let value = String::from_utf8_lossy(p.get(1)?.as_bytes()?).into_owned();
                Some((key, value))
            })
            .collect(),
    )
}
