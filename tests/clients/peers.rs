//! Real client libraries against three Valkyries as peers (quorum 2), one
//! of them down: each client is given all three addresses, the dead one
//! first for most of them, discovers the master and a replica, writes;
//! then the master is killed, the two live Valkyries elect a leader that
//! promotes a replica, and the same client object writes again — to the
//! promoted replica. Pub/sub clients subscribed through either live
//! Valkyrie receive `+switch-master`.
//!
//! Clients as in tests/clients/failover.rs: redis-py (RESP2 and RESP3),
//! valkey-py, ioredis, node-redis v5, redis-rs (its Sentinel client), fred
//! (Sentinel server config) and valkey-cli (RESP2 and `-3`). The Python
//! and Node drivers are tests/clients/sentinel_client.py and
//! tests/clients/sentinel_clients.js; the libraries come from
//! `scripts/deps.sh` (VALKYRIE_PYTHON, VALKYRIE_NODE_PATH).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::clients::Proc;
use support::observe::Events;
use support::*;
use valkyrie::config::{Config, GroupConfig};
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name)
}

fn ports_arg(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// One Python client (`module` redis or valkey) given the Sentinel list
/// `sentinels`, in that order; RESP2 clients subscribe through `sub`.
fn python(py: &std::ffi::OsStr, module: &str, resp: u8, sentinels: &[u16], sub: u16) -> Proc {
    let tag = format!("{module}-resp{resp}");
    let mut cmd = Command::new(py);
    cmd.arg(script("sentinel_client.py"))
        .args([module, &resp.to_string(), &tag, &ports_arg(sentinels)])
        .arg(sub.to_string());
    Proc::spawn(&tag, cmd)
}

/// ioredis and node-redis v5 in one Node process, each with its list.
fn node(node_path: &std::ffi::OsStr, io: &[u16], nr: &[u16], io_sub: u16, nr_sub: u16) -> Proc {
    let mut cmd = Command::new("node");
    cmd.arg(script("sentinel_clients.js"))
        .args([ports_arg(io), ports_arg(nr)])
        .args([io_sub.to_string(), nr_sub.to_string()])
        .env("NODE_PATH", node_path);
    Proc::spawn("node", cmd)
}

/// `valkey-cli SUBSCRIBE +switch-master`, RESP2 or RESP3.
fn cli_subscriber(cli: &std::ffi::OsStr, sp: u16, resp3: bool) -> Proc {
    let mut cmd = Command::new(cli);
    cmd.args(["-h", "127.0.0.1", "-p", &sp.to_string()]);
    if resp3 {
        cmd.arg("-3");
    }
    cmd.args(["SUBSCRIBE", "+switch-master"]);
    Proc::spawn(if resp3 { "valkey-cli -3" } else { "valkey-cli" }, cmd)
}

/// redis-rs: its Sentinel client for master and replica, and a pub/sub
/// connection to one Sentinel port.
struct RedisRs {
    master: redis::sentinel::SentinelClient,
    switch: tokio::task::JoinHandle<String>,
}

async fn redis_rs_before(sentinels: &[u16], sub: u16) -> (RedisRs, u16, String) {
    use redis::AsyncCommands;
    use redis::sentinel::{SentinelClient, SentinelServerType};
    let urls: Vec<String> = sentinels
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}"))
        .collect();
    let mut master = SentinelClient::build(
        urls.clone(),
        "mymaster".to_string(),
        None,
        SentinelServerType::Master,
    )
    .unwrap();
    let mut con = master.get_async_connection().await.unwrap();
    let _: () = con.set("before:redis-rs", "1").await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut con)
        .await
        .unwrap();
    let port = tcp_port(&info);
    let mut replica = SentinelClient::build(
        urls,
        "mymaster".to_string(),
        None,
        SentinelServerType::Replica,
    )
    .unwrap();
    let mut rcon = replica.get_async_connection().await.unwrap();
    let mut read = None;
    for _ in 0..100 {
        read = rcon.get("before:redis-rs").await.unwrap();
        if read.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let role: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut rcon)
        .await
        .unwrap();
    assert!(role.contains("role:slave"), "redis-rs replica: {role}");
    let client = redis::Client::open(format!("redis://127.0.0.1:{sub}")).unwrap();
    let mut pubsub = client.get_async_pubsub().await.unwrap();
    pubsub.subscribe("+switch-master").await.unwrap();
    let switch = tokio::spawn(async move {
        use futures_util::StreamExt;
        let msg = pubsub.on_message().next().await.unwrap();
        msg.get_payload::<String>().unwrap()
    });
    (RedisRs { master, switch }, port, read.unwrap_or_default())
}

