//! Planned switchovers across many groups, through the admin API, against
//! real valkey-servers:
//! - a plan over 30 groups, each written to all along by a client that
//!   follows the advertised master: every group gets a new master, no
//!   acknowledged write is lost, and each group's stall (the longest gap
//!   between two acknowledged writes) is printed;
//! - a plan that meets a group with no replica it may promote stops
//!   there, says which and why, and leaves the groups after it untouched;
//! - who may write: nobody without configured credentials (403), not
//!   without them (401), only as JSON (415); a malformed plan is a 400, a
//!   second plan while one runs a 409, and a cancel stops one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::http::http;
use support::observe::{Writer, lost_writes, stalls};
use support::*;
use valkyrie::config::GroupConfig;
use valkyrie::daemon::Daemon;
use valkyrie::runtime::Handle;

const TOKEN: &str = "plan-token-0123456789";

/// `name`'s master and one replica of it (`priority` 0: never promoted).
fn pair(bin: &Path, dir: &Path, priority: u32) -> (Server, Server) {
    let m = Server::start(bin, dir, free_port(), None);
    let r = Server::start(bin, dir, free_port(), Some(m.port));
    if priority != 100 {
        let p = priority.to_string();
        call(r.port, &["CONFIG", "SET", "replica-priority", &p]);
    }
    (m, r)
}

fn group(name: &str, master: u16) -> GroupConfig {
    let mut g = GroupConfig::new(name, "127.0.0.1", master, 1);
    g.down_after = Duration::from_millis(1000);
    g.failover_timeout = Duration::from_millis(10_000);
    g
}

/// A daemon over `groups`, its admin port asking for [`TOKEN`] when
/// `auth`.
async fn daemon(dir: &Path, groups: Vec<GroupConfig>, auth: bool) -> (Daemon, u16) {
    let mut cfg = daemon_config(&dir.join("v"), groups);
    std::fs::create_dir_all(&cfg.dir).unwrap();
    cfg.admin_port = free_port();
    if auth {
        let file = dir.join("token");
        std::fs::write(&file, TOKEN).unwrap();
        cfg.admin_auth_token_file = Some(file);
    }
    let admin = cfg.admin_port;
    (Daemon::start(cfg).await.unwrap(), admin)
}

