//! Every client library the tests drive accepts the master name a
//! `ValkeyCluster` gets by default, `<namespace>.<name>` (see
//! `master_name()` in src/kube/crd/mod.rs): through one Valkyrie's Sentinel
//! port, each discovers the master and the replicas of `shop.cache` (and
//! of a long, realistic `payments-prod.session-cache-eu-west-1`), writes,
//! and reads its write back from a replica. Then the master is SIGKILLed
//! and the same client objects write to the promoted replica; the
//! subscribers receive a `+switch-master` naming the dotted group, which
//! Jedis, go-redis and Lettuce compare with the name they were given.
//!
//! Clients: redis-py (RESP2, RESP3) and valkey-py (RESP2) through
//! tests/clients/sentinel_client.py; ioredis and node-redis through
//! tests/clients/sentinel_clients.js; redis-rs and fred in process;
//! valkey-cli (RESP2 and `-3`); Jedis, Lettuce (RESP3, RESP2,
//! MasterReplica), Redisson (one sentinel, so with its sentinel-list check
//! off) and Spring Data Redis through the Java driver; go-redis
//! (`NewFailoverClient` RESP3 and RESP2, `NewFailoverClusterClient`)
//! through the Go driver. Each driver takes the name from
//! `VALKYRIE_MASTER_NAME`. A missing client fails the test: run
//! scripts/test, or `source scripts/deps.sh && valkyrie_deps`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::clients::{GO_CLIENTS as GO, JAVA_ONE_SENTINEL as JAVA, Proc};
use support::*;
use valkyrie::config::GroupConfig;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

const S: Duration = Duration::from_secs(1);

/// `<namespace>.<name>` of a CR named `cache` in namespace `shop`.
const SHORT: &str = "shop.cache";
/// The same form with a long namespace and CR name, both DNS labels.
const LONG: &str = "payments-prod.session-cache-eu-west-1";

/// The Java and Go clients that print the `+switch-master` message (Spring
/// does not subscribe).
const SUBSCRIBERS: &[&str] = &[
    "jedis",
    "lettuce-resp3",
    "lettuce-resp2",
    "lettuce-master-replica",
    "redisson-unchecked",
    "goredis-resp3",
    "goredis-resp2",
    "goredis-cluster",
];

