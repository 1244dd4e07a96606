//! A deployment of several sentinel processes — Valkyries and/or real
//! valkey-sentinel 8.0.1 — monitoring one master and two replicas
//! (valkey-server, `--save ''`), observed from outside as the peering
//! specification's test plan asks (docs: sentinel-peering.md §11).
//!
//! Every sentinel process has its own directory, configuration file and
//! log, and runs as a uid of its own so that one of them can be cut off
//! the network (see "Cuts" below). The observers, all recorded with the
//! time since the deployment started:
//!
//! 1. an event tap on every sentinel (`PSUBSCRIBE *`, reconnecting across
//!    restarts);
//! 2. a hello tap on every data node (`SUBSCRIBE __sentinel__:hello`):
//!    run id, current epoch, advertised master, config epoch of every hello;
//! 3. the replication commands every data node executed (`REPLICAOF` /
//!    `SLAVEOF`, inside `MULTI` too), with the client's address and name.
//!    `MONITOR` cannot give these: Valkey leaves admin commands (REPLICAOF,
//!    SLAVEOF, CONFIG) out of its output. The slow log with a threshold of
//!    0 records every command with the client's name, so it is polled
//!    (every ~30 ms, by id) instead. A sentinel's commands are attributed to
//!    it through the name `sentinel-<first 8 of its id>-cmd`;
//! 4. pollers on demand (`SENTINEL get-master-addr-by-name`, `SENTINEL
//!    master`, `SENTINEL sentinels`, `CKQUORUM`, `INFO replication`).
//!
//! Invariant checks (§11.2) return `Result<(), String>` with a readable
//! message: I1 (one master address per configuration epoch in all hellos),
//! I2 (one vote per sentinel and epoch), I3 (one leader per epoch, every
//! promotion sent by a sentinel elected in an epoch, at most one target per
//! epoch), I5 (one master in the data), I6 (hello epochs never decrease per
//! run id), I7 (every sentinel lists the others, `CKQUORUM` OK), I8 (no
//! `WAIT`-acknowledged write lost, with [`AckWriter`]).
//!
//! Cuts: every sentinel's connections are marked (`CONNMARK`, in the
//! mangle table) with its uid when it opens them. Isolating sentinel `i`
//! drops every packet of a connection `i` opened (both directions: its
//! requests and what the data nodes push to its pub/sub links) and every
//! packet of the connections the other sentinels opened to `i`'s port. The
//! test's own connections (taps, pollers) are untouched, so `i`'s events
//! stay visible during the cut. Rules are removed when the [`Rules`] guard
//! is dropped (the path heals).
//!
//! Needs root (iptables, setuid); a missing piece fails the test.
//!
//! Layout: [`conn`] (RESP connections and frame helpers), [`records`]
//! (what the observers record, and the queries over it), [`taps`] (the
//! observer threads), [`sentinels`] (the sentinel processes and their
//! specifications), [`deployment`] (starting and stopping it all, the data
//! nodes), [`invariants`] (I1–I8) and [`cuts`] (iptables). This file keeps
//! what every part uses: the group's name, [`serial`] and [`poll`].

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod conn;
mod cuts;
mod deployment;
mod invariants;
mod records;
mod sentinels;
mod taps;

// Each test binary uses a part of this API, and none all of it (as with
// `dead_code`, allowed for the whole of `support`).
#[allow(unused_imports)]
pub use {
    conn::{Conn, ConnErr, kv, text},
    cuts::Rules,
    deployment::Deployment,
    invariants::AckWriter,
    records::{Election, Event, Hello, Sent},
    sentinels::{Kind, Sentinel, Spec, Tripwire, tail},
};

/// The monitored group's name.
pub const GROUP: &str = "mymaster";

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the deployments of one test process (scripts/run-tests.py
/// runs each module of a test binary in a process of its own): each is a
/// handful of processes whose timers matter, and CI machines have few
/// cores.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Polls `f` every 20 ms until it returns `Ok`; after `limit`, the last
/// error, prefixed with how long was waited.
pub fn poll<T>(limit: Duration, mut f: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let start = Instant::now();
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if start.elapsed() >= limit => {
                return Err(format!("not within {limit:?}: {e}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
