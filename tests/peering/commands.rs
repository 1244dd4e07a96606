//! The Sentinel port's peer-facing commands against a real Valkyrie
//! daemon and a real valkey-server master: `SENTINEL
//! is-master-down-by-addr` (the reply table of Sentinel 8.0.1, votes saved
//! before they are announced and kept across a restart), `PUBLISH
//! __sentinel__:hello`, and what the peer table shows (`SENTINEL
//! SENTINELS`, `num-other-sentinels`, `CKQUORUM`, `INFO sentinel`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::observe::Events;
use support::wire::{Conn, keys};
use support::*;
use valkyrie::daemon::Daemon;

const FF: &str = "ffffffffffffffffffffffffffffffffffffffff";
const EE: &str = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
const DD: &str = "dddddddddddddddddddddddddddddddddddddddd";
const AA: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const BB: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// One reply, as text.
fn ask(c: &mut Conn, args: &[&str]) -> String {
    String::from_utf8(c.ask(args)).unwrap()
}

/// `*3 :<down> $<leader> :<epoch>`, as Sentinel writes it.
fn answer(down: u8, leader: &str, epoch: u64) -> String {
    format!(
        "*3\r\n:{down}\r\n${}\r\n{leader}\r\n:{epoch}\r\n",
        leader.len()
    )
}

/// `SENTINEL is-master-down-by-addr <ip> <port> <epoch> <runid>`.
fn down_by_addr(c: &mut Conn, ip: &str, port: u16, epoch: &str, runid: &str) -> String {
    let port = port.to_string();
    ask(
        c,
        &[
            "SENTINEL",
            "is-master-down-by-addr",
            ip,
            &port,
            epoch,
            runid,
        ],
    )
}

const NOT_AN_INTEGER: &str = "-ERR value is not an integer or out of range\r\n";

/// Publishes `payload` on the master's hello channel, as a sentinel does.
fn channel_hello(pm: u16, payload: &str) {
    let mut m = Conn::connect(pm);
    let reply = ask(&mut m, &["PUBLISH", "__sentinel__:hello", payload]);
    assert!(reply.starts_with(':'), "{reply}");
}

