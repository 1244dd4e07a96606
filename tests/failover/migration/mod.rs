//! A running deployment of three real valkey-sentinels migrated to three
//! Valkyries one sentinel at a time, following docs/peering.md
//! ("Migrating a three-sentinel deployment") as written, while a writer
//! writes through whatever the monitors advertise.
//!
//! Each sentinel is started from a `sentinel.conf` written the way an
//! operator writes one; Sentinel rewrites it as it runs (`sentinel myid`,
//! `known-sentinel`, `known-replica`, the epochs,
//! `latency-tracking-info-percentiles` …). Each Valkyrie is the real
//! binary started on that file exactly as the stopped sentinel left it,
//! at the same port, with `--index-port 0 --admin-port 0` (three Valkyries
//! share this host). After each swap the master is SIGKILLed and the mixed
//! set must fail over: one new master advertised by every monitor, one
//! master among the data nodes, the killed node back as a replica, the
//! writer's acknowledged writes going to the new master. At the end no
//! acknowledged write is missing, on the final master or its replicas.
//!
//! The procedure's "wait 30 s" between sentinels is the operator's
//! margin; the test goes on as soon as the procedure's checks pass, and a
//! failover between swaps is a harder check than the wait.
//!
//! Needs valkey-server and valkey-sentinel (scripts/deps.sh).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

mod checks;
mod monitors;
mod writer;

use std::time::{Duration, Instant};

use checks::{failed_over, listed, one_master, quorum_healthy};
use monitors::{Kind, Monitor, logs};
use support::{Server, TempDir, start_trio, valkey_server};
use writer::{Writer, missing};

const S: Duration = Duration::from_secs(1);

/// Panics with `msg` and every monitor's log tail.
fn fail(monitors: &[Monitor], msg: impl std::fmt::Display) -> ! {
    panic!("{msg}\n{}", logs(monitors))
}

trait OrFail<T> {
    fn or_fail(self, monitors: &[Monitor]) -> T;
}

impl<T> OrFail<T> for Result<T, String> {
    fn or_fail(self, monitors: &[Monitor]) -> T {
        self.unwrap_or_else(|e| fail(monitors, e))
    }
}

/// Steps 1 to 5 of the procedure for sentinel `i`; returns the master and
/// config epoch every monitor agrees on afterwards.
fn replace(monitors: &mut [Monitor], i: usize) -> (u16, u64) {
    let old_id = monitors[i].myid.clone();
    // 1. The configuration: the sentinel's own file, unchanged. Sentinel
    //    has rewritten it; the lines that seed Valkyrie must be there.
    let file = std::fs::read_to_string(&monitors[i].conf).unwrap();
    for want in [
        format!("sentinel myid {old_id}"),
        "sentinel current-epoch ".to_string(),
        "sentinel known-replica mymaster ".to_string(),
        "latency-tracking-info-percentiles ".to_string(),
    ] {
        assert!(
            file.contains(&want),
            "{}: no '{want}' in the file Sentinel rewrote:\n{file}",
            monitors[i].label()
        );
    }
    let known = file.matches("sentinel known-sentinel mymaster ").count();
    assert_eq!(known, 2, "known-sentinel lines:\n{file}");
    let checked = monitors[i].check_config().or_fail(monitors);
    for want in [
        format!("ok: sentinel port {}", monitors[i].port),
        "'latency-tracking-info-percentiles' has no effect".to_string(),
    ] {
        assert!(checked.contains(&want), "no '{want}' in:\n{checked}");
    }
    // The known-sentinel lines already name the peers the quorum counts.
    assert!(
        !checked.contains("applies once peers"),
        "a quorum note for a group that has peers:\n{checked}"
    );
    // 2. Stop the sentinel; 3. start Valkyrie at the same address and port.
    monitors[i].stop();
    let after = std::fs::read_to_string(&monitors[i].conf).unwrap();
    monitors[i].start_valkyrie();
    eprintln!(
        "[{}] on the file Sentinel left ({} lines, {} changed by its exit)",
        monitors[i].label(),
        after.lines().count(),
        if after == file { "none" } else { "some" },
    );
    assert_eq!(
        monitors[i].myid, old_id,
        "Valkyrie keeps the sentinel's run id (its `sentinel myid` line)"
    );
    // 4. Valkyrie lists the other two, and they list it with its old id.
    let port = monitors[i].port;
    support::peers::poll(20 * S, || {
        for m in monitors.iter() {
            let got = listed(m.port)?;
            let want = monitors
                .iter()
                .filter(|o| o.idx != m.idx)
                .map(|o| (o.port, o.myid.clone()));
            if !want.clone().all(|w| got.contains(&w)) {
                return Err(format!("{} lists {got:?}", m.label()));
            }
        }
        Ok(())
    })
    .or_fail(monitors);
    // 5. CKQUORUM on all three; one master address and config epoch.
    let agreed = quorum_healthy(monitors, 20 * S).or_fail(monitors);
    let now = std::fs::read_to_string(&monitors[i].conf).unwrap();
    assert_eq!(now, after, "Valkyrie never writes the file");
    eprintln!("[valkyrie#{i}:{port}] listed by its peers, quorum OK, master {agreed:?}");
    agreed
}

