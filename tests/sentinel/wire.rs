//! The Sentinel port on the wire: exact bytes for the commands built so
//! far (expectations from the reference observed on Valkey 8.0.1), and real
//! client libraries (redis-py, valkey-py) discovering the master through it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::wire::*;
use support::*;
use valkyrie::daemon::Daemon;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_port_bytes_and_real_clients() {
    let bin = valkey_server();
    let tmp = TempDir::new("wire");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let (pm, p1, p2) = (master.port, r1.port, r2.port);
    let d = Daemon::start(daemon_config(&tmp.0, vec![fast_group(pm)]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    replicas_known(&d.handle, 2).await;

    let pms = pm.to_string();
    let sub = tokio::task::spawn_blocking(move || {
        let mut c = Raw::connect(sp);
        assert_eq!(c.ask(&cmd(&["PING"])), "+PONG\r\n");
        assert_eq!(c.ask(&cmd(&["PING", "x"])), "$1\r\nx\r\n");
        assert_eq!(c.ask("PING\r\n"), "+PONG\r\n");
        assert_eq!(
            c.ask(&cmd(&["GET", "x"])),
            "-ERR unknown command 'GET', with args beginning with: 'x' \r\n"
        );
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "get-master-addr-by-name", "mymaster"])),
            format!("*2\r\n$9\r\n127.0.0.1\r\n${}\r\n{pms}\r\n", pms.len())
        );
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "get-primary-addr-by-name", "nosuch"])),
            "*-1\r\n"
        );
        assert_eq!(
            c.ask(&cmd(&["ROLE"])),
            "*2\r\n$8\r\nsentinel\r\n*1\r\n$8\r\nmymaster\r\n"
        );
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "masters", "extra"])),
            "-ERR wrong number of arguments for 'sentinel|masters' command\r\n"
        );
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "foo"])),
            "-ERR unknown subcommand 'foo'. Try SENTINEL HELP.\r\n"
        );
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "master", "nosuch"])),
            "-ERR No such master with that name\r\n"
        );
        assert_eq!(c.ask(&cmd(&["SENTINEL", "sentinels", "mymaster"])), "*0\r\n");
        assert_eq!(c.ask(&cmd(&["CLIENT", "SETNAME", "app"])), "+OK\r\n");
        assert_eq!(c.ask(&cmd(&["CLIENT", "GETNAME"])), "$3\r\napp\r\n");
        assert_eq!(c.ask(&cmd(&["CLIENT", "SETINFO", "LIB-NAME", "x"])), "+OK\r\n");
        assert_eq!(
            c.ask(&cmd(&["CLIENT", "FOO"])),
            "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"
        );
        let myid = c.ask(&cmd(&["SENTINEL", "myid"]));
        assert!(myid.starts_with("$40\r\n") && myid.len() == 5 + 40 + 2, "{myid:?}");

        // SENTINEL MASTER: a flat array of 20 pairs in RESP2, Valkey's order.
        let master = c.ask(&cmd(&["SENTINEL", "master", "mymaster"]));
        assert!(master.starts_with("*40\r\n$4\r\nname\r\n$8\r\nmymaster\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"), "{master}");
        assert_eq!(
            keys(&master),
            [
                "name", "ip", "port", "runid", "flags", "link-pending-commands", "link-refcount",
                "last-ping-sent", "last-ok-ping-reply", "last-ping-reply", "down-after-milliseconds",
                "info-refresh", "role-reported", "role-reported-time", "config-epoch", "num-slaves",
                "num-other-sentinels", "quorum", "failover-timeout", "parallel-syncs",
            ]
        );
        for field in [
            "$5\r\nflags\r\n$6\r\nmaster\r\n",
            "$10\r\nnum-slaves\r\n$1\r\n2\r\n",
            "$19\r\nnum-other-sentinels\r\n$1\r\n0\r\n",
            "$6\r\nquorum\r\n$1\r\n2\r\n",
            "$23\r\ndown-after-milliseconds\r\n$4\r\n1000\r\n",
            "$13\r\nrole-reported\r\n$6\r\nmaster\r\n",
        ] {
            assert!(master.contains(field), "missing {field:?} in {master}");
        }
        let masters = c.ask(&cmd(&["SENTINEL", "masters"]));
        assert!(masters.starts_with("*1\r\n*40\r\n"), "{masters}");
        let replicas = c.ask(&cmd(&["SENTINEL", "replicas", "mymaster"]));
        assert!(replicas.starts_with("*2\r\n*42\r\n"), "{replicas}");
        assert!(replicas.contains("$5\r\nflags\r\n$5\r\nslave\r\n"), "{replicas}");
        assert!(replicas.contains("$18\r\nmaster-link-status\r\n$2\r\nok\r\n"), "{replicas}");
        assert!(c.ask(&cmd(&["SENTINEL", "slaves", "mymaster"])).starts_with("*2\r\n*42\r\n"));

        assert_eq!(c.ask(&cmd(&["SENTINEL", "pending-scripts"])), "*0\r\n");
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "is-master-down-by-addr", "127.0.0.1", &pms, "0", "*"])),
            "*3\r\n:0\r\n$1\r\n*\r\n:0\r\n"
        );
        assert!(c.ask(&cmd(&["SENTINEL", "debug"])).starts_with("*26\r\n$11\r\nINFO-PERIOD\r\n$4\r\n1000\r\n"));
        let cache = c.ask(&cmd(&["SENTINEL", "info-cache", "mymaster"]));
        assert!(cache.starts_with("*2\r\n$8\r\nmymaster\r\n*3\r\n*2\r\n:"), "{cache}");
        // Each instance's last INFO text: the master's, then two replicas'.
        assert_eq!(cache.matches("# Replication\r\n").count(), 3, "{cache}");
        assert!(cache.contains("# Replication\r\nrole:master\r\n"), "{cache}");
        assert_eq!(cache.matches("# Replication\r\nrole:slave\r\n").count(), 2, "{cache}");
        assert!(c.ask(&cmd(&["SENTINEL", "help"])).starts_with("*49\r\n+SENTINEL <subcommand>"));
        assert_eq!(c.ask(&cmd(&["SENTINEL", "simulate-failure", "crash-after-election"])), "+OK\r\n");
        // Disarmed again (each call clears the flags first): this daemon
        // runs inside the test process, and its next election would end
        // it with status 99.
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "simulate-failure", "help"])),
            "*2\r\n+crash-after-election\r\n+crash-after-promotion\r\n"
        );

        // RESP3.
        assert_eq!(c.ask(&cmd(&["HELLO", "4"])), "-NOPROTO unsupported protocol version\r\n");
        let hello = c.ask(&cmd(&["HELLO", "3"]));
        assert!(
            hello.starts_with("%6\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n8.0.1\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:"),
            "{hello}"
        );
        assert!(hello.ends_with("$4\r\nmode\r\n$8\r\nsentinel\r\n$7\r\nmodules\r\n*0\r\n"), "{hello}");
        assert_eq!(c.ask(&cmd(&["SENTINEL", "get-master-addr-by-name", "nosuch"])), "_\r\n");
        let master3 = c.ask(&cmd(&["SENTINEL", "master", "mymaster"]));
        assert!(master3.starts_with("%20\r\n$4\r\nname\r\n"), "{master3}");
        assert!(c.ask(&cmd(&["SENTINEL", "masters"])).starts_with("*1\r\n%20\r\n"));

        // INFO: a bulk string with both mode lines and the sentinel section.
        let mut c2 = Raw::connect(sp);
        let info = c2.ask(&cmd(&["INFO"]));
        assert!(info.starts_with('$'), "{info}");
        for line in [
            "redis_mode:sentinel\r\n",
            "server_mode:sentinel\r\n",
            "redis_version:7.2.4\r\n",
            "# Sentinel\r\nsentinel_masters:1\r\n",
            &format!("master0:name=mymaster,status=ok,address=127.0.0.1:{pms},slaves=2,sentinels=1\r\n"),
        ] {
            assert!(info.contains(line), "missing {line:?} in {info}");
        }
        assert_eq!(c2.ask(&cmd(&["INFO", "keyspace"])), "$0\r\n\r\n");

        // Subscribed context (RESP2): only pub/sub commands and PING.
        let mut sub = Raw::connect(sp);
        assert_eq!(
            sub.ask(&cmd(&["SUBSCRIBE", "+switch-master", "+sdown"])),
            "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$6\r\n+sdown\r\n:2\r\n"
        );
        assert_eq!(sub.ask(&cmd(&["PING"])), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
        assert_eq!(
            sub.ask(&cmd(&["SENTINEL", "masters"])),
            "-ERR Can't execute 'sentinel|masters': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
        );
        assert_eq!(
            sub.ask(&cmd(&["UNSUBSCRIBE", "+sdown"])),
            "*3\r\n$11\r\nunsubscribe\r\n$6\r\n+sdown\r\n:1\r\n"
        );
        assert_eq!(
            sub.ask(&cmd(&["PSUBSCRIBE", "*"])),
            "*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:2\r\n"
        );

        // A malformed request: Valkey's error text, then the connection closes.
        let mut bad = Raw::connect(sp);
        assert_eq!(bad.ask("*1\r\n$-5\r\n"), "-ERR Protocol error: invalid bulk length\r\n");
        // Other clients are unaffected.
        assert_eq!(Raw::connect(sp).ask(&cmd(&["PING"])), "+PONG\r\n");
        sub
    })
    .await
    .unwrap();
    let mut sub = sub;

    // Real client libraries discover the master and the replicas.
    if let Some(py) = std::env::var_os("VALKYRIE_PYTHON") {
        for module in ["redis", "valkey"] {
            // valkey-py 6.2.0 cannot parse SENTINEL MASTERS in RESP3 from any
            // server (its parse_sentinel_masters_resp3 iterates a dict as if
            // it were a flat list; docs/compatibility.md), so RESP3 is
            // checked with redis-py only.
            let resp3 = if module == "redis" {
                format!(
                    "r3 = Sentinel([('127.0.0.1', {sp})], socket_timeout=2, sentinel_kwargs={{'protocol': 3}})\nprint(r3.discover_master('mymaster'))\n"
                )
            } else {
                format!("print(('127.0.0.1', {pm}))\n")
            };
            let script = format!(
                "import {module}\n\
                 from {module}.sentinel import Sentinel\n\
                 s = Sentinel([('127.0.0.1', {sp})], socket_timeout=2)\n\
                 print(s.discover_master('mymaster'))\n\
                 print(sorted(s.discover_slaves('mymaster')))\n\
                 m = s.master_for('mymaster', socket_timeout=2)\n\
                 m.set('k', 'v')\n\
                 print(m.get('k'))\n\
                 {resp3}"
            );
            let out = std::process::Command::new(&py)
                .arg("-c")
                .arg(&script)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{module}: {}\n{stdout}",
                String::from_utf8_lossy(&out.stderr)
            );
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(
                lines[0],
                format!("('127.0.0.1', {pm})"),
                "{module}: {stdout}"
            );
            let mut want = [p1, p2];
            want.sort();
            assert_eq!(
                lines[1],
                format!("[('127.0.0.1', {}), ('127.0.0.1', {})]", want[0], want[1]),
                "{module}: {stdout}"
            );
            assert_eq!(lines[2], "b'v'", "{module}: {stdout}");
            assert_eq!(
                lines[3],
                format!("('127.0.0.1', {pm})"),
                "{module} RESP3: {stdout}"
            );
        }
    } else {
        panic!("VALKYRIE_PYTHON is not set: run scripts/test (it installs the Python clients)");
    }
    // valkey-cli, RESP2 and RESP3 (`-3` sends HELLO 3 first).
    let cli = std::env::var_os("VALKEY_CLI").unwrap_or_else(|| "valkey-cli".into());
    for extra in [None, Some("-3")] {
        let mut cmd = std::process::Command::new(&cli);
        cmd.args(["-h", "127.0.0.1", "-p", &sp.to_string()]);
        if let Some(e) = extra {
            cmd.arg(e);
        }
        match cmd
            .args(["SENTINEL", "get-master-addr-by-name", "mymaster"])
            .output()
        {
            Ok(out) => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(out.status.success(), "valkey-cli {extra:?}: {stdout}");
                assert_eq!(stdout, format!("127.0.0.1\n{pm}\n"), "valkey-cli {extra:?}");
            }
            Err(e) => panic!("valkey-cli did not run ({e}): run scripts/test, or set VALKEY_CLI"),
        }
    }

    // Node clients: ioredis (get-master-addr-by-name, SENTINEL sentinels,
    // HELLO 3, master and replica roles) and node-redis v5's sentinel
    // client (SENTINEL MASTER/REPLICAS/SENTINELS).
    if let Some(node_path) = std::env::var_os("VALKYRIE_NODE_PATH") {
        let script = format!(
            "const Redis = require('ioredis');\n\
             const {{ createSentinel }} = require('redis');\n\
             (async () => {{\n\
               const sentinels = [{{ host: '127.0.0.1', port: {sp} }}];\n\
               const m = new Redis({{ sentinels, name: 'mymaster' }});\n\
               await m.set('ik', 'iv');\n\
               console.log('ioredis', await m.get('ik'));\n\
               const r = new Redis({{ sentinels, name: 'mymaster', role: 'slave' }});\n\
               console.log('ioredis-replica', /role:slave/.test(await r.info('replication')));\n\
               const s = await createSentinel({{ name: 'mymaster', sentinelRootNodes: sentinels }}).connect();\n\
               await s.set('nk', 'nv');\n\
               console.log('node-redis', await s.get('nk'));\n\
               await s.close(); m.disconnect(); r.disconnect();\n\
               process.exit(0);\n\
             }})().catch(e => {{ console.error(e); process.exit(1); }});\n"
        );
        let out = std::process::Command::new("node")
            .arg("-e")
            .arg(&script)
            .env("NODE_PATH", &node_path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "node clients: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("ioredis iv"), "{stdout}");
        // The writes went to the real master.
        assert_eq!(
            call(pm, &["GET", "ik"]),
            valkyrie_protocol::Frame::bulk("iv")
        );
        assert_eq!(
            call(pm, &["GET", "nk"]),
            valkyrie_protocol::Frame::bulk("nv")
        );
        assert!(stdout.contains("ioredis-replica true"), "{stdout}");
        assert!(stdout.contains("node-redis nv"), "{stdout}");
    } else {
        panic!("VALKYRIE_NODE_PATH is not set: run scripts/test (it installs the Node clients)");
    }

    // The master dies: subscribers get `+switch-master` exactly once, on
    // the channel and through the pattern, in Sentinel's format.
    master.kill();
    let h = d.handle.clone();
    let text = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(20), || {
            h.topology.borrow().groups["mymaster"].master.port != pm
        });
        // Read until both deliveries of +switch-master are in, bounded.
        let mut all = String::new();
        wait_until(Duration::from_secs(5), || {
            all.push_str(&sub.ask(""));
            all.matches("+switch-master\r\n$").count() >= 2
        });
        all
    })
    .await
    .unwrap();
    let new = d.handle.topology.borrow().groups["mymaster"].master.port;
    let payload = format!("mymaster 127.0.0.1 {pm} 127.0.0.1 {new}");
    let message = format!(
        "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n${}\r\n{payload}\r\n",
        payload.len()
    );
    let pmessage = format!(
        "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$14\r\n+switch-master\r\n${}\r\n{payload}\r\n",
        payload.len()
    );
    assert_eq!(text.matches(&message).count(), 1, "{text}");
    assert_eq!(text.matches(&pmessage).count(), 1, "{text}");
    assert!(
        text.contains("$6\r\n+sdown\r\n"),
        "pattern * sees +sdown: {text}"
    );
    d.stop().await.unwrap();
}
