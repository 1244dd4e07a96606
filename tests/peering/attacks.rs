//! The peer protocol under attack, with real processes: forged hellos,
//! votes, renames and addresses against one Valkyrie monitoring a real
//! master and two replicas (`docs/security.md`, "Peers").
//!
//! Where valkey-sentinel 8.0 has the same weakness (a forged hello's
//! takeover and password theft, vote theft, a fake peer), the same attack
//! also runs against a real valkey-sentinel on its own servers. Both
//! outcomes are printed; only Valkyrie's is asserted.
//!
//! An attack that did nothing is shown by watching for a bounded window
//! longer than the attack needed before the fix (`never_within`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::observe::Events;
use support::sentinel::RealSentinel;
use support::wire::Conn;
use support::*;
use valkyrie::config::Secret;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

/// The attacker's run id.
const EVIL: &str = "e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0";

/// Whether `cond` stays false for the whole of `window` (checked every
/// 100 ms): the bounded way to show that something did not happen.
fn never_within(window: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < window {
        if cond() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

/// A hello about `mymaster`, from `runid` at `127.0.0.1:<port>`, naming
/// `127.0.0.1:<master>` in `config` with our current epoch `current`.
fn hello(port: u16, runid: &str, current: u64, master: u16, config: u64) -> String {
    format!("127.0.0.1,{port},{runid},{current},mymaster,127.0.0.1,{master},{config}")
}

/// `PUBLISH __sentinel__:hello <payload>` on `port` (a Sentinel port, or
/// a data node's channel), after `AUTH` when given.
fn publish_hello(port: u16, auth: Option<&str>, payload: &str) {
    let mut c = Conn::connect(port);
    if let Some(pass) = auth {
        c.ask(&["AUTH", pass]);
    }
    let reply = c.ask(&["PUBLISH", "__sentinel__:hello", payload]);
    assert!(
        reply.starts_with(b":"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
}

fn dbsize(port: u16) -> i64 {
    match call(port, &["DBSIZE"]) {
        Frame::Integer(n) => n,
        other => panic!("{other:?}"),
    }
}

/// A lone Sentinel (quorum 1) monitoring `pm` with down-after 1 s.
fn lone_sentinel(dir: &Path, pm: u16, extra: &str) -> RealSentinel {
    let own = dir.join("sentinel");
    std::fs::create_dir_all(&own).unwrap();
    RealSentinel::start(
        &own,
        &format!(
            "sentinel monitor mymaster 127.0.0.1 {pm} 1\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 10000\n{extra}"
        ),
    )
}

/// A stage of its own for a real valkey-sentinel (quorum 1; `extra`
/// appended to its configuration; `password` on the data nodes first),
/// returned once the sentinel knows both replicas.
fn sentinel_stage(
    bin: &Path,
    dir: &Path,
    extra: &str,
    password: Option<&str>,
) -> (Stage, RealSentinel) {
    let stage = Stage::new(bin, dir);
    if let Some(pass) = password {
        require_password(&stage, pass);
    }
    let s = lone_sentinel(dir, stage.master.port, extra);
    let sp = s.port;
    wait_until(Duration::from_secs(15), || {
        master_field(sp, "num-slaves").as_deref() == Some("2")
    });
    (stage, s)
}

/// A master with two replicas holding 100 acknowledged keys, and an
/// attacker's own server holding one.
struct Stage {
    master: Server,
    replicas: [Server; 2],
    attacker: Server,
}

impl Stage {
    fn new(bin: &Path, dir: &Path) -> Stage {
        let (master, r1, r2) = start_trio(bin, dir);
        write_acknowledged(master.port, 100, 2);
        let attacker = Server::start(bin, dir, free_port(), None);
        call(attacker.port, &["SET", "pwned", "1"]);
        Stage {
            master,
            replicas: [r1, r2],
            attacker,
        }
    }

    /// The attacker's server has replicas, or a node lost its keys.
    fn taken_over(&self) -> bool {
        info_field(self.attacker.port, "connected_slaves").as_deref() != Some("0")
            || dbsize(self.master.port) != 100
            || self.replicas.iter().any(|r| {
                info_field(r.port, "master_port").as_deref()
                    == Some(&self.attacker.port.to_string())
            })
    }
}

async fn valkyrie(dir: &Path, pm: u16, auth: Option<&str>) -> Daemon {
    let mut group = fast_group(pm);
    group.auth_pass = auth.map(Secret::new);
    let d = Daemon::start(daemon_config(dir, vec![group]))
        .await
        .unwrap();
    let h = d.handle.clone();
    replicas_known(&h, 2).await;
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_hello_moves_no_master_and_wipes_no_data() {
    let bin = valkey_server();
    let tmp = TempDir::new("attack-takeover");
    let ours = Stage::new(&bin, &tmp.0.join("v"));
    let d = valkyrie(&tmp.0.join("v"), ours.master.port, None).await;
    let sp = d.sentinel_addrs[0].port();
    let (pm, evil) = (ours.master.port, ours.attacker.port);
    // The forger's own "peer" answers PING, so even its data-node hellos
    // would make a verified peer.
    let device = Server::start(&bin, &tmp.0, free_port(), None);
    let dp = device.port;

    let (ours, device) = tokio::task::spawn_blocking(move || {
        // On the Sentinel port, unauthenticated; and on the master's hello
        // channel, as any client of a data node may publish there.
        publish_hello(sp, None, &hello(free_port(), EVIL, 1, evil, 1));
        publish_hello(pm, None, &hello(dp, EVIL, 1, evil, 1));
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(500));
            publish_hello(pm, None, &hello(dp, EVIL, 1, evil, 1));
            publish_hello(sp, None, &hello(dp, EVIL, 1, evil, 1));
        }
        let held = never_within(Duration::from_secs(4), || {
            advertised_master(sp) != Some(pm) || ours.taken_over()
        });
        println!(
            "valkyrie: master {:?}, attacker's replicas {:?}, keys on the master {}",
            advertised_master(sp),
            info_field(evil, "connected_slaves"),
            dbsize(pm)
        );
        assert!(held, "a forged hello moved the master or the data");
        (ours, device)
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
    drop((ours, device));

    // The same hello against a real valkey-sentinel.
    let (theirs, s) = sentinel_stage(&bin, &tmp.0.join("s"), "", None);
    let (sp, pm, evil) = (s.port, theirs.master.port, theirs.attacker.port);
    tokio::task::spawn_blocking(move || {
        publish_hello(sp, None, &hello(free_port(), EVIL, 1, evil, 1));
        let held = never_within(Duration::from_secs(15), || {
            advertised_master(sp) != Some(pm) || dbsize(pm) != 100
        });
        println!(
            "valkey-sentinel: held {held}; master {:?}, attacker's replicas {:?}, keys on the old \
             master {}",
            advertised_master(sp),
            info_field(evil, "connected_slaves"),
            dbsize(pm)
        );
        drop((theirs, s));
    })
    .await
    .unwrap();
}

/// Accepts connections on a free port and keeps every byte sent to it.
fn trap() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let keep = keep.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    keep.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
    });
    (port, seen)
}

/// Puts `requirepass` on the three servers of `stage` (and `masterauth`
/// on the replicas).
fn require_password(stage: &Stage, pass: &str) {
    for r in &stage.replicas {
        call(r.port, &["CONFIG", "SET", "masterauth", pass]);
    }
    for port in [
        stage.master.port,
        stage.replicas[0].port,
        stage.replicas[1].port,
    ] {
        call(port, &["CONFIG", "SET", "requirepass", pass]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_hello_gets_no_password() {
    const PASS: &str = "group-secret-5c1d";
    let bin = valkey_server();
    let tmp = TempDir::new("attack-password");
    let ours = Stage::new(&bin, &tmp.0.join("v"));
    require_password(&ours, PASS);
    let d = valkyrie(&tmp.0.join("v"), ours.master.port, Some(PASS)).await;
    let sp = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let (evil, seen) = trap();
        publish_hello(sp, None, &hello(free_port(), EVIL, 1, evil, 1));
        let kept = never_within(Duration::from_secs(5), || !seen.lock().unwrap().is_empty());
        println!(
            "valkyrie: {} bytes reached the named address",
            seen.lock().unwrap().len()
        );
        assert!(kept, "Valkyrie dialled the address a forged hello named");
        drop(ours);
    })
    .await
    .unwrap();
    d.stop().await.unwrap();

    let (theirs, s) = sentinel_stage(
        &bin,
        &tmp.0.join("s"),
        &format!("sentinel auth-pass mymaster {PASS}\n"),
        Some(PASS),
    );
    let sp = s.port;
    tokio::task::spawn_blocking(move || {
        let (evil, seen) = trap();
        publish_hello(sp, None, &hello(free_port(), EVIL, 1, evil, 1));
        let leaked = !never_within(Duration::from_secs(5), || {
            String::from_utf8_lossy(&seen.lock().unwrap()).contains(PASS)
        });
        println!("valkey-sentinel: sent the group's password to the named address: {leaked}");
        drop((theirs, s));
    })
    .await
    .unwrap();
}

/// Kills the master and returns how long until `sp` advertises another,
/// within `limit`, while `attack` runs every 100 ms.
fn failover_time(
    master: &mut Server,
    sp: u16,
    limit: Duration,
    mut attack: impl FnMut(u64),
) -> Option<Duration> {
    let pm = master.port;
    master.kill();
    let start = Instant::now();
    let mut round = 0;
    while start.elapsed() < limit {
        round += 1;
        attack(round);
        if advertised_master(sp).is_some_and(|p| p != pm) {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// One vote request a round, each for a new candidate in a new epoch.
fn vote_request(sp: u16, pm: u16, round: u64) {
    let runid = format!("{round:040x}");
    let mut c = Conn::connect(sp);
    c.ask(&[
        "SENTINEL",
        "is-master-down-by-addr",
        "127.0.0.1",
        &pm.to_string(),
        &round.to_string(),
        &runid,
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vote_requests_do_not_delay_a_lone_failover() {
    let bin = valkey_server();
    let tmp = TempDir::new("attack-votes");
    let mut ours = Stage::new(&bin, &tmp.0.join("v"));
    let state = tmp.0.join("v");
    let d = valkyrie(&state, ours.master.port, None).await;
    let sp = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let pm = ours.master.port;
        // A 10 KB run id first: refused, never saved.
        let mut c = Conn::connect(sp);
        let huge = "a".repeat(10_000);
        c.ask(&[
            "SENTINEL",
            "is-master-down-by-addr",
            "127.0.0.1",
            &pm.to_string(),
            "1",
            &huge,
        ]);
        let took = failover_time(&mut ours.master, sp, Duration::from_secs(15), |r| {
            vote_request(sp, pm, r)
        });
        println!("valkyrie under vote requests: failed over in {took:?}");
        // Before: 2 × failover-timeout (20 s here).
        assert!(took.is_some_and(|t| t < Duration::from_secs(8)), "{took:?}");
        let saved = std::fs::read_to_string(state.join("valkyrie-state.json")).unwrap();
        assert!(!saved.contains(&huge[..64]), "the 10 KB run id was saved");
        assert!(!saved.contains("\"leader\""), "a vote was granted: {saved}");
        drop(ours);
    })
    .await
    .unwrap();
    d.stop().await.unwrap();

    let (mut theirs, s) = sentinel_stage(&bin, &tmp.0.join("s"), "", None);
    let sp = s.port;
    tokio::task::spawn_blocking(move || {
        let pm = theirs.master.port;
        let took = failover_time(&mut theirs.master, sp, Duration::from_secs(25), |r| {
            vote_request(sp, pm, r)
        });
        println!("valkey-sentinel under vote requests: failed over in {took:?}");
        drop((theirs, s));
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_peers_neither_stop_a_lone_failover_nor_pile_up() {
    let bin = valkey_server();
    let tmp = TempDir::new("attack-fake-peers");
    let mut ours = Stage::new(&bin, &tmp.0.join("v"));
    let state = tmp.0.join("v");
    let d = valkyrie(&state, ours.master.port, None).await;
    let sp = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let pm = ours.master.port;
        let events = Events::watch(sp);
        // 2,000 peers at addresses where nothing answers, on the master's
        // channel and on our port.
        let mut m = Conn::connect(pm);
        let nobody = free_port();
        for i in 0..2_000u32 {
            let payload = hello(nobody, &format!("{i:040x}"), 0, pm, 0);
            m.ask(&["PUBLISH", "__sentinel__:hello", &payload]);
        }
        publish_hello(sp, None, &hello(nobody, EVIL, 0, pm, 0));
        wait_until(Duration::from_secs(10), || {
            events.count("+sentinel") >= 2_000
        });
        let saved = std::fs::read_to_string(state.join("valkyrie-state.json")).unwrap();
        assert!(!saved.contains("known_peers"), "{saved}");
        assert!(!saved.contains("\"peered\": true"), "{saved}");
        assert_eq!(
            master_field(sp, "num-other-sentinels").as_deref(),
            Some("0")
        );
        let took = failover_time(&mut ours.master, sp, Duration::from_secs(15), |_| {});
        println!("valkyrie with 2,000 fake peers: failed over in {took:?}");
        assert!(took.is_some_and(|t| t < Duration::from_secs(8)), "{took:?}");
        drop(ours);
    })
    .await
    .unwrap();
    d.stop().await.unwrap();

    let (mut theirs, s) = sentinel_stage(&bin, &tmp.0.join("s"), "", None);
    let sp = s.port;
    tokio::task::spawn_blocking(move || {
        let pm = theirs.master.port;
        publish_hello(sp, None, &hello(free_port(), EVIL, 0, pm, 0));
        let took = failover_time(&mut theirs.master, sp, Duration::from_secs(25), |_| {});
        println!("valkey-sentinel with one fake peer: failed over in {took:?}");
        drop((theirs, s));
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_addresses_and_renames_are_refused() {
    let bin = valkey_server();
    let tmp = TempDir::new("attack-names");
    let ours = Stage::new(&bin, &tmp.0);
    let d = valkyrie(&tmp.0, ours.master.port, None).await;
    let sp = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let pm = ours.master.port;
        let events = Events::watch(sp);
        let mut m = Conn::connect(pm);
        for host in [
            "1.2.3.4\n+switch-master mymaster 127.0.0.1 1 127.0.0.1 2",
            "a b",
            "\x1b[2J",
            "<script>alert(1)</script>",
            &"1".repeat(10_000),
        ] {
            let payload = format!("{host},26379,{EVIL},0,mymaster,127.0.0.1,{pm},0");
            m.ask(&["PUBLISH", "__sentinel__:hello", &payload]);
        }
        let mut c = Conn::connect(sp);
        // The same rule for our own announce-ip.
        let reply = c.ask(&["SENTINEL", "CONFIG", "SET", "announce-ip", "a b\nc"]);
        assert!(
            reply.starts_with(b"-"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        // A rename onto another real command (it would run FLUSHALL every
        // second from the next restart on).
        let reply = c.ask(&[
            "SENTINEL",
            "SET",
            "mymaster",
            "rename-command",
            "PING",
            "FLUSHALL",
        ]);
        assert!(
            String::from_utf8_lossy(&reply).contains("another Valkey command"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        // Our own Sentinel port is no master.
        let reply = c.ask(&[
            "SENTINEL",
            "MONITOR",
            "self",
            "127.0.0.1",
            &sp.to_string(),
            "1",
        ]);
        assert!(
            String::from_utf8_lossy(&reply).contains("own Sentinel port"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        assert!(never_within(Duration::from_secs(2), || {
            !events.all().is_empty()
        }));
        assert_eq!(dbsize(pm), 100);
        drop(ours);
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inflated_config_epoch_is_refused() {
    let bin = valkey_server();
    let tmp = TempDir::new("attack-epoch");
    let ours = Stage::new(&bin, &tmp.0.join("v"));
    let d = valkyrie(&tmp.0.join("v"), ours.master.port, None).await;
    let sp = d.sentinel_addrs[0].port();
    // A verified peer (a server answering PING at its address, named in a
    // hello on the master's channel), in whose name the forger writes.
    let device = Server::start(&bin, &tmp.0, free_port(), None);
    let dp = device.port;
    let big = 1u64 << 32;
    tokio::task::spawn_blocking(move || {
        let pm = ours.master.port;
        publish_hello(pm, None, &hello(dp, EVIL, 0, pm, 0));
        wait_until(Duration::from_secs(10), || {
            master_field(sp, "num-other-sentinels").as_deref() == Some("1")
        });
        // current epoch 0, config epoch 2^32: above the sender's own.
        publish_hello(pm, None, &hello(dp, EVIL, 0, pm, big));
        let held = never_within(Duration::from_secs(2), || {
            master_field(sp, "config-epoch").as_deref() != Some("0")
        });
        println!(
            "valkyrie: config epoch {:?} after the inflated hello",
            master_field(sp, "config-epoch")
        );
        assert!(held, "the inflated config epoch was taken");
        drop((ours, device));
    })
    .await
    .unwrap();
    d.stop().await.unwrap();

    let (mut theirs, s) = sentinel_stage(&bin, &tmp.0.join("s"), "", None);
    let sp = s.port;
    tokio::task::spawn_blocking(move || {
        let pm = theirs.master.port;
        publish_hello(sp, None, &hello(free_port(), EVIL, 0, pm, big));
        std::thread::sleep(Duration::from_secs(1));
        let before = master_field(sp, "config-epoch");
        let took = failover_time(&mut theirs.master, sp, Duration::from_secs(25), |_| {});
        println!(
            "valkey-sentinel: config epoch {before:?} after the inflated hello; failed over in \
             {took:?} to config epoch {:?}",
            master_field(sp, "config-epoch")
        );
        drop((theirs, s));
    })
    .await
    .unwrap();
}