/// SIGKILLs the master, waits for the failover and checks it; restarts
/// the killed node (empty, as a master, as a crashed node without
/// persistence comes back) and waits until it replicates the new master.
/// Returns the new master and config epoch.
fn kill_master(
    nodes: &mut [Server],
    monitors: &[Monitor],
    writer: &Writer,
    (master, epoch): (u16, u64),
) -> (u16, u64) {
    let k = nodes.iter().position(|n| n.port == master).unwrap();
    let killed_at = Instant::now();
    nodes[k].kill();
    let (new, e) = failed_over(monitors, master, epoch, 40 * S).or_fail(monitors);
    let live: Vec<u16> = nodes
        .iter()
        .filter(|n| n.port != master)
        .map(|n| n.port)
        .collect();
    let data_master = one_master(&live, 20 * S).or_fail(monitors);
    assert_eq!(data_master, new, "the advertised master is the data's");
    eprintln!(
        "[failover] {master} -> {new}, config epoch {e}, in {:?}, kinds {:?}",
        killed_at.elapsed(),
        monitors.iter().map(|m| m.kind).collect::<Vec<_>>()
    );
    nodes[k].restart_empty();
    let all: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let rejoined_at = Instant::now();
    let data_master = one_master(&all, 40 * S).or_fail(monitors);
    assert_eq!(data_master, new, "after {master} came back");
    eprintln!(
        "[rejoin] {master} replicates {new} after {:?}",
        rejoined_at.elapsed()
    );
    // Nothing moved when it came back, and the writer follows.
    let again = quorum_healthy(monitors, 20 * S).or_fail(monitors);
    assert_eq!(again, (new, e), "after {master} came back");
    writer.progress_on(new, 10, 20 * S).or_fail(monitors);
    (new, e)
}

#[test]
fn three_sentinels_replaced_one_at_a_time() {
    let started = Instant::now();
    let tmp = TempDir::new("migration");
    let (m, r1, r2) = start_trio(&valkey_server(), &tmp.0);
    let mut nodes = vec![m, r1, r2];
    let mut monitors: Vec<Monitor> = (0..3)
        .map(|i| Monitor::sentinel(&tmp.0, i, nodes[0].port))
        .collect();

    // Before you start: every sentinel sees the others, CKQUORUM OK, one
    // master and config epoch everywhere.
    let mut now = quorum_healthy(&monitors, 30 * S).or_fail(&monitors);
    assert_eq!(now.0, nodes[0].port);
    let writer = Writer::start(monitors.iter().map(|m| m.port).collect());
    writer.progress_on(now.0, 10, 20 * S).or_fail(&monitors);
    eprintln!(
        "[start] three sentinels ready after {:?}",
        started.elapsed()
    );

    let mut masters = vec![now.0];
    for i in 0..3 {
        let agreed = replace(&mut monitors, i);
        assert_eq!(agreed, now, "the swap moved nothing");
        now = kill_master(&mut nodes, &monitors, &writer, now);
        masters.push(now.0);
    }
    assert!(monitors.iter().all(|m| m.kind == Kind::Valkyrie));

    // The end: every acknowledged write on the final master and, once
    // they caught up, on both replicas.
    let acked = writer.stop();
    let master = now.0;
    let replicas: Vec<u16> = nodes
        .iter()
        .map(|n| n.port)
        .filter(|&p| p != master)
        .collect();
    checks::in_sync(master, &replicas, 20 * S).or_fail(&monitors);
    for port in std::iter::once(master).chain(replicas.iter().copied()) {
        let lost = missing(port, &acked).or_fail(&monitors);
        assert!(
            lost.is_empty(),
            "{} of {} acknowledged writes missing on {port} (master {master}): {:?}",
            lost.len(),
            acked.len(),
            &lost[..lost.len().min(20)]
        );
    }
    // Each master in turn took acknowledged writes.
    let per: Vec<(u16, usize)> = masters
        .iter()
        .map(|&p| (p, acked.iter().filter(|a| a.1 == p).count()))
        .collect();
    assert!(per.iter().all(|&(_, n)| n >= 10), "{per:?}");
    eprintln!(
        "[done] {} acknowledged writes, none lost; per master {per:?}; {:?}",
        acked.len(),
        started.elapsed()
    );
}