/// `POST path` with `body`; `headers` end with `\r\n` each.
fn post(admin: u16, path: &str, headers: &str, body: &str) -> (u16, Value) {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (code, text) = http(admin, &request).unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn authorized() -> String {
    format!("Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n")
}

fn plans(admin: u16) -> Vec<Value> {
    let request = format!(
        "GET /api/v1/plans HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    );
    let (code, text) = http(admin, &request).unwrap();
    assert_eq!(code, 200, "{text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["plans"].as_array().unwrap().clone()
}

/// Waits until plan `id` has finished; returns its report.
fn finished(admin: u16, id: u64, limit: Duration) -> Value {
    let mut last = Value::Null;
    wait_until(limit, || {
        last = plans(admin)
            .into_iter()
            .find(|p| p["id"] == id)
            .unwrap_or(Value::Null);
        !last["finished_ms"].is_null()
    });
    last
}

/// Every group's replicas known with their run ids.
fn all_known(h: &Handle, names: &[String]) {
    wait_until(Duration::from_secs(20), || {
        let t = h.topology.borrow().clone();
        names.iter().all(|n| {
            t.groups.get(n).is_some_and(|g| {
                g.replicas.len() == 1 && g.replicas.iter().all(|r| !r.run_id.is_empty())
            }) && t.readiness.get(n).is_some_and(|v| v.readiness.ready)
        })
    });
}

fn master_of(h: &Handle, name: &str) -> u16 {
    h.topology.borrow().groups[name].master.port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_over_30_groups_under_writes_switches_each_and_loses_nothing() {
    let bin = valkey_server();
    let tmp = TempDir::new("plan30");
    let pairs: Vec<(Server, Server)> = (0..30).map(|_| pair(&bin, &tmp.0, 100)).collect();
    let names: Vec<String> = (0..30).map(|i| format!("g{i:02}")).collect();
    let groups = names
        .iter()
        .zip(&pairs)
        .map(|(n, (m, _))| group(n, m.port))
        .collect();
    let (d, admin) = daemon(&tmp.0, groups, true).await;
    let h = d.handle.clone();
    let n2 = names.clone();
    let report = tokio::task::spawn_blocking(move || {
        all_known(&h, &n2);
        let writers: Vec<Writer> = n2
            .iter()
            .map(|n| {
                let (h, n) = (h.clone(), n.clone());
                Writer::start(Duration::from_millis(5), move || {
                    h.topology.borrow().groups.get(&n).map(|g| g.master.port)
                })
            })
            .collect();
        let before: Vec<u16> = n2.iter().map(|n| master_of(&h, n)).collect();
        wait_until(Duration::from_secs(10), || {
            writers
                .iter()
                .zip(&before)
                .all(|(w, p)| w.acked_on(*p) > 20)
        });
        let body = r#"{"match": ["g*"], "concurrency": 3}"#;
        let (code, made) = post(admin, "/api/v1/plans", &authorized(), body);
        assert_eq!(code, 201, "{made}");
        assert_eq!(made["counts"]["waiting"], 30, "{made}");
        let id = made["id"].as_u64().unwrap();
        let report = finished(admin, id, Duration::from_secs(120));
        // Writes go on a little on every new master.
        let after: Vec<u16> = n2.iter().map(|n| master_of(&h, n)).collect();
        wait_until(Duration::from_secs(10), || {
            writers.iter().zip(&after).all(|(w, p)| w.acked_on(*p) > 20)
        });
        let mut per_group = Vec::new();
        for ((w, name), (old, new)) in writers.into_iter().zip(&n2).zip(before.iter().zip(&after)) {
            assert_ne!(old, new, "{name} kept its master");
            let acked = w.stop_timed();
            let plain: Vec<(u64, u16)> = acked.iter().map(|(i, p, _)| (*i, *p)).collect();
            assert!(plain.len() > 40, "{name}: too few writes: {}", plain.len());
            assert_eq!(
                lost_writes(&plain, *new),
                0,
                "{name}: acknowledged writes lost"
            );
            per_group.push((stalls(&acked), name.clone()));
        }
        per_group.sort();
        let ms = |d: Duration| d.as_millis();
        let mut longest: Vec<u128> = per_group.iter().map(|(s, _)| ms(s.1)).collect();
        longest.sort();
        eprintln!(
            "plan over 30 groups: stall at the switchover median {} ms, max {} ms ({}); \
             longest gap of the run median {} ms, max {} ms; per group took_ms: {:?}",
            ms(per_group[15].0.0),
            ms(per_group[29].0.0),
            per_group[29].1,
            longest[15],
            longest[29],
            report["groups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["took_ms"].as_u64().unwrap_or(0))
                .collect::<Vec<_>>()
        );
        report
    })
    .await
    .unwrap();
    assert_eq!(report["state"], "completed", "{report}");
    assert_eq!(report["counts"]["done"], 30, "{report}");
    assert!(report["stopped"].is_null(), "{report}");
    d.stop().await.unwrap();
    drop(pairs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_stops_at_a_group_with_no_ready_replica_and_spares_the_rest() {
    let bin = valkey_server();
    let tmp = TempDir::new("plan-stop");
    let a = pair(&bin, &tmp.0, 100);
    let b = pair(&bin, &tmp.0, 0);
    let c = pair(&bin, &tmp.0, 100);
    let groups = vec![
        group("a", a.0.port),
        group("b", b.0.port),
        group("c", c.0.port),
    ];
    let (d, admin) = daemon(&tmp.0, groups, true).await;
    let h = d.handle.clone();
    let (ca, cb, cc) = (a.0.port, b.0.port, c.0.port);
    let report = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(20), || {
            let t = h.topology.borrow().clone();
            ["a", "b", "c"].iter().all(|n| {
                t.groups[*n].replicas.iter().all(|r| !r.run_id.is_empty())
                    && t.groups[*n].replicas.len() == 1
            }) && t.readiness["a"].readiness.ready
                && t.readiness["c"].readiness.ready
        });
        let body = r#"{"groups": ["a", "b", "c"]}"#;
        let (code, made) = post(admin, "/api/v1/plans", &authorized(), body);
        assert_eq!(code, 201, "{made}");
        let report = finished(admin, made["id"].as_u64().unwrap(), Duration::from_secs(60));
        assert_ne!(master_of(&h, "a"), ca, "a was switched over");
        assert_eq!(master_of(&h, "b"), cb, "b was not");
        assert_eq!(master_of(&h, "c"), cc, "c was left untouched");
        report
    })
    .await
    .unwrap();
    assert_eq!(report["state"], "failed", "{report}");
    assert_eq!(report["stopped"]["group"], "b", "{report}");
    let why = report["stopped"]["why"].as_str().unwrap();
    assert!(why == "not_ready" || why == "no_replica", "{report}");
    let describe = report["stopped"]["describe"].as_str().unwrap();
    assert!(describe.contains("replica"), "{describe}");
    let steps: Vec<&str> = report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["done", "failed", "waiting"], "{report}");
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_credentialed_json_writes_are_taken_and_a_plan_can_be_cancelled() {
    let bin = valkey_server();
    let tmp = TempDir::new("plan-auth");
    let a = pair(&bin, &tmp.0, 100);
    // Open: no credentials configured, no write taken.
    let (d, admin) = daemon(&tmp.0.join("open"), vec![group("a", a.0.port)], false).await;
    let json = "Content-Type: application/json\r\n";
    let (code, body) = tokio::task::spawn_blocking(move || {
        post(admin, "/api/v1/plans", json, r#"{"groups": ["a"]}"#)
    })
    .await
    .unwrap();
    assert_eq!(code, 403, "{body}");
    d.stop().await.unwrap();

    let (d, admin) = daemon(&tmp.0, vec![group("a", a.0.port)], true).await;
    let pa = a.0.port;
    tokio::task::spawn_blocking(move || {
        let tomorrow = std::process::Command::new("date")
            .args(["-u", "-d", "+1 day", "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .unwrap();
        let tomorrow = String::from_utf8(tomorrow.stdout).unwrap();
        let plan = &format!(r#"{{"groups": ["a"], "start": "{}"}}"#, tomorrow.trim());
        let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
        assert_eq!(post(admin, "/api/v1/plans", json, plan).0, 401);
        assert_eq!(post(admin, "/api/v1/plans", &bearer, plan).0, 415);
        let form = format!("{bearer}Content-Type: application/x-www-form-urlencoded\r\n");
        assert_eq!(post(admin, "/api/v1/plans", &form, plan).0, 415);
        for bad in [
            "{",
            r#"{"groups": []}"#,
            r#"{"groups": ["nope"]}"#,
            r#"{"groups": ["a"], "concurrency": 0}"#,
            r#"{"groups": ["a"], "start": "tomorrow"}"#,
            r#"{"groups": ["a"], "end": "2000-01-01T00:00:00Z"}"#,
            r#"{"groups": ["a"], "start": "2099-01-01T00:00:00Z"}"#,
            r#"{"groups": ["a"], "unknown": 1}"#,
            r#"{"selector": "tier in (cache"}"#,
        ] {
            let (code, answer) = post(admin, "/api/v1/plans", &authorized(), bad);
            assert_eq!(code, 400, "{bad}: {answer}");
            assert!(answer["error"].is_string(), "{bad}: {answer}");
        }
        // Scheduled far ahead: it waits, a second one is refused, a
        // cancel ends it with nothing done.
        let (code, made) = post(admin, "/api/v1/plans", &authorized(), plan);
        assert_eq!(code, 201, "{made}");
        assert_eq!(made["state"], "scheduled", "{made}");
        let id = made["id"].as_u64().unwrap();
        let (code, busy) = post(admin, "/api/v1/plans", &authorized(), plan);
        assert_eq!(code, 409, "{busy}");
        let cancel = format!("/api/v1/plans/{id}/cancel");
        let (code, cancelled) = post(admin, &cancel, &authorized(), "{}");
        assert_eq!(code, 200, "{cancelled}");
        let report = finished(admin, id, Duration::from_secs(10));
        assert_eq!(report["state"], "cancelled", "{report}");
        assert_eq!(report["groups"][0]["step"], "waiting", "{report}");
        assert_eq!(
            post(admin, "/api/v1/plans/99/cancel", &authorized(), "{}").0,
            404
        );
        // Pause and resume through the API too.
        let (code, paused) = post(admin, "/api/v1/pause", &authorized(), r#"{"match": ["*"]}"#);
        assert_eq!(
            (code, &paused["groups"][0]),
            (200, &Value::from("a")),
            "{paused}"
        );
        let (code, _) = post(
            admin,
            "/api/v1/resume",
            &authorized(),
            r#"{"groups": ["a"]}"#,
        );
        assert_eq!(code, 200);
        // A GET on a write path is not a write; a POST elsewhere is a 405.
        let get = format!(
            "POST /metrics HTTP/1.1\r\nHost: x\r\n{}Content-Length: 0\r\n\r\n",
            authorized()
        );
        assert_eq!(http(admin, &get).unwrap().0, 405);
    })
    .await
    .unwrap();
    assert_eq!(master_of(&d.handle, "a"), pa, "nothing was switched over");
    d.stop().await.unwrap();
}
