//! What writers hear during planned switchovers under `write-fence auto`:
//! real valkey-server master and replicas, writers that each keep one
//! connection to the advertised master and write every few milliseconds
//! (a writer whose next write comes only after the pause, as the node
//! test's did, is the one that met the refusal).
//!
//! Valkey checks `min-replicas-to-write` before it holds a write for a
//! pause. When a switchover promoted the chosen replica before demoting
//! the old master, the replica's departure left the paused old master
//! one good replica short of its fence, and every write that reached it
//! until its demotion was refused (`-NOREPLICAS`, an error clients take
//! as their own) instead of held and then cut off. These writers met it
//! 3 to 8 or more times each. The old master is now demoted first
//! (`core/src/group/switchover.rs`, `docs/plans/demote-first.md`). Each
//! writer records every error reply; none may be `NOREPLICAS`, writes
//! must have reached the old masters in the switchovers (held and then
//! cut off, or `-READONLY` once demoted), and no acknowledged write may
//! be lost.
//!
//! Between the old master's demotion and the new master's confirmation
//! no node takes writes. A writer told `-READONLY` asks the Sentinel port
//! again at once; it must be told the new master, not sent back to the
//! node that just refused it (the port holds that question until the
//! promotion is confirmed: `docs/failover.md`, "Planned switchover").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::write_fence::{fence_is, linked, setup};
use support::*;
use valkyrie_protocol::Frame;

/// Writers at once, each on its own connection.
const WRITERS: usize = 8;
/// The pause after each acknowledged write: longer than the pause takes
/// to reach the promotion, so some writes arrive only after it.
const PACE: Duration = Duration::from_millis(5);
/// Switchovers per run (back and forth among the three nodes).
const SWITCHOVERS: usize = 4;

/// What one writer saw: its acknowledged numbers, its error replies, how
/// many of its writes lost their connection (held in a pause, then cut
/// off at the demotion), and how many times the Sentinel port named the
/// node that had just answered it `-READONLY`.
#[derive(Default)]
struct Heard {
    acked: Vec<u64>,
    errors: Vec<String>,
    cut: usize,
    sent_back: usize,
}

/// Writes `RPUSH key n` every [`PACE`] to the master the Sentinel port
/// names; an error reply is recorded and the connection dropped, as a
/// Sentinel client that asks again would.
fn writer(sp: u16, key: String, heard: Arc<Mutex<Heard>>, stop: Arc<AtomicBool>) {
    let mut next = 0u64;
    let mut conn: Option<Client> = None;
    // The node that last answered `-READONLY`, and where.
    let mut at = 0u16;
    let mut refused_by: Option<u16> = None;
    while !stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match advertised_master(sp).and_then(|p| {
                if refused_by.take() == Some(p) {
                    heard.lock().unwrap().sent_back += 1;
                }
                at = p;
                Client::connect_timeout(p, Duration::from_secs(2)).ok()
            }) {
                Some(c) => conn.insert(c),
                None => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
            },
        };
        next += 1;
        match c.call(&["RPUSH", &key, &next.to_string()]) {
            Ok(Frame::Integer(_)) => {
                heard.lock().unwrap().acked.push(next);
                std::thread::sleep(PACE);
            }
            Ok(Frame::Error(e)) => {
                let e = String::from_utf8_lossy(&e).into_owned();
                if e.starts_with("READONLY") {
                    refused_by = Some(at);
                }
                heard.lock().unwrap().errors.push(e);
                conn = None;
            }
            Ok(_) => conn = None,
            Err(_) => {
                heard.lock().unwrap().cut += 1;
                conn = None;
            }
        }
    }
}

#[test]
fn switchovers_under_auto_refuse_no_write() {
    let s = setup("fence-switch-writers", "auto");
    let sp = s.sentinel_port;
    wait_until(Duration::from_secs(15), || {
        s.replicas.iter().all(|r| linked(r.port))
    });
    fence_is(s.master.port, "2");
    let stop = Arc::new(AtomicBool::new(false));
    let heard: Vec<Arc<Mutex<Heard>>> = (0..WRITERS).map(|_| Arc::default()).collect();
    let threads: Vec<_> = heard
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let (h, stop) = (h.clone(), stop.clone());
            std::thread::spawn(move || writer(sp, format!("w{i}"), h, stop))
        })
        .collect();
    let total = || {
        heard
            .iter()
            .map(|h| h.lock().unwrap().acked.len())
            .sum::<usize>()
    };
    for _ in 0..SWITCHOVERS {
        let old = advertised_master(sp).unwrap();
        // The new master fenced in turn, once both its replicas attached.
        fence_is(old, "2");
        let before = total();
        wait_until(Duration::from_secs(5), || total() > before + 200);
        assert_eq!(
            call(sp, &["SENTINEL", "FAILOVER", "mymaster"]),
            Frame::Simple("OK".into())
        );
        wait_until(Duration::from_secs(15), || {
            advertised_master(sp).is_some_and(|p| p != old)
        });
        // The switchover is over once the old master follows the new one.
        wait_until(Duration::from_secs(15), || {
            info_field(old, "master_link_status").as_deref() == Some("up")
        });
    }
    let before = total();
    wait_until(Duration::from_secs(5), || total() > before + 200);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let master = advertised_master(sp).unwrap();
    let mut refused = Vec::new();
    let cut: usize = heard.iter().map(|h| h.lock().unwrap().cut).sum();
    for (i, h) in heard.iter().enumerate() {
        let h = h.lock().unwrap();
        refused.extend(
            h.errors
                .iter()
                .filter(|e| e.starts_with("NOREPLICAS"))
                .map(|e| format!("writer {i}: {e}")),
        );
        let stored: std::collections::BTreeSet<u64> =
            match call(master, &["LRANGE", &format!("w{i}"), "0", "-1"]) {
                Frame::Array(items) => items
                    .iter()
                    .map(|f| {
                        String::from_utf8_lossy(f.as_bytes().unwrap())
                            .parse()
                            .unwrap()
                    })
                    .collect(),
                other => panic!("LRANGE: {other:?}"),
            };
        let lost = h.acked.iter().filter(|n| !stored.contains(n)).count();
        println!(
            "writer {i}: {} acknowledged, {lost} lost, {} cut off, {} sent back, errors {:?}",
            h.acked.len(),
            h.cut,
            h.sent_back,
            h.errors
        );
        assert_eq!(lost, 0, "writer {i} lost acknowledged writes");
    }
    // Writes did reach the old masters during the switchovers (held, then
    // cut off; or refused `-READONLY` once demoted): a run in which none
    // did would prove nothing.
    let readonly: usize = heard
        .iter()
        .map(|h| {
            let h = h.lock().unwrap();
            h.errors
                .iter()
                .filter(|e| e.starts_with("READONLY"))
                .count()
        })
        .sum();
    assert!(
        cut + readonly >= SWITCHOVERS,
        "only {cut} writes held and {readonly} refused READONLY in {SWITCHOVERS} switchovers"
    );
    assert!(
        refused.is_empty(),
        "refused during switchovers: {refused:?}"
    );
    let sent_back: usize = heard.iter().map(|h| h.lock().unwrap().sent_back).sum();
    assert_eq!(
        sent_back, 0,
        "writers told -READONLY were sent back to the demoted old master"
    );
}
