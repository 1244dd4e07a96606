//! What a synthetic instance answers, in Valkey 8's formats: PING, INFO,
//! ROLE, REPLICAOF (which changes the group's shared topology), CLIENT,
//! CONFIG REWRITE, AUTH, SUBSCRIBE and PUBLISH on the hello channel; `-ERR
//! unknown command` for the rest.

use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use valkyrie_protocol::{Frame, Protocol, encode};

use crate::synthetic::{Group, HELLO, Node, SERVED, Shared, hex_id, seed};
pub(crate) fn reply(out: &mut BytesMut, f: Frame) {
    encode(&f, Protocol::Resp2, out);
}

pub(crate) fn upper(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_uppercase()
}

pub(crate) fn unknown(out: &mut BytesMut, args: &[Bytes]) {
    let mut msg = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&args[0])
    );
    for a in &args[1..] {
        msg.push_str(&format!("'{}' ", String::from_utf8_lossy(a)));
    }
    reply(out, Frame::error(msg));
}

pub(crate) fn handle(
    args: &[Bytes],
    g: &Shared,
    i: usize,
    push_tx: &mpsc::UnboundedSender<Bytes>,
    subscribed: &mut usize,
    out: &mut BytesMut,
) {
    let cmd = upper(&args[0]);
    let kind = match cmd.as_str() {
        "PING" => 0,
        "INFO" => 1,
        "PUBLISH" => 2,
        _ => 3,
    };
    SERVED[kind].fetch_add(1, Ordering::Relaxed);
    if *subscribed > 0
        && !matches!(
            cmd.as_str(),
            "SUBSCRIBE" | "UNSUBSCRIBE" | "PSUBSCRIBE" | "PUNSUBSCRIBE" | "PING" | "RESET"
        )
    {
        reply(
            out,
            Frame::error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / \
                 QUIT / RESET are allowed in this context",
                cmd.to_ascii_lowercase()
            )),
        );
        return;
    }
    match (cmd.as_str(), args.len()) {
        ("PING", 1) if *subscribed > 0 => reply(
            out,
            Frame::Array(vec![Frame::bulk("pong"), Frame::bulk("")]),
        ),
        ("PING", 1) => reply(out, Frame::simple("PONG")),
        ("PING", 2) => reply(out, Frame::Bulk(args[1].clone())),
        ("AUTH", 2 | 3) => reply(out, Frame::simple("OK")),
        ("INFO", _) => {
            let text = info(&g.lock().unwrap(), i, &args[1..]);
            reply(out, Frame::bulk(text));
        }
        ("ROLE", 1) => reply(out, role(&g.lock().unwrap(), i)),
        ("REPLICAOF" | "SLAVEOF", 3) => reply(out, replicaof(g, i, &args[1], &args[2])),
        ("CLIENT", n) if n >= 2 => match upper(&args[1]).as_str() {
            "SETNAME" if n == 3 => reply(out, Frame::simple("OK")),
            // The filter form answers how many it killed; the old form
            // (`CLIENT KILL addr`) answers OK.
            "KILL" if n > 3 => reply(out, Frame::Integer(0)),
            "KILL" if n == 3 => reply(out, Frame::simple("OK")),
            "PAUSE" | "UNPAUSE" => reply(out, Frame::simple("OK")),
            _ => unknown(out, args),
        },
        ("CONFIG", 2) if upper(&args[1]) == "REWRITE" => reply(out, Frame::simple("OK")),
        ("SUBSCRIBE", n) if n >= 2 => {
            for ch in &args[1..] {
                *subscribed += 1;
                if ch.as_ref() == HELLO {
                    g.lock().unwrap().nodes[i].hello_subs.push(push_tx.clone());
                }
                reply(
                    out,
                    Frame::Array(vec![
                        Frame::bulk("subscribe"),
                        Frame::Bulk(ch.clone()),
                        Frame::Integer(*subscribed as i64),
                    ]),
                );
            }
        }
        ("PUBLISH", 3) => {
            let mut receivers = 0;
            if args[1].as_ref() == HELLO && own_hello(&g.lock().unwrap(), &args[2]) {
                let mut msg = BytesMut::new();
                reply(
                    &mut msg,
                    Frame::Array(vec![
                        Frame::bulk("message"),
                        Frame::Bulk(args[1].clone()),
                        Frame::Bulk(args[2].clone()),
                    ]),
                );
                let msg = msg.freeze();
                let mut g = g.lock().unwrap();
                g.nodes[i]
                    .hello_subs
                    .retain(|s| s.send(msg.clone()).is_ok());
                receivers = g.nodes[i].hello_subs.len();
            }
            reply(out, Frame::Integer(receivers as i64));
        }
        _ => unknown(out, args),
    }
}