fn tcp_port(info: &str) -> u16 {
    info.lines()
        .find_map(|l| l.strip_prefix("tcp_port:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap()
}

async fn redis_rs_after(mut c: RedisRs) -> (u16, String) {
    use redis::AsyncCommands;
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = loop {
        let attempt = async {
            let mut con = c.master.get_async_connection().await?;
            let _: () = con.set("after:redis-rs", "1").await?;
            let info: String = redis::cmd("INFO")
                .arg("server")
                .query_async(&mut con)
                .await?;
            Ok::<_, redis::RedisError>(tcp_port(&info))
        };
        match attempt.await {
            Ok(p) => break p,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("redis-rs did not follow: {e}"),
        }
    };
    let switch = tokio::time::timeout(Duration::from_secs(10), c.switch)
        .await
        .expect("redis-rs got +switch-master")
        .unwrap();
    (port, switch)
}

async fn fred_before(
    sentinels: &[u16],
    sub: u16,
) -> (fred::prelude::Client, fred::prelude::Client, u16) {
    use fred::prelude::*;
    use fred::types::InfoKind;
    let client = support::clients::fred_sentinel(sentinels, "mymaster").await;
    let _: () = client
        .set("before:fred", "1", None, None, false)
        .await
        .unwrap();
    let info: String = client.info(Some(InfoKind::Server)).await.unwrap();
    let port = tcp_port(&info);
    let read = support::clients::fred_replica_read(&client, port, "before:fred").await;
    assert_eq!(read, "1", "fred read from a replica");
    let sub_config = Config {
        server: ServerConfig::new_centralized("127.0.0.1", sub),
        ..Default::default()
    };
    let sub = Builder::from_config(sub_config).build().unwrap();
    sub.init().await.unwrap();
    sub.subscribe("+switch-master").await.unwrap();
    (client, sub, port)
}

async fn fred_after(
    client: fred::prelude::Client,
    mut rx: tokio::sync::broadcast::Receiver<fred::types::Message>,
) -> (u16, String) {
    use fred::prelude::*;
    use fred::types::InfoKind;
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = loop {
        let attempt = async {
            let _: () = client.set("after:fred", "1", None, None, false).await?;
            let info: String = client.info(Some(InfoKind::Server)).await?;
            Ok::<_, Error>(tcp_port(&info))
        };
        match attempt.await {
            Ok(p) => break p,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("fred did not follow: {e}"),
        }
    };
    let msg = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("fred got +switch-master")
        .unwrap();
    (port, msg.value.convert::<String>().unwrap())
}

/// Three Valkyries on `master`, each with its own port and state directory.
async fn start_valkyries(dir: &Path, master: u16) -> Vec<Daemon> {
    let mut ds = Vec::new();
    for i in 0..3 {
        let mut g = GroupConfig::new("mymaster", "127.0.0.1", master, 2);
        g.down_after = Duration::from_millis(1000);
        g.failover_timeout = Duration::from_millis(6000);
        let own = dir.join(format!("valkyrie-{i}"));
        std::fs::create_dir_all(&own).unwrap();
        let cfg = Config {
            port: free_port(),
            admin_port: 0,
            index_port: 0,
            bind: vec!["127.0.0.1".into()],
            dir: own,
            groups: vec![g],
            ..Config::default()
        };
        ds.push(Daemon::start(cfg).await.unwrap());
    }
    ds
}

/// Fails the test if the stopped Valkyrie's port accepts connections:
/// another process (a concurrent test) took it, so the clients did not
/// meet a dead Valkyrie.
fn still_refused(port: u16) {
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} of the stopped Valkyrie accepts connections: another process took it"
    );
}

