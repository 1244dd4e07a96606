//! `VALKYRIE READINESS` on the Sentinel port, against a real trio: ready
//! with a candidate, then not ready once every replica is at priority 0,
//! each replica saying why; its errors, its RESP3 map, and that
//! `COMMAND COUNT|LIST` and `ACL CAT` still list a sentinel's commands
//! only while ACL rules and `ACL DRYRUN` treat it as any other command.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::*;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

/// A verdict map's scalar fields, its holds, and its replicas' fields
/// (RESP2 flat arrays or RESP3 maps alike).
#[derive(Debug, Default)]
struct Verdict {
    fields: BTreeMap<String, String>,
    holds: Vec<String>,
    replicas: Vec<BTreeMap<String, String>>,
}

fn text(f: &Frame) -> String {
    String::from_utf8_lossy(f.as_bytes().expect("a bulk string")).into_owned()
}

fn pairs(f: &Frame) -> Vec<(Frame, Frame)> {
    match f {
        Frame::Map(p) => p.clone(),
        Frame::Array(flat) => flat
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

fn items(f: &Frame) -> &[Frame] {
    match f {
        Frame::Array(v) => v,
        other => panic!("not an array: {other:?}"),
    }
}

fn parse(f: &Frame) -> Verdict {
    let mut v = Verdict::default();
    for (k, value) in pairs(f) {
        match text(&k).as_str() {
            "holds" => v.holds = items(&value).iter().map(text).collect(),
            "replicas" => {
                v.replicas = items(&value)
                    .iter()
                    .map(|r| pairs(r).iter().map(|(k, v)| (text(k), text(v))).collect())
                    .collect();
            }
            k => {
                v.fields.insert(k.to_string(), text(&value));
            }
        }
    }
    v
}

fn readiness(sp: u16) -> Verdict {
    parse(&call(sp, &["VALKYRIE", "READINESS", "mymaster"]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_names_the_candidate_then_why_none_is_left() {
    let bin = valkey_server();
    let tmp = TempDir::new("readiness");
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let d = Daemon::start(daemon_config(&tmp.0, vec![fast_group(master.port)]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    replicas_known(&d.handle, 2).await;
    let replicas = [r1.port, r2.port].map(|p| format!("127.0.0.1:{p}"));

    tokio::task::spawn_blocking(move || {
        // Ready once every replica has reported, naming one of them.
        let mut last = Verdict::default();
        wait_until(Duration::from_secs(15), || {
            last = readiness(sp);
            last.fields["ready"] == "1"
        });
        let f = &last.fields;
        assert_eq!(f["name"], "mymaster");
        assert_eq!(f["reason"], "ready");
        assert_eq!(f["trigger"], "odown");
        assert!(replicas.contains(&f["candidate"]), "{last:?}");
        assert_eq!(f["candidate-priority"], "100");
        assert!(f["candidate-offset"].parse::<u64>().is_ok(), "{last:?}");
        assert!(f["text"].starts_with(&format!("ready: would promote {}", f["candidate"])));
        assert_eq!((f["until-ms"].as_str(), f["tilt"].as_str()), ("0", "0"));
        // Alone: no peer quorum applies.
        assert_eq!(f["quorum"], "");
        assert_eq!(f["switchover-ready"], "1");
        assert!(last.holds.is_empty());
        assert_eq!(last.replicas.len(), 2);
        assert!(
            last.replicas.iter().all(|r| r["eligible"] == "1"),
            "{last:?}"
        );

        // The same map in RESP3, and every group without a name.
        let mut c = Client::connect(sp).unwrap();
        c.call(&["HELLO", "3"]).unwrap();
        let map = c.call(&["VALKYRIE", "READINESS", "mymaster"]).unwrap();
        assert!(matches!(map, Frame::Map(_)), "{map:?}");
        assert_eq!(parse(&map).fields["name"], "mymaster");
        let all = call(sp, &["VALKYRIE", "READINESS"]);
        assert_eq!(items(&all).len(), 1);
        assert_eq!(parse(&items(&all)[0]).fields["name"], "mymaster");

        // Every replica out of the choice: not ready, and why.
        for port in [r1.port, r2.port] {
            call(port, &["CONFIG", "SET", "replica-priority", "0"]);
        }
        wait_until(Duration::from_secs(15), || {
            last = readiness(sp);
            last.fields["ready"] == "0"
                && last.fields["reason"] == "no_eligible_replica"
                && last.replicas.iter().all(|r| r["reason"] == "priority_zero")
        });
        assert_eq!(last.fields["candidate"], "");
        assert_eq!(last.fields["switchover-ready"], "0");
        assert_eq!(last.holds, ["no_eligible_replica"]);
        assert!(
            last.replicas
                .iter()
                .all(|r| r["eligible"] == "0" && r["priority"] == "0"),
            "{last:?}"
        );
    })
    .await
    .unwrap();
    drop((master, r1, r2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extension_is_unlisted_yet_a_command_for_the_acl() {
    let tmp = TempDir::new("readiness-acl");
    let d = Daemon::start(daemon_config(&tmp.0, vec![])).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let error = |args: &[&str]| match call(sp, args) {
            Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
            other => panic!("{args:?}: {other:?}"),
        };
        assert_eq!(
            error(&["VALKYRIE"]),
            "ERR wrong number of arguments for 'valkyrie' command"
        );
        assert_eq!(
            error(&["valkyrie", "nope"]),
            "ERR unknown subcommand 'nope'. Try VALKYRIE HELP."
        );
        assert_eq!(
            error(&["VALKYRIE", "HELP", "x"]),
            "ERR wrong number of arguments for 'valkyrie|help' command"
        );
        assert_eq!(
            error(&["VALKYRIE", "READINESS", "nosuch"]),
            "ERR No such master with that name"
        );
        assert_eq!(call(sp, &["VALKYRIE", "READINESS"]), Frame::Array(vec![]));
        let help = call(sp, &["VALKYRIE", "HELP"]);
        assert!(items(&help).iter().all(|l| matches!(l, Frame::Simple(_))));
        assert!(text(&items(&help)[0]).starts_with("VALKYRIE <subcommand>"));

        // The listings are a sentinel's.
        assert_eq!(call(sp, &["COMMAND", "COUNT"]), Frame::Integer(15));
        let listed =
            |args: &[&str]| -> Vec<String> { items(&call(sp, args)).iter().map(text).collect() };
        assert!(
            !listed(&["COMMAND", "LIST"])
                .iter()
                .any(|c| c.contains("valkyrie"))
        );
        for cat in ["admin", "slow", "dangerous"] {
            let names = listed(&["ACL", "CAT", cat]);
            assert!(
                !names.is_empty() && !names.iter().any(|c| c.contains("valkyrie")),
                "{cat}"
            );
        }
        // No details or docs, as for a command Sentinel does not have.
        assert_eq!(
            call(sp, &["COMMAND", "INFO", "valkyrie"]),
            call(sp, &["COMMAND", "INFO", "nosuch"])
        );
        assert_eq!(
            call(sp, &["COMMAND", "DOCS", "valkyrie"]),
            Frame::Array(vec![])
        );

        // Rules by name, by category and `+@all`.
        for (user, rule) in [
            ("byname", "+valkyrie|readiness"),
            ("bycat", "+@admin"),
            ("all", "+@all"),
        ] {
            assert_eq!(
                call(sp, &["ACL", "SETUSER", user, "on", "nopass", "-@all", rule]),
                Frame::simple("OK")
            );
            assert_eq!(
                call(sp, &["ACL", "DRYRUN", user, "VALKYRIE", "READINESS", "m"]),
                Frame::simple("OK"),
                "{rule}"
            );
        }
        // `help` is not `@admin`, and not `valkyrie|readiness`.
        for user in ["byname", "bycat"] {
            assert_eq!(
                call(sp, &["ACL", "DRYRUN", user, "VALKYRIE", "HELP"]),
                Frame::bulk(format!(
                    "User {user} has no permissions to run the 'valkyrie|help' command"
                ))
            );
        }
        let mut c = Client::connect(sp).unwrap();
        assert_eq!(
            c.call(&["AUTH", "byname", "x"]).unwrap(),
            Frame::simple("OK")
        );
        assert_eq!(
            c.call(&["VALKYRIE", "READINESS"]).unwrap(),
            Frame::Array(vec![])
        );
        assert!(c.call(&["VALKYRIE", "HELP"]).unwrap().is_error());
    })
    .await
    .unwrap();
}