/// Whether a hello is about this group: its name, and a master among
/// its ports. Real Valkey delivers every message; the stand-in keeps
/// to its group so that a sentinel of another program on this machine
/// that reaches one of these ports cannot join the measured one.
pub(crate) fn own_hello(g: &Group, payload: &[u8]) -> bool {
    let text = String::from_utf8_lossy(payload);
    let f: Vec<&str> = text.split(',').collect();
    f.len() >= 8
        && f[4] == g.name
        && f[6]
            .parse::<u16>()
            .is_ok_and(|p| g.nodes.iter().any(|n| n.port == p))
}

pub(crate) fn replicaof(g: &Shared, i: usize, host: &[u8], port: &[u8]) -> Frame {
    let mut g = g.lock().unwrap();
    if host.eq_ignore_ascii_case(b"NO") && port.eq_ignore_ascii_case(b"ONE") {
        let n = &mut g.nodes[i];
        if n.master.take().is_some() {
            // A promoted replica starts a new history, as Valkey does.
            n.replid2 = std::mem::replace(&mut n.replid, hex_id(seed(n.port, 3)));
        }
        return Frame::simple("OK");
    }
    let Some(p) = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
    else {
        return Frame::error("ERR Invalid master port");
    };
    if g.nodes[i].master == Some(p) {
        return Frame::simple("OK Already connected to specified master");
    }
    // Only within the group: the monitor measured never leaves it, and
    // a sentinel of another program must not move these instances.
    if host != b"127.0.0.1" || !g.nodes.iter().any(|n| n.port == p) {
        return Frame::error("ERR synthetic instance: master outside its group");
    }
    // The new master's history is taken at once (no sync to wait for).
    let replid = g
        .nodes
        .iter()
        .find(|n| n.port == p)
        .map(|n| n.replid.clone());
    let n = &mut g.nodes[i];
    n.master = Some(p);
    if let Some(r) = replid {
        n.replid = r;
    }
    Frame::simple("OK")
}

/// The master `node` follows, if it is a live member of the group.
pub(crate) fn live_master(g: &Group, node: &Node) -> Option<usize> {
    let p = node.master?;
    g.nodes
        .iter()
        .position(|n| n.port == p && n.killed_at.is_none())
}

pub(crate) fn role(g: &Group, i: usize) -> Frame {
    let n = &g.nodes[i];
    let off = g.offset as i64;
    match n.master {
        None => Frame::Array(vec![
            Frame::bulk("master"),
            Frame::Integer(off),
            Frame::Array(
                replicas_of(g, i)
                    .map(|r| {
                        Frame::Array(vec![
                            Frame::bulk("127.0.0.1"),
                            Frame::bulk(r.port.to_string()),
                            Frame::bulk(off.to_string()),
                        ])
                    })
                    .collect(),
            ),
        ]),
        Some(p) => Frame::Array(vec![
            Frame::bulk("slave"),
            Frame::bulk("127.0.0.1"),
            Frame::Integer(i64::from(p)),
            Frame::bulk(if live_master(g, n).is_some() {
                "connected"
            } else {
                "connect"
            }),
            Frame::Integer(off),
        ]),
    }
}