/// The ports in `SENTINEL SENTINELS mymaster` on `sp`.
fn sentinels_listed(sp: u16) -> Vec<u16> {
    let Frame::Array(entries) = call(sp, &["SENTINEL", "SENTINELS", "mymaster"]) else {
        panic!("SENTINEL SENTINELS on {sp}: not an array");
    };
    let mut ports: Vec<u16> = entries
        .iter()
        .map(|e| {
            let Frame::Array(kv) = e else {
                panic!("SENTINEL SENTINELS on {sp}: entry {e:?}");
            };
            kv.chunks(2)
                .find(|p| p[0] == Frame::bulk("port"))
                .and_then(|p| p[1].as_bytes())
                .map(|b| String::from_utf8_lossy(b).parse().unwrap())
                .unwrap_or_else(|| panic!("SENTINEL SENTINELS on {sp}: no port in {kv:?}"))
        })
        .collect();
    ports.sort();
    ports
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_follow_a_failover_by_two_of_three_valkyries() {
    // Missing client libraries fail the test rather than skip it.
    let py = std::env::var_os("VALKYRIE_PYTHON")
        .expect("VALKYRIE_PYTHON is not set: run scripts/test (it installs the Python clients)");
    let np = std::env::var_os("VALKYRIE_NODE_PATH")
        .expect("VALKYRIE_NODE_PATH is not set: run scripts/test (it installs the Node clients)");
    let cli = std::env::var_os("VALKEY_CLI").unwrap_or_else(|| "valkey-cli".into());

    let t0 = Instant::now();
    let bin = valkey_server();
    let tmp = TempDir::new("clients-peers");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let (pm, p1, p2) = (master.port, r1.port, r2.port);
    let mut ds = start_valkyries(&tmp.0, pm).await;
    let ports: Vec<u16> = ds.iter().map(|d| d.sentinel_addrs[0].port()).collect();
    let waiting = ports.clone();
    tokio::task::spawn_blocking(move || wait_discovered(&waiting, Duration::from_secs(20)))
        .await
        .unwrap();
    eprintln!("{:?}: the three Valkyries see each other", t0.elapsed());

    // One Valkyrie down before any client starts.
    let (dead, a, b) = (ports[0], ports[1], ports[2]);
    ds.remove(0).stop().await.unwrap();
    still_refused(dead);
    // Each live one still lists two others (Redisson wants ≥ 2), the
    // stopped one among them.
    for (me, other) in [(a, b), (b, a)] {
        let mut want = vec![dead, other];
        want.sort();
        assert_eq!(sentinels_listed(me), want, "SENTINEL SENTINELS on {me}");
    }

    // Before: every client finds the master and a replica. Most lists start
    // with the dead Valkyrie; valkey-py and fred first reach the other live
    // one. Subscribers are spread over both live Valkyries.
    let mut procs = vec![
        python(&py, "redis", 2, &[dead, a, b], a),
        python(&py, "redis", 3, &[dead, b, a], b),
        python(&py, "valkey", 2, &[b, dead, a], b),
        node(&np, &[dead, a, b], &[dead, b, a], a, b),
    ];
    let clis = tokio::task::spawn_blocking(move || {
        let mut clis = vec![
            cli_subscriber(&cli, a, false),
            cli_subscriber(&cli, b, true),
        ];
        for c in &mut clis {
            c.expect("+switch-master", Duration::from_secs(10));
        }
        clis
    });
    let before = Duration::from_secs(30);
    let (rs, rs_port, rs_read) = tokio::time::timeout(before, redis_rs_before(&[dead, a, b], a))
        .await
        .expect("redis-rs discovered the master");
    assert_eq!((rs_port, rs_read.as_str()), (pm, "1"), "redis-rs");
    let (fred, fred_sub, fred_port) = tokio::time::timeout(before, fred_before(&[b, a, dead], b))
        .await
        .expect("fred discovered the master");
    let fred_rx = {
        use fred::interfaces::EventInterface;
        fred_sub.message_rx()
    };
    assert_eq!(fred_port, pm, "fred");
    let mut clis = clis.await.unwrap();

    procs = tokio::task::spawn_blocking(move || {
        for p in &mut procs {
            if p.name == "node" {
                assert_eq!(
                    p.expect("ioredis-master", Duration::from_secs(20)),
                    pm.to_string()
                );
                assert_eq!(
                    p.expect("ioredis-replica-read", Duration::from_secs(10)),
                    "true"
                );
                assert_eq!(
                    p.expect("node-redis-master", Duration::from_secs(20)),
                    pm.to_string()
                );
            } else {
                assert_eq!(
                    p.expect("master", Duration::from_secs(20)),
                    pm.to_string(),
                    "{}",
                    p.name
                );
                let mut replicas: Vec<u16> = p
                    .expect("replicas", Duration::from_secs(5))
                    .split(' ')
                    .map(|x| x.parse().unwrap())
                    .collect();
                replicas.sort();
                let mut want = vec![p1, p2];
                want.sort();
                assert_eq!(replicas, want, "{}", p.name);
                assert_eq!(
                    p.expect("replica-read", Duration::from_secs(10)),
                    "1",
                    "{}",
                    p.name
                );
            }
            p.expect("ready", Duration::from_secs(20));
        }
        procs
    })
    .await
    .unwrap();

    eprintln!("{:?}: every client is ready", t0.elapsed());
    still_refused(dead);

    // The master dies; the two live Valkyries elect a leader, which
    // promotes a replica, and both end up advertising it.
    let events = tokio::task::spawn_blocking(move || [Events::watch(a), Events::watch(b)])
        .await
        .unwrap();
    master.kill();
    let killed = Instant::now();
    let handles: Vec<_> = ds.iter().map(|d| d.handle.clone()).collect();
    let new = tokio::task::spawn_blocking(move || {
        let settled = |h: &valkyrie::runtime::Handle| {
            let t = h.topology.borrow().clone();
            let g = &t.groups["mymaster"];
            (g.master.port != pm && !g.failover_in_progress).then_some(g.master.port)
        };
        // Two live voters can split a vote; each retry waits twice the
        // failover timeout (12 s), as Sentinel does.
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            let seen: Vec<_> = handles.iter().map(settled).collect();
            if seen[0].is_some() && seen.iter().all(|s| *s == seen[0]) {
                return seen[0];
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    eprintln!(
        "{:?}: failover settled: {new:?}, {:?} after the kill",
        t0.elapsed(),
        killed.elapsed()
    );
    // A slow (or no) failover: what the two Valkyries published.
    if new.is_none() || killed.elapsed() > Duration::from_secs(5) {
        for (port, ev) in [a, b].iter().zip(&events) {
            eprintln!("events on {port}: {:?}", ev.all());
        }
    }
    let new = new.expect("the two live Valkyries failed over within 45 s");
    assert!(new == p1 || new == p2);
    for sp in [a, b] {
        assert_eq!(advertised_master(sp), Some(new), "advertised by {sp}");
    }
    let switch = format!("mymaster 127.0.0.1 {pm} 127.0.0.1 {new}");

    // After: the same client objects write to the new master.
    let (rs_port, rs_switch) = redis_rs_after(rs).await;
    assert_eq!(
        (rs_port, rs_switch.as_str()),
        (new, switch.as_str()),
        "redis-rs"
    );
    let (fred_port, fred_switch) = fred_after(fred, fred_rx).await;
    assert_eq!(
        (fred_port, fred_switch.as_str()),
        (new, switch.as_str()),
        "fred"
    );
    eprintln!("{:?}: redis-rs and fred followed", t0.elapsed());
    let sw = switch.clone();
    tokio::task::spawn_blocking(move || {
        for p in &mut procs {
            p.go();
        }
        for p in &mut procs {
            if p.name == "node" {
                assert_eq!(
                    p.expect("followed-ioredis", Duration::from_secs(40)),
                    new.to_string()
                );
                assert_eq!(
                    p.expect("followed-node-redis", Duration::from_secs(40)),
                    new.to_string()
                );
                assert_eq!(p.expect("ioredis-switch", Duration::from_secs(10)), sw);
                assert_eq!(p.expect("node-redis-switch", Duration::from_secs(10)), sw);
            } else {
                assert_eq!(
                    p.expect("followed", Duration::from_secs(40)),
                    new.to_string(),
                    "{}",
                    p.name
                );
                if p.name.ends_with("resp2") {
                    assert_eq!(
                        p.expect("switch", Duration::from_secs(10)),
                        sw,
                        "{}",
                        p.name
                    );
                }
            }
        }
        for c in &mut clis {
            // valkey-cli prints each element of the message on a line.
            c.expect(&sw, Duration::from_secs(10));
        }
    })
    .await
    .unwrap();
    eprintln!("{:?}: every client followed", t0.elapsed());
    // The writes made after the failover are on the new master.
    for n in [
        "redis-rs",
        "fred",
        "redis-resp2",
        "redis-resp3",
        "valkey-resp2",
        "ioredis",
        "node-redis",
    ] {
        assert_eq!(
            call(new, &["GET", &format!("after:{n}")]),
            Frame::bulk("1"),
            "{n} wrote to the new master"
        );
    }
    still_refused(dead);
    for d in ds {
        d.stop().await.unwrap();
    }
}
