//! Real client libraries against the Sentinel port, through a real
//! failover: each discovers the master and a replica, writes and reads,
//! then the master is killed and the same client object writes again —
//! to the promoted replica. Pub/sub clients receive `+switch-master`.
//!
//! Clients: redis-py (RESP2 and RESP3), valkey-py, ioredis, node-redis v5,
//! redis-rs (its Sentinel client), fred (Sentinel server config) and
//! valkey-cli (RESP2 and `-3`). The Python and Node libraries come from
//! `scripts/deps.sh` (VALKYRIE_PYTHON, VALKYRIE_NODE_PATH); the Rust ones
//! are dev-dependencies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::clients::Proc;
use support::*;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

/// One Python client: discovery, a write and a replica read; after "go",
/// the same master handle retries its write until the new master takes it.
fn python(py: &std::ffi::OsStr, module: &str, resp: u8, sp: u16) -> Proc {
    let tag = format!("{module}-resp{resp}");
    let script = format!(
        r#"
import sys, time
from {module}.sentinel import Sentinel
import {module}
s = Sentinel([('127.0.0.1', {sp})], socket_timeout=1, sentinel_kwargs={{'protocol': {resp}}})
m = s.master_for('mymaster', socket_timeout=1, protocol={resp})
r = s.slave_for('mymaster', socket_timeout=1, protocol={resp})
m.set('before:{tag}', '1')
print('master', s.discover_master('mymaster')[1], flush=True)
print('replicas', ' '.join(str(p) for _, p in s.discover_slaves('mymaster')), flush=True)
for _ in range(100):
    if r.get('before:{tag}') == b'1':
        break
    time.sleep(0.05)
print('replica-read', r.get('before:{tag}').decode(), flush=True)
if {resp} == 2:
    p = {module}.Redis(port={sp}).pubsub()
    p.subscribe('+switch-master')
print('ready', flush=True)
sys.stdin.readline()
deadline = time.time() + 30
while True:
    try:
        m.set('after:{tag}', '1')
        break
    except Exception:
        if time.time() > deadline:
            raise
        time.sleep(0.1)
print('followed', s.discover_master('mymaster')[1], flush=True)
if {resp} == 2:
    deadline = time.time() + 10
    while time.time() < deadline:
        msg = p.get_message(timeout=1)
        if msg and msg['type'] == 'message':
            print('switch', msg['data'].decode(), flush=True)
            break
"#
    );
    let mut cmd = Command::new(py);
    cmd.arg("-c").arg(script);
    Proc::spawn(&tag, cmd)
}