/// Verified peers: for each run id, a valkey-server answering PING at
/// its announced port and a hello of its own on the master's channel;
/// waits until the daemon lists them all (only verified peers are
/// listed).
fn verified_peers(
    bin: &std::path::Path,
    dir: &std::path::Path,
    sp: u16,
    pm: u16,
    ids: &[&str],
) -> Vec<Server> {
    let servers: Vec<Server> = ids
        .iter()
        .map(|_| Server::start(bin, dir, free_port(), None))
        .collect();
    for (id, s) in ids.iter().zip(&servers) {
        channel_hello(pm, &hello(s.port, id, "0", pm, "0"));
    }
    let mut c = Conn::connect(sp);
    wait_until(Duration::from_secs(15), || peers(&mut c).len() == ids.len());
    servers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_master_down_by_addr_answers_as_sentinel() {
    let bin = valkey_server();
    let tmp = TempDir::new("peer-vote");
    let mut master = Server::start(&bin, &tmp.0, free_port(), None);
    let pm = master.port;
    let d = Daemon::start(daemon_config(&tmp.0, vec![fast_group(pm)]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    let dir = tmp.0.clone();

    tokio::task::spawn_blocking(move || {
        let events = Events::watch(sp);
        let mut c = Conn::connect(sp);
        let nobody = free_port();
        // Votes go only to verified peers: before there are any, nobody
        // gets one and the epoch stays.
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "5", FF),
            answer(0, "*", 0)
        );
        let _peers = verified_peers(&bin, &dir, sp, pm, &[FF, EE, DD]);

        // The `*` form: only the down state, no vote, no epoch.
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "0", "*"),
            answer(0, "*", 0)
        );
        assert_eq!(
            down_by_addr(&mut c, "10.9.9.9", pm, "0", "*"),
            answer(0, "*", 0)
        );
        // An address no master has: no vote, no epoch change.
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", nobody, "9", EE),
            answer(0, "*", 0)
        );

        // The first request in epoch 5 gets the vote, and says so.
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "5", FF),
            answer(0, FF, 5)
        );
        wait_until(Duration::from_secs(5), || {
            events.saw("+new-epoch", "5") && events.saw("+vote-for-leader", &format!("{FF} 5"))
        });
        // Same epoch, another candidate; an older epoch: the earlier vote.
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "5", EE),
            answer(0, FF, 5)
        );
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "4", EE),
            answer(0, FF, 5)
        );
        // `*` still names no vote.
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "5", "*"),
            answer(0, "*", 0)
        );

        // Epochs: Sentinel's error for a non-integer; deliberately also for
        // a negative, an out-of-range or a far-ahead one (Sentinel would
        // take `-1` as 2^64-1).
        for bad in [
            "x",
            "-1",
            "007",
            "18446744073709551616",
            "9223372036854775808",
            "4294967302",
        ] {
            assert_eq!(
                down_by_addr(&mut c, "127.0.0.1", pm, bad, EE),
                NOT_AN_INTEGER,
                "{bad}"
            );
        }
        let pms = pm.to_string();
        assert_eq!(
            ask(
                &mut c,
                &[
                    "SENTINEL",
                    "is-master-down-by-addr",
                    "127.0.0.1",
                    "x",
                    "0",
                    "*"
                ]
            ),
            NOT_AN_INTEGER
        );
        // A port no master can have: not found.
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", 0, "0", "*"),
            answer(0, "*", 0)
        );
        assert_eq!(
            ask(
                &mut c,
                &[
                    "SENTINEL",
                    "is-master-down-by-addr",
                    "127.0.0.1",
                    "70000",
                    "0",
                    "*"
                ]
            ),
            answer(0, "*", 0)
        );

        // The alias, in any case, votes the same way.
        assert_eq!(
            ask(
                &mut c,
                &[
                    "SENTINEL",
                    "IS-PRIMARY-DOWN-BY-ADDR",
                    "127.0.0.1",
                    &pms,
                    "6",
                    DD
                ]
            ),
            answer(0, DD, 6)
        );
        // Arity.
        assert_eq!(
            ask(
                &mut c,
                &["SENTINEL", "is-master-down-by-addr", "127.0.0.1", &pms, "0"]
            ),
            "-ERR wrong number of arguments for 'sentinel|is-master-down-by-addr' command\r\n"
        );
        assert_eq!(
            ask(
                &mut c,
                &[
                    "SENTINEL",
                    "IS-PRIMARY-DOWN-BY-ADDR",
                    "127.0.0.1",
                    &pms,
                    "0",
                    "*",
                    "x"
                ]
            ),
            "-ERR wrong number of arguments for 'sentinel|is-primary-down-by-addr' command\r\n"
        );

        // Only the requests that voted moved the epoch.
        wait_until(Duration::from_secs(5), || {
            events.saw("+vote-for-leader", &format!("{DD} 6"))
        });
        let epochs: Vec<String> = events
            .all()
            .into_iter()
            .filter(|(ch, _)| ch == "+new-epoch")
            .map(|(_, p)| p)
            .collect();
        assert_eq!(epochs, ["5", "6"]);

        // Down: our own SDOWN of that master.
        master.kill();
        wait_until(Duration::from_secs(10), || {
            down_by_addr(&mut c, "127.0.0.1", pm, "0", "*") == answer(1, "*", 0)
        });
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vote_is_saved_before_it_is_announced() {
    let bin = valkey_server();
    let tmp = TempDir::new("peer-vote-saved");
    let state = tmp.0.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let master = Server::start(&bin, &tmp.0, free_port(), None);
    let pm = master.port;

    // Vote for AA in epoch 7, then stop.
    let d = Daemon::start(daemon_config(&state, vec![fast_group(pm)]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    let dir = tmp.0.clone();
    let fakes = tokio::task::spawn_blocking(move || {
        let fakes = verified_peers(&bin, &dir, sp, pm, &[AA, BB, DD]);
        let mut c = Conn::connect(sp);
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "7", AA),
            answer(0, AA, 7)
        );
        fakes
    })
    .await
    .unwrap();
    d.stop().await.unwrap();

    // Started again on the same state: still AA's in epoch 7.
    let d = Daemon::start(daemon_config(&state, vec![fast_group(pm)]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    let state_dir = state.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = Conn::connect(sp);
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "7", BB),
            answer(0, AA, 7)
        );
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "6", BB),
            answer(0, AA, 7)
        );

        // A vote that cannot be saved is not announced.
        let blocked = state_dir.join("valkyrie-state.json.tmp");
        let _ = std::fs::remove_file(&blocked);
        std::fs::create_dir_all(blocked.join("blocked")).unwrap();
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "8", BB),
            answer(0, "*", 0)
        );
        // Nor the one it holds while the file stays unwritable.
        assert_eq!(
            down_by_addr(&mut c, "127.0.0.1", pm, "8", DD),
            answer(0, "*", 0)
        );
        // Once written, that vote is the one.
        std::fs::remove_dir_all(&blocked).unwrap();
        wait_until(Duration::from_secs(10), || {
            down_by_addr(&mut c, "127.0.0.1", pm, "8", DD) == answer(0, BB, 8)
        });
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
    drop((master, fakes));
}