/// One group at a time: each run starts a JVM, a Go, a Node and three
/// Python processes.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[cfg(feature = "kubernetes")]
#[test]
fn the_names_are_the_default_form_of_a_cr() {
    use valkyrie::kube::crd::{ValkeyCluster, master_name};
    for (ns, cr, want) in [
        ("shop", "cache", SHORT),
        ("payments-prod", "session-cache-eu-west-1", LONG),
    ] {
        let vc: ValkeyCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "valkyrie.io/v1alpha1",
            "kind": "ValkeyCluster",
            "metadata": { "name": cr, "namespace": ns },
            "spec": { "image": "valkey/valkey:8.1" },
        }))
        .unwrap();
        assert_eq!(master_name(&vc).as_deref(), Some(want));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_uses_a_group_named_namespace_dot_name() {
    let _serial = SERIAL.lock().await;
    every_client(SHORT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_uses_a_long_namespace_dot_name() {
    let _serial = SERIAL.lock().await;
    every_client(LONG).await;
}

fn script(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(file)
}

fn required(var: &str) -> std::ffi::OsString {
    std::env::var_os(var).unwrap_or_else(|| {
        panic!("{var} is not set: run scripts/test (or source scripts/deps.sh && valkyrie_deps)")
    })
}

/// A Python client (redis-py or valkey-py) on the sentinel `sp`, which is
/// also where RESP2 clients subscribe to `+switch-master`.
fn python(py: &OsStr, module: &str, resp: u8, sp: u16, name: &str) -> Proc {
    let tag = format!("{module}-resp{resp}");
    let mut cmd = Command::new(py);
    cmd.arg(script("sentinel_client.py"))
        .args([module, &resp.to_string(), &tag])
        .args([sp.to_string(), sp.to_string()])
        .env("VALKYRIE_MASTER_NAME", name);
    Proc::spawn(&tag, cmd)
}

/// ioredis and node-redis in one Node process.
fn node(node_path: &OsStr, sp: u16, name: &str) -> Proc {
    let sp = sp.to_string();
    let mut cmd = Command::new("node");
    cmd.arg(script("sentinel_clients.js"))
        .args([&sp, &sp, &sp, &sp])
        .env("NODE_PATH", node_path)
        .env("VALKYRIE_MASTER_NAME", name);
    Proc::spawn("node", cmd)
}

/// The Java (a jar) or Go driver named by `var`, running `clients`.
fn driver(var: &str, sp: u16, clients: &[&str], name: &str) -> Proc {
    let path = required(var);
    assert!(
        Path::new(&path).is_file(),
        "{var}={path:?} does not exist: run scripts/test"
    );
    let mut cmd = if Path::new(&path).extension().is_some_and(|e| e == "jar") {
        let mut c =
            Command::new(std::env::var_os("VALKYRIE_JAVA").unwrap_or_else(|| "java".into()));
        c.arg("-jar").arg(&path);
        c
    } else {
        Command::new(&path)
    };
    cmd.arg(sp.to_string())
        .arg(clients.join(","))
        .env("VALKYRIE_MASTER_NAME", name);
    Proc::spawn(var, cmd)
}

/// `valkey-cli SENTINEL get-master-addr-by-name <name>`: the port.
fn cli_master(sp: u16, name: &str, resp3: bool) -> u16 {
    let mut cmd =
        Command::new(std::env::var_os("VALKEY_CLI").unwrap_or_else(|| "valkey-cli".into()));
    cmd.args(["-h", "127.0.0.1", "-p", &sp.to_string()]);
    if resp3 {
        cmd.arg("-3");
    }
    // `--no-raw`: the numbered form of a terminal, `1) "127.0.0.1"`.
    cmd.args(["--no-raw", "SENTINEL", "get-master-addr-by-name", name]);
    let tag = if resp3 { "valkey-cli -3" } else { "valkey-cli" };
    let mut p = Proc::spawn(tag, cmd);
    assert_eq!(p.expect("1) ", 10 * S), "\"127.0.0.1\"", "{tag}");
    let port = p.expect("2) ", 10 * S);
    let status = p.wait_exit(10 * S);
    assert!(status.success(), "{tag}: exit {status}");
    port.trim_matches('"')
        .parse()
        .unwrap_or_else(|_| panic!("{tag}: port {port:?}"))
}

fn tcp_port(info: &str) -> u16 {
    info.lines()
        .find_map(|l| l.strip_prefix("tcp_port:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap()
}

fn ports(text: &str) -> BTreeSet<u16> {
    text.split_whitespace()
        .map(|p| p.parse().unwrap_or_else(|_| panic!("a port: {text:?}")))
        .collect()
}

/// Waits until group `name` lists `n` replicas, each with its run id.
async fn replicas_known(handle: &valkyrie::runtime::Handle, name: &str, n: usize) {
    let (h, name) = (handle.clone(), name.to_string());
    tokio::task::spawn_blocking(move || {
        wait_until(10 * S, || {
            let t = h.topology.borrow().clone();
            t.groups.get(&name).is_some_and(|g| {
                g.replicas.len() == n && g.replicas.iter().all(|r| !r.run_id.is_empty())
            })
        });
    })
    .await
    .unwrap();
}

/// redis-rs's Sentinel clients (master and replica): the master's port,
/// and the replica's port once it served the write back.
async fn redis_rs_before(sp: u16, name: &str) -> (redis::sentinel::SentinelClient, u16, u16) {
    use redis::AsyncCommands;
    use redis::sentinel::{SentinelClient, SentinelServerType};
    let url = format!("redis://127.0.0.1:{sp}");
    let build = |kind| SentinelClient::build(vec![url.as_str()], name.to_string(), None, kind);
    let mut master = build(SentinelServerType::Master).unwrap();
    let mut con = master.get_async_connection().await.unwrap();
    let _: () = con.set("before:redis-rs", "1").await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut con)
        .await
        .unwrap();
    let mut replica = build(SentinelServerType::Replica).unwrap();
    let mut rcon = replica.get_async_connection().await.unwrap();
    let deadline = Instant::now() + 5 * S;
    loop {
        let read: Option<String> = rcon.get("before:redis-rs").await.unwrap();
        if read.as_deref() == Some("1") {
            break;
        }
        assert!(Instant::now() < deadline, "redis-rs: replica read {read:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rinfo: String = redis::cmd("INFO").query_async(&mut rcon).await.unwrap();
    assert!(rinfo.contains("role:slave"), "redis-rs replica: {rinfo}");
    (master, tcp_port(&info), tcp_port(&rinfo))
}

/// The same redis-rs master client writes again; the port it wrote to.
async fn redis_rs_after(mut master: redis::sentinel::SentinelClient) -> u16 {
    use redis::AsyncCommands;
    let deadline = Instant::now() + 30 * S;
    loop {
        let attempt = async {
            let mut con = master.get_async_connection().await?;
            let _: () = con.set("after:redis-rs", "1").await?;
            let info: String = redis::cmd("INFO")
                .arg("server")
                .query_async(&mut con)
                .await?;
            Ok::<_, redis::RedisError>(tcp_port(&info))
        };
        match attempt.await {
            Ok(p) => return p,
            Err(e) => {
                assert!(Instant::now() < deadline, "redis-rs did not follow: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// fred with a Sentinel server config: the master's port and the replicas
/// it routes reads to, once a replica served the write back.
async fn fred_before(sp: u16, name: &str) -> (fred::prelude::Client, u16, BTreeSet<u16>) {
    use fred::prelude::*;
    use fred::types::InfoKind;
    let client = support::clients::fred_sentinel(&[sp], name).await;
    let _: () = client
        .set("before:fred", "1", None, None, false)
        .await
        .unwrap();
    let info: String = client.info(Some(InfoKind::Server)).await.unwrap();
    let master = tcp_port(&info);
    let read = support::clients::fred_replica_read(&client, master, "before:fred").await;
    assert_eq!(read, "1", "fred: its write read back from a replica");
    let replicas = client.replicas().nodes().keys().map(|s| s.port).collect();
    (client, master, replicas)
}

async fn fred_after(client: fred::prelude::Client) -> u16 {
    use fred::prelude::*;
    use fred::types::InfoKind;
    let deadline = Instant::now() + 30 * S;
    loop {
        let attempt = async {
            let _: () = client.set("after:fred", "1", None, None, false).await?;
            let info: String = client.info(Some(InfoKind::Server)).await?;
            Ok::<_, Error>(tcp_port(&info))
        };
        match attempt.await {
            Ok(p) => return p,
            Err(e) => {
                assert!(Instant::now() < deadline, "fred did not follow: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// What phase 1 must show: the master, both replicas, a replica's read.
#[derive(Clone, Copy)]
struct Before {
    master: u16,
    replicas: [u16; 2],
}

impl Before {
    fn all(&self) -> BTreeSet<u16> {
        self.replicas.iter().copied().collect()
    }

    fn python(&self, p: &mut Proc) {
        let n = p.name.clone();
        assert_eq!(p.expect("master ", 30 * S), self.master.to_string(), "{n}");
        assert_eq!(ports(&p.expect("replicas ", 10 * S)), self.all(), "{n}");
        assert_eq!(p.expect("replica-read ", 10 * S), "1", "{n}");
        assert_eq!(p.expect("replica-role ", 10 * S), "slave", "{n}");
        p.expect("ready", 10 * S);
    }

    fn node(&self, p: &mut Proc) {
        let m = self.master.to_string();
        assert_eq!(p.expect("ioredis-master ", 30 * S), m, "ioredis");
        // true: the replica connection served the read and is a replica.
        assert_eq!(p.expect("ioredis-replica-read ", 10 * S), "true", "ioredis");
        let port = p.expect("ioredis-replica-port ", 10 * S);
        assert!(
            self.all().contains(&port.parse().unwrap()),
            "ioredis replica {port}"
        );
        assert_eq!(p.expect("node-redis-master ", 20 * S), m, "node-redis");
        assert_eq!(
            p.expect("node-redis-replica-read ", 10 * S),
            "1",
            "node-redis"
        );
        assert_eq!(
            p.expect("node-redis-replica-role ", 10 * S),
            "slave",
            "node-redis"
        );
        assert_eq!(
            ports(&p.expect("node-redis-replicas ", 10 * S)),
            self.all(),
            "node-redis"
        );
        p.expect("ready", 20 * S);
    }

    /// The Java or Go driver: each line starts with the client's name.
    fn driver(&self, p: &mut Proc, clients: &[&str]) {
        for c in clients {
            // A JVM starting many clients on a loaded machine is slow.
            let got = p.expect(&format!("{c} master "), 90 * S);
            assert_eq!(got, self.master.to_string(), "{c}: the master it found");
            let got = ports(&p.expect(&format!("{c} replicas "), 20 * S));
            assert_eq!(got, self.all(), "{c}: the replicas it found");
            let read = p.expect(&format!("{c} replica-read "), 20 * S);
            assert_eq!(read, "1", "{c}: its write read back from a replica");
            let role = p.expect(&format!("{c} replica-role "), 20 * S);
            assert_eq!(role, "slave", "{c}: the node that served the read");
            p.expect(&format!("{c} ready"), 30 * S);
        }
    }
}

/// What phase 2 must show: writes to the new master, and the message.
struct After {
    master: u16,
    switch: String,
}

impl After {
    fn python(&self, p: &mut Proc) {
        let n = p.name.clone();
        assert_eq!(
            p.expect("followed ", 40 * S),
            self.master.to_string(),
            "{n}"
        );
        if n.ends_with("resp2") {
            assert_eq!(p.expect("switch ", 10 * S), self.switch, "{n}");
        }
    }

    fn node(&self, p: &mut Proc) {
        let m = self.master.to_string();
        assert_eq!(p.expect("followed-ioredis ", 40 * S), m, "ioredis");
        assert_eq!(p.expect("followed-node-redis ", 40 * S), m, "node-redis");
        assert_eq!(p.expect("ioredis-switch ", 10 * S), self.switch, "ioredis");
        assert_eq!(
            p.expect("node-redis-switch ", 10 * S),
            self.switch,
            "node-redis"
        );
    }

    fn driver(&self, p: &mut Proc, clients: &[&str]) {
        for c in clients {
            p.expect(&format!("{c} recovered-ms "), 70 * S);
            let got = p.expect(&format!("{c} followed "), 20 * S);
            assert_eq!(got, self.master.to_string(), "{c}: the new master");
            if SUBSCRIBERS.contains(c) {
                let got = p.expect(&format!("{c} switch "), 20 * S);
                assert_eq!(got, self.switch, "{c}: the +switch-master message");
            }
            p.expect(&format!("{c} done"), 20 * S);
        }
        p.expect("done", 20 * S);
        let status = p.wait_exit(20 * S);
        assert!(status.success(), "{}: exit {status}", p.name);
    }
}

/// One Valkyrie monitoring a master and two replicas as `name`; every
/// client through discovery, a replica read and a failover.
async fn every_client(name: &str) {
    let started = Instant::now();
    let py = required("VALKYRIE_PYTHON");
    let node_path = required("VALKYRIE_NODE_PATH");
    let bin = valkey_server();
    let tmp = TempDir::new("master-name");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let before = Before {
        master: master.port,
        replicas: [r1.port, r2.port],
    };
    let mut group = GroupConfig::new(name, "127.0.0.1", master.port, 1);
    group.down_after = Duration::from_millis(1000);
    group.failover_timeout = Duration::from_millis(10_000);
    let d = Daemon::start(daemon_config(&tmp.0, vec![group]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    replicas_known(&d.handle, name, 2).await;

    let cli = (cli_master(sp, name, false), cli_master(sp, name, true));
    assert_eq!(cli, (before.master, before.master), "valkey-cli");

    let mut pys = vec![
        python(&py, "redis", 2, sp, name),
        python(&py, "redis", 3, sp, name),
        // valkey-py 6.2.0 cannot parse SENTINEL MASTERS in RESP3 from any
        // server (docs/compatibility.md): RESP2 only.
        python(&py, "valkey", 2, sp, name),
    ];
    let mut nodejs = node(&node_path, sp, name);
    let mut java = driver("VALKYRIE_JAVA_CLIENTS", sp, JAVA, name);
    let mut go = driver("VALKYRIE_GO_CLIENTS", sp, GO, name);

    let (rs, rs_master, rs_replica) = redis_rs_before(sp, name).await;
    assert_eq!(rs_master, before.master, "redis-rs: the master");
    assert!(before.all().contains(&rs_replica), "redis-rs: {rs_replica}");
    let (fred, fred_master, fred_replicas) = fred_before(sp, name).await;
    assert_eq!(fred_master, before.master, "fred: the master");
    assert_eq!(fred_replicas, before.all(), "fred: the replicas");

    let (mut pys, mut nodejs, mut java, mut go) = tokio::task::spawn_blocking(move || {
        for p in &mut pys {
            before.python(p);
        }
        before.node(&mut nodejs);
        before.driver(&mut java, JAVA);
        before.driver(&mut go, GO);
        (pys, nodejs, java, go)
    })
    .await
    .unwrap();
    eprintln!(
        "{name}: every client found the group in {:?}",
        started.elapsed()
    );

    // The master dies; Valkyrie promotes a replica.
    let old = master.port;
    master.kill();
    let killed = Instant::now();
    for p in pys.iter_mut().chain([&mut nodejs, &mut java, &mut go]) {
        p.go();
    }
    let (h, group) = (d.handle.clone(), name.to_string());
    let new = tokio::task::spawn_blocking(move || {
        wait_until(20 * S, || {
            let t = h.topology.borrow().clone();
            let g = &t.groups[&group];
            g.master.port != old && !g.failover_in_progress
        });
        h.topology.borrow().groups[&group].master.port
    })
    .await
    .unwrap();
    assert!(before.replicas.contains(&new), "promoted {new}");
    eprintln!("{name}: failed over to {new} in {:?}", killed.elapsed());
    let after = After {
        master: new,
        switch: format!("{name} 127.0.0.1 {old} 127.0.0.1 {new}"),
    };

    assert_eq!(redis_rs_after(rs).await, new, "redis-rs followed");
    assert_eq!(fred_after(fred).await, new, "fred followed");
    tokio::task::spawn_blocking(move || {
        for p in &mut pys {
            after.python(p);
        }
        after.node(&mut nodejs);
        after.driver(&mut java, JAVA);
        after.driver(&mut go, GO);
    })
    .await
    .unwrap();
    let cli = (cli_master(sp, name, false), cli_master(sp, name, true));
    assert_eq!(cli, (new, new), "valkey-cli after the failover");

    // Every client's write after the failover is on the new master.
    let mut writers = vec![
        "redis-rs",
        "fred",
        "redis-resp2",
        "redis-resp3",
        "valkey-resp2",
        "ioredis",
        "node-redis",
    ];
    writers.extend(JAVA);
    writers.extend(GO);
    for w in writers {
        assert_eq!(
            call(new, &["GET", &format!("after:{w}")]),
            Frame::bulk("1"),
            "{w}: its write after the failover"
        );
    }
    d.stop().await.unwrap();
    eprintln!("{name}: done in {:?}", started.elapsed());
}