/// ioredis and node-redis v5 in one Node process.
fn node(node_path: &std::ffi::OsStr, sp: u16) -> Proc {
    let script = format!(
        r#"
const Redis = require('ioredis');
const {{ createSentinel, createClient }} = require('redis');
const readline = require('readline');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function retry(f) {{
  const deadline = Date.now() + 30000;
  for (;;) {{
    try {{ return await f(); }} catch (e) {{ if (Date.now() > deadline) throw e; await sleep(100); }}
  }}
}}
(async () => {{
  const sentinels = [{{ host: '127.0.0.1', port: {sp} }}];
  const m = new Redis({{ sentinels, name: 'mymaster' }});
  const r = new Redis({{ sentinels, name: 'mymaster', role: 'slave' }});
  await m.set('before:ioredis', '1');
  console.log('ioredis-master', (await m.info('server')).match(/tcp_port:(\d+)/)[1]);
  await retry(async () => {{ if ((await r.get('before:ioredis')) !== '1') throw new Error('not yet'); }});
  console.log('ioredis-replica-read', /role:slave/.test(await r.info('replication')));
  const sub = new Redis({{ host: '127.0.0.1', port: {sp} }});
  let switches = 0;
  sub.on('message', (ch, msg) => {{ switches++; console.log('ioredis-switch', msg); }});
  for (const c of [m, r, sub]) c.on('error', () => {{}});
  await sub.subscribe('+switch-master');
  const ns = await createSentinel({{ name: 'mymaster', sentinelRootNodes: sentinels }}).connect();
  await ns.set('before:node-redis', '1');
  console.log('node-redis-master', (await ns.info('server')).match(/tcp_port:(\d+)/)[1]);
  const nsub = createClient({{ socket: {{ host: '127.0.0.1', port: {sp} }} }});
  nsub.on('error', () => {{}});
  await nsub.connect();
  await nsub.subscribe('+switch-master', (msg) => {{ switches++; console.log('node-redis-switch', msg); }});
  console.log('ready');
  const rl = readline.createInterface({{ input: process.stdin }});
  await new Promise((res) => rl.once('line', res));
  await retry(() => m.set('after:ioredis', '1'));
  console.log('followed-ioredis', (await m.info('server')).match(/tcp_port:(\d+)/)[1]);
  await retry(() => ns.set('after:node-redis', '1'));
  console.log('followed-node-redis', (await ns.info('server')).match(/tcp_port:(\d+)/)[1]);
  const until = Date.now() + 10000;
  while (switches < 2 && Date.now() < until) await sleep(50);
  process.exit(0);
}})().catch((e) => {{ console.error(e); process.exit(1); }});
"#
    );
    let mut cmd = Command::new("node");
    cmd.arg("-e").arg(script).env("NODE_PATH", node_path);
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
/// connection to the Sentinel port.
struct RedisRs {
    master: redis::sentinel::SentinelClient,
    switch: tokio::task::JoinHandle<String>,
}

async fn redis_rs_before(sp: u16) -> (RedisRs, u16, String) {
    use redis::AsyncCommands;
    use redis::sentinel::{SentinelClient, SentinelServerType};
    let url = format!("redis://127.0.0.1:{sp}");
    let mut master = SentinelClient::build(
        vec![url.as_str()],
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
        vec![url.as_str()],
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
    let client = redis::Client::open(url.as_str()).unwrap();
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
            Err(e) if Instant::now() < deadline => {
                let _ = e;
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

async fn fred_before(sp: u16) -> (fred::prelude::Client, fred::prelude::Client, u16) {
    use fred::prelude::*;
    use fred::types::InfoKind;
    let client = support::clients::fred_sentinel(&[sp], "mymaster").await;
    let _: () = client
        .set("before:fred", "1", None, None, false)
        .await
        .unwrap();
    let info: String = client.info(Some(InfoKind::Server)).await.unwrap();
    let port = tcp_port(&info);
    let read = support::clients::fred_replica_read(&client, port, "before:fred").await;
    assert_eq!(read, "1", "fred read from a replica");
    let sub_config = Config {
        server: ServerConfig::new_centralized("127.0.0.1", sp),
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
            Err(e) if Instant::now() < deadline => {
                let _ = e;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_follow_a_failover() {
    let bin = valkey_server();
    let tmp = TempDir::new("clients");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let (pm, p1, p2) = (master.port, r1.port, r2.port);
    let d = Daemon::start(daemon_config(&tmp.0, vec![fast_group(pm)]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    replicas_known(&d.handle, 2).await;

    // Before: every client finds the master and a replica.
    let mut procs = Vec::new();
    let py = std::env::var_os("VALKYRIE_PYTHON");
    match &py {
        Some(py) => {
            procs.push(python(py, "redis", 2, sp));
            procs.push(python(py, "redis", 3, sp));
            // valkey-py 6.2.0 cannot parse SENTINEL MASTERS in RESP3 from
            // any server (docs/compatibility.md): RESP2 only.
            procs.push(python(py, "valkey", 2, sp));
        }
        None => {
            panic!("VALKYRIE_PYTHON is not set: run scripts/test (it installs the Python clients)")
        }
    }
    match std::env::var_os("VALKYRIE_NODE_PATH") {
        Some(np) => procs.push(node(&np, sp)),
        None => {
            panic!("VALKYRIE_NODE_PATH is not set: run scripts/test (it installs the Node clients)")
        }
    }
    let cli = std::env::var_os("VALKEY_CLI").unwrap_or_else(|| "valkey-cli".into());
    let mut clis = vec![
        cli_subscriber(&cli, sp, false),
        cli_subscriber(&cli, sp, true),
    ];
    for c in &mut clis {
        c.expect("+switch-master", Duration::from_secs(10));
    }
    let (rs, rs_port, rs_read) = redis_rs_before(sp).await;
    assert_eq!((rs_port, rs_read.as_str()), (pm, "1"), "redis-rs");
    let (fred, fred_sub, fred_port) = fred_before(sp).await;
    let fred_rx = {
        use fred::interfaces::EventInterface;
        fred_sub.message_rx()
    };
    assert_eq!(fred_port, pm, "fred");

    let mut procs = tokio::task::spawn_blocking(move || {
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

    // The master dies; Valkyrie promotes a replica.
    master.kill();
    let h = d.handle.clone();
    let new = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(20), || {
            let t = h.topology.borrow().clone();
            let g = &t.groups["mymaster"];
            g.master.port != pm && !g.failover_in_progress
        });
        h.topology.borrow().groups["mymaster"].master.port
    })
    .await
    .unwrap();
    assert!(new == p1 || new == p2);
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
    // The writes made after the failover are on the new master.
    let mut names = vec!["redis-rs", "fred"];
    if py.is_some() {
        names.extend(["redis-resp2", "redis-resp3", "valkey-resp2"]);
    }
    if std::env::var_os("VALKYRIE_NODE_PATH").is_some() {
        names.extend(["ioredis", "node-redis"]);
    }
    for n in names {
        assert_eq!(
            call(new, &["GET", &format!("after:{n}")]),
            Frame::bulk("1"),
            "{n} wrote to the new master"
        );
    }
    d.stop().await.unwrap();
}