/// Live instances replicating from node `i`.
pub(crate) fn replicas_of(g: &Group, i: usize) -> impl Iterator<Item = &Node> {
    let port = g.nodes[i].port;
    g.nodes
        .iter()
        .filter(move |n| n.master == Some(port) && n.killed_at.is_none())
}

pub(crate) fn info(g: &Group, i: usize, sections: &[Bytes]) -> String {
    use std::fmt::Write as _;
    let all = sections.is_empty()
        || sections.iter().any(|s| {
            matches!(
                s.to_ascii_lowercase().as_slice(),
                b"all" | b"default" | b"everything"
            )
        });
    let want = |name: &[u8]| all || sections.iter().any(|s| s.eq_ignore_ascii_case(name));
    let n = &g.nodes[i];
    let up = g.started.elapsed().as_secs();
    let mut t = String::with_capacity(1600);
    if want(b"server") {
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros();
        let _ = write!(
            t,
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n\
             redis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0000000000000000\r\n\
             server_mode:standalone\r\nos:Linux x86_64\r\narch_bits:64\r\n\
             monotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n\
             gcc_version:12.2.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\n\
             tcp_port:{}\r\nserver_time_usec:{now_us}\r\nuptime_in_seconds:{up}\r\n\
             uptime_in_days:{}\r\nhz:10\r\nconfigured_hz:10\r\nlru_clock:{}\r\n\
             executable:/synthetic-valkey\r\nconfig_file:\r\nio_threads_active:0\r\n\
             availability_zone:\r\nlistener0:name=tcp,bind=127.0.0.1,port={}\r\n",
            std::process::id(),
            n.run_id,
            n.port,
            up / 86_400,
            (now_us / 1_000_000) % 16_777_216,
            n.port
        );
    }
    if want(b"replication") {
        if !t.is_empty() {
            t.push_str("\r\n");
        }
        t.push_str("# Replication\r\n");
        let off = g.offset;
        match n.master {
            None => t.push_str("role:master\r\n"),
            Some(p) => {
                let live = live_master(g, n);
                let _ = write!(
                    t,
                    "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:{p}\r\n\
                     master_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\n\
                     master_sync_in_progress:0\r\nslave_read_repl_offset:{off}\r\n\
                     slave_repl_offset:{off}\r\nreplicas_repl_buffer_size:0\r\n\
                     replicas_repl_buffer_peak:0\r\n",
                    if live.is_some() { "up" } else { "down" },
                    // An idle master pings its replicas every 10 s.
                    if live.is_some() { (up % 10) as i64 } else { -1 },
                );
                if live.is_none() {
                    let down = g
                        .nodes
                        .iter()
                        .find(|m| m.port == p)
                        .and_then(|m| m.killed_at)
                        .map_or(-1, |at| at.elapsed().as_secs() as i64);
                    let _ = write!(t, "master_link_down_since_seconds:{down}\r\n");
                }
                t.push_str("slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n");
            }
        }
        let replicas: Vec<&Node> = replicas_of(g, i).collect();
        let _ = write!(t, "connected_slaves:{}\r\n", replicas.len());
        for (k, r) in replicas.iter().enumerate() {
            let _ = write!(
                t,
                "slave{k}:ip=127.0.0.1,port={},state=online,offset={off},lag=0,type=replica\r\n",
                r.port
            );
        }
        let _ = write!(
            t,
            "replicas_waiting_psync:0\r\nmaster_failover_state:no-failover\r\n\
             master_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{off}\r\n\
             second_repl_offset:-1\r\nrepl_backlog_active:1\r\n\
             repl_backlog_size:10485760\r\nrepl_backlog_first_byte_offset:1\r\n\
             repl_backlog_histlen:{off}\r\n",
            n.replid, n.replid2
        );
    }
    if want(b"keyspace") {
        if !t.is_empty() {
            t.push_str("\r\n");
        }
        let _ = write!(
            t,
            "# Keyspace\r\ndb0:keys={},expires=0,avg_ttl=0\r\n",
            g.keys
        );
    }
    t
}