/// A hello from `runid` at `127.0.0.1:<port>` about `mymaster` at `pm`.
fn hello(port: u16, runid: &str, current: &str, pm: u16, config: &str) -> String {
    format!("127.0.0.1,{port},{runid},{current},mymaster,127.0.0.1,{pm},{config}")
}

/// The keys of the first instance in a `SENTINEL SENTINELS` reply.
fn peer_keys(reply: &str) -> Vec<String> {
    // Skip the outer `*N`: `keys` reads one flat array.
    let inner = reply.split_once("\r\n").unwrap().1;
    keys(inner)
}

/// The fields of a `SENTINEL SENTINELS` reply, per peer (RESP2).
fn peers(c: &mut Conn) -> Vec<Vec<(String, String)>> {
    match c.frame(&["SENTINEL", "SENTINELS", "mymaster"]) {
        valkyrie_protocol::Frame::Array(list) => list
            .into_iter()
            .map(|p| match p {
                valkyrie_protocol::Frame::Array(kv) => kv
                    .chunks(2)
                    .map(|pair| {
                        let s = |f: &valkyrie_protocol::Frame| {
                            String::from_utf8_lossy(f.as_bytes().unwrap()).into_owned()
                        };
                        (s(&pair[0]), s(&pair[1]))
                    })
                    .collect(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

fn field<'a>(peer: &'a [(String, String)], name: &str) -> &'a str {
    &peer.iter().find(|(k, _)| k == name).unwrap().1
}

const FIELDS: [&str; 14] = [
    "name",
    "ip",
    "port",
    "runid",
    "flags",
    "link-pending-commands",
    "link-refcount",
    "last-ping-sent",
    "last-ok-ping-reply",
    "last-ping-reply",
    "down-after-milliseconds",
    "last-hello-message",
    "voted-leader",
    "voted-leader-epoch",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hellos_on_the_data_nodes_make_peers_once_they_answer() {
    let bin = valkey_server();
    let tmp = TempDir::new("peer-hello");
    let master = Server::start(&bin, &tmp.0, free_port(), None);
    // The fake peer's address: a server that answers PING, so the peer
    // link to it stays up.
    let fake = Server::start(&bin, &tmp.0, free_port(), None);
    let (pm, pf) = (master.port, fake.port);
    let mut group = fast_group(pm);
    group.down_after = Duration::from_millis(3000);
    let d = Daemon::start(daemon_config(&tmp.0, vec![group]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    let state_file = tmp.0.clone();
    let dir = tmp.0.clone();

    tokio::task::spawn_blocking(move || {
        let events = Events::watch(sp);
        let mut c = Conn::connect(sp);
        assert_eq!(
            ask(&mut c, &["SENTINEL", "SENTINELS", "mymaster"]),
            "*0\r\n"
        );
        assert_eq!(
            ask(&mut c, &["PUBLISH", "other", "x"]),
            "-ERR Only HELLO messages are accepted by Sentinel instances.\r\n"
        );
        assert_eq!(
            ask(&mut c, &["PUBLISH", "__sentinel__:hello"]),
            "-ERR wrong number of arguments for 'publish' command\r\n"
        );
        assert_eq!(
            ask(&mut c, &["SENTINEL", "sentinels", "nosuch"]),
            "-ERR No such master with that name\r\n"
        );
        assert_eq!(
            ask(&mut c, &["SENTINEL", "CKQUORUM", "nosuch"]),
            "-ERR No such master with that name\r\n"
        );

        // Our port is anyone's: a hello there from a sentinel we do not
        // know is taken (`:1`, as Sentinel) and changes nothing.
        let good = hello(pf, AA, "3", pm, "2");
        assert_eq!(
            ask(&mut c, &["PUBLISH", "__sentinel__:hello", &good]),
            ":1\r\n"
        );
        // A hello whose epochs are -1 is ignored (deliberate difference:
        // Sentinel would take them as 2^64-1).
        channel_hello(pm, &hello(pf, AA, "-1", pm, "-1"));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            ask(&mut c, &["SENTINEL", "SENTINELS", "mymaster"]),
            "*0\r\n"
        );
        assert_eq!(master_field(sp, "config-epoch").as_deref(), Some("0"));
        assert!(!events.saw("+sentinel", ""), "{:?}", events.all());
        // A valid one on the master's channel makes a peer, listed (and
        // heard) once it answers a PING on its address.
        channel_hello(pm, &good);
        wait_until(Duration::from_secs(10), || {
            events.saw(
                "+sentinel",
                &format!("sentinel {AA} 127.0.0.1 {pf} @ mymaster"),
            ) && peers(&mut c).len() == 1
        });
        assert_eq!(master_field(sp, "config-epoch").as_deref(), Some("0"));
        channel_hello(pm, &good);
        wait_until(Duration::from_secs(5), || {
            events.saw("+new-epoch", "3")
                && master_field(sp, "config-epoch").as_deref() == Some("2")
        });
        let epochs: Vec<String> = events
            .all()
            .into_iter()
            .filter(|(ch, _)| ch == "+new-epoch")
            .map(|(_, p)| p)
            .collect();
        assert_eq!(epochs, ["3"], "the -1 hello moved the epoch");
        // The adopted current epoch is in the state file (a restart must
        // not advertise less than we did).
        let saved = std::fs::read_to_string(state_file.join("valkyrie-state.json")).unwrap();
        assert!(saved.contains("\"current_epoch\": 3"), "{saved}");

        // SENTINEL SENTINELS: the 14 fields, in Sentinel's order (RESP2).
        let raw = ask(&mut c, &["SENTINEL", "SENTINELS", "mymaster"]);
        let pfs = pf.to_string();
        let head = format!(
            "*1\r\n*28\r\n$4\r\nname\r\n$40\r\n{AA}\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n\
             $4\r\nport\r\n${}\r\n{pfs}\r\n$5\r\nrunid\r\n$40\r\n{AA}\r\n$5\r\nflags\r\n",
            pfs.len()
        );
        assert!(raw.starts_with(&head), "{raw}");
        assert_eq!(peer_keys(&raw), FIELDS);
        for part in [
            "$21\r\nlink-pending-commands\r\n$1\r\n0\r\n$13\r\nlink-refcount\r\n$1\r\n1\r\n",
            "$23\r\ndown-after-milliseconds\r\n$4\r\n3000\r\n",
            "$12\r\nvoted-leader\r\n$1\r\n?\r\n$18\r\nvoted-leader-epoch\r\n$1\r\n0\r\n",
        ] {
            assert!(raw.contains(part), "missing {part:?} in {raw}");
        }
        // The peer link comes up: no longer disconnected.
        wait_until(Duration::from_secs(10), || {
            let p = peers(&mut c);
            field(&p[0], "flags") == "sentinel" && field(&p[0], "last-ping-sent") == "0"
        });
        let p = peers(&mut c);
        let ms = |name: &str| field(&p[0], name).parse::<u64>().unwrap();
        assert!(ms("last-ok-ping-reply") < 3000, "{p:?}");
        assert!(ms("last-ping-reply") < 3000, "{p:?}");
        assert!(ms("last-hello-message") < 10_000, "{p:?}");

        // RESP3: a map per peer.
        let mut c3 = Conn::connect(sp);
        assert!(ask(&mut c3, &["HELLO", "3"]).starts_with('%'));
        let raw3 = ask(&mut c3, &["SENTINEL", "SENTINELS", "mymaster"]);
        assert!(
            raw3.starts_with(&format!("*1\r\n%14\r\n$4\r\nname\r\n$40\r\n{AA}\r\n")),
            "{raw3}"
        );

        // What the peer count shows elsewhere.
        assert_eq!(
            master_field(sp, "num-other-sentinels").as_deref(),
            Some("1")
        );
        assert_eq!(
            ask(&mut c, &["SENTINEL", "CKQUORUM", "mymaster"]),
            "+OK 2 usable Sentinels. Quorum and failover authorization can be reached\r\n"
        );
        let info = c.frame(&["INFO", "sentinel"]);
        let info = String::from_utf8_lossy(info.as_bytes().unwrap()).into_owned();
        assert!(
            info.contains(&format!(
                "master0:name=mymaster,status=ok,address=127.0.0.1:{pm},slaves=0,sentinels=2\r\n"
            )),
            "{info}"
        );

        // A second peer that stops answering: SDOWN after down-after,
        // with the 15th field, and no longer usable.
        let mut doomed = Server::start(&bin, &dir, free_port(), None);
        let dead = doomed.port;
        channel_hello(pm, &hello(dead, BB, "3", pm, "2"));
        wait_until(Duration::from_secs(10), || peers(&mut c).len() == 2);
        doomed.kill();
        wait_until(Duration::from_secs(15), || {
            peers(&mut c).iter().any(|p| {
                field(p, "name") == BB && field(p, "flags") == "s_down,sentinel,disconnected"
            })
        });
        let p = peers(&mut c);
        let b = p.iter().find(|p| field(p, "name") == BB).unwrap();
        let names: Vec<&str> = b.iter().map(|(k, _)| k.as_str()).collect();
        let mut with_sdown = FIELDS.to_vec();
        with_sdown.insert(10, "s-down-time");
        assert_eq!(names, with_sdown);
        assert!(events.saw(
            "+sdown",
            &format!("sentinel {BB} 127.0.0.1 {dead} @ mymaster")
        ));
        assert_eq!(
            master_field(sp, "num-other-sentinels").as_deref(),
            Some("2")
        );
        assert_eq!(
            ask(&mut c, &["SENTINEL", "CKQUORUM", "mymaster"]),
            "+OK 2 usable Sentinels. Quorum and failover authorization can be reached\r\n"
        );
        assert_eq!(
            ask(&mut c, &["SENTINEL", "SET", "mymaster", "quorum", "3"]),
            "+OK\r\n"
        );
        assert_eq!(
            ask(&mut c, &["SENTINEL", "CKQUORUM", "mymaster"]),
            "-NOQUORUM 2 usable Sentinels. Not enough available Sentinels to reach the \
             specified quorum for this master\r\n"
        );

        // New peer credentials: every peer link is dropped and redialled
        // with them (the fake peer takes the new password first; its
        // authenticated connections stay).
        let myid = c.frame(&["SENTINEL", "MYID"]);
        let name = format!(
            "name=sentinel-{}-cmd",
            &String::from_utf8_lossy(myid.as_bytes().unwrap())[..8]
        );
        let links = |port: u16| -> Vec<String> {
            let mut f = Conn::connect(port);
            if port == pf {
                let _ = f.ask(&["AUTH", "s3cret"]);
            }
            let list = f.frame(&["CLIENT", "LIST"]);
            String::from_utf8_lossy(list.as_bytes().unwrap())
                .lines()
                .filter(|l| l.contains(&name))
                .filter_map(|l| l.split(' ').next().map(str::to_string))
                .collect()
        };
        let before = links(pf);
        assert_eq!(before.len(), 1, "{before:?}");
        assert_eq!(
            ask(
                &mut Conn::connect(pf),
                &["CONFIG", "SET", "requirepass", "s3cret"]
            ),
            "+OK\r\n"
        );
        assert_eq!(
            ask(
                &mut c,
                &["SENTINEL", "CONFIG", "SET", "sentinel-pass", "s3cret"]
            ),
            "+OK\r\n"
        );
        wait_until(Duration::from_secs(10), || {
            let now = links(pf);
            now.len() == 1 && now != before
        });

        // RESET forgets the peers (they come back with their next hello).
        assert_eq!(ask(&mut c, &["SENTINEL", "RESET", "mymaster"]), ":1\r\n");
        wait_until(Duration::from_secs(5), || {
            ask(&mut c, &["SENTINEL", "SENTINELS", "mymaster"]) == "*0\r\n"
                && master_field(sp, "num-other-sentinels").as_deref() == Some("0")
        });
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}
