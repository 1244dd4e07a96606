//! The admin port's status API against the daemon binary and real
//! valkey-servers: `/api/v1/groups` compared as exact JSON (what moves
//! by itself — offsets, lags, times, versions — masked), before and
//! after a SIGKILL failover; `/api/v1/events?since=` with the failover's
//! events in order; `/api/v1/stream` opening with the same document.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;
use serde_json::{Value, json};
use support::*;

fn replica(port: u16, follows: u16) -> Value {
    json!({
        "addr": format!("127.0.0.1:{port}"),
        "role": "replica",
        "state": "up",
        "link": "up",
        "link_down_ms": "*",
        "follows": format!("127.0.0.1:{follows}"),
        "offset": "*",
        "lag": "*",
        "priority": 100,
        "retiring": false,
    })
}

#[test]
fn groups_events_and_stream_through_a_failover() {
    let mut s = setup("status-api", "");
    let (m, mut ports) = (s.master.port, vec![s.r1.port, s.r2.port]);
    ports.sort_unstable();
    let before = steady(groups(s.admin).unwrap());
    assert_eq!(
        before,
        json!({
            "tilt": false,
            "plans": [],
            "groups": [{
                "name": "mymaster",
                "version": "*",
                "epoch": 0,
                "master": {
                    "addr": format!("127.0.0.1:{m}"),
                    "state": "up",
                    "link": "up",
                    "offset": "*",
                    "reports_master": true,
                },
                "flags": ["master"],
                "labels": {},
                "quorum": 1,
                "down_after_ms": 1000,
                "failover_timeout_ms": 10000,
                "failover": null,
                "sentinels": 0,
                "replicas": [replica(ports[0], m), replica(ports[1], m)],
                "epochs": [{"epoch": 0, "master": format!("127.0.0.1:{m}"), "time_ms": "*"}],
                "failovers": [],
                "at_risk": [],
                "write_fence": null,
                "readiness": "*",
            }],
        }),
        "{before:#}"
    );
    let replicas: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let ready = ready_verdict(s.admin, &replicas);
    assert_eq!(ready["trigger"], "odown");
    assert_eq!(ready["fence"], json!({"state": "off"}));
    assert_eq!(ready["quorum"], Value::Null);
    assert_eq!(ready["witnesses"], Value::Null);
    let to = ready["would_promote"]["addr"].as_str().unwrap();
    assert_eq!(ready["switchover"], json!({"ready": true, "to": to}));
    assert_eq!(
        steady(ready["replicas"].clone()),
        json!([
            {"addr": to, "eligible": true, "reason": null},
            {"addr": replicas.iter().find(|a| *a != to).unwrap(), "eligible": true, "reason": null},
        ])
    );

    // The stream opens with the same document.
    let mut stream = TcpStream::connect(("127.0.0.1", s.admin)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut lines = BufReader::new(stream.try_clone().unwrap()).lines();
    let mut next_message = move || -> (String, String) {
        let (mut event, mut data) = (String::new(), String::new());
        loop {
            let line = lines.next().unwrap().unwrap();
            if let Some(e) = line.strip_prefix("event: ") {
                event = e.to_string();
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            } else if line.is_empty() && !event.is_empty() {
                return (event, data);
            }
        }
    };
    let (kind, first) = loop {
        let (kind, data) = next_message();
        if kind == "groups" {
            break (kind, data);
        }
    };
    assert_eq!(kind, "groups");
    assert_eq!(steady(serde_json::from_str(&first).unwrap()), before);

    let (_, events) = http_get(s.admin, "/api/v1/events").unwrap();
    let since = serde_json::from_str::<Value>(&events).unwrap()["next"]
        .as_u64()
        .unwrap();

    // SIGKILL the master: a failover to one of the replicas.
    s.master.kill();
    wait_until(Duration::from_secs(30), || {
        groups(s.admin).is_some_and(|d| {
            let g = &d["groups"][0];
            g["epoch"] == 1
                && g["failovers"][0]["outcome"] == "done"
                && g["replicas"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r["link"] == "up"))
        })
    });
    let after = groups(s.admin).unwrap();
    let g = &after["groups"][0];
    let new_master = g["master"]["addr"].as_str().unwrap().to_string();
    assert!(ports.iter().any(|p| new_master == format!("127.0.0.1:{p}")));
    let steps: Vec<&str> = g["failovers"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["channel"].as_str().unwrap())
        .collect();
    let wanted = [
        "+sdown",
        "+odown",
        "+try-failover",
        "+elected-leader",
        "+selected-slave",
        "+failover-state-send-slaveof-noone",
        "+promoted-slave",
        "+switch-master",
        "+failover-end",
    ];
    let mut rest = steps.iter();
    for w in wanted {
        assert!(
            rest.any(|s| *s == w),
            "{w} missing or out of order in {steps:?}"
        );
    }
    assert_eq!(
        steady(g["epochs"].clone()),
        json!([
            {"epoch": 0, "master": format!("127.0.0.1:{m}"), "time_ms": "*"},
            {"epoch": 1, "master": new_master, "time_ms": "*"},
        ])
    );
    // Ready again, towards the one replica left; the killed master is
    // down (and to be demoted when it returns).
    let left: Vec<String> = replicas.into_iter().filter(|a| *a != new_master).collect();
    let ready = ready_verdict(s.admin, &left);
    let old = format!("127.0.0.1:{m}");
    assert!(
        ready["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["addr"] == old.as_str()
                && r["eligible"] == false
                && (r["reason"] == "down" || r["reason"] == "demoted")),
        "{ready:#}"
    );

    // The killed master's final offset is unknown: a lower bound.
    let risk = &g["at_risk"][0];
    assert_eq!(risk["epoch"], 1);
    assert_eq!(risk["old_master"], format!("127.0.0.1:{m}"));
    assert_eq!(risk["promoted"], new_master);
    assert_eq!(risk["complete"], false);
    assert_eq!(risk["fenced"], "not fenced");
    assert_eq!(
        risk["bytes_at_risk"].as_u64().unwrap(),
        risk["old_offset"]
            .as_u64()
            .unwrap()
            .saturating_sub(risk["promoted_offset"].as_u64().unwrap())
    );

    // The events since the mark: the same channels, numbered upward.
    let (code, body) = http_get(s.admin, &format!("/api/v1/events?since={since}")).unwrap();
    assert_eq!(code, 200);
    let events: Value = serde_json::from_str(&body).unwrap();
    let list = events["events"].as_array().unwrap();
    assert!(list.iter().all(|e| e["id"].as_u64().unwrap() > since));
    let switch = list
        .iter()
        .find(|e| e["channel"] == "+switch-master")
        .unwrap();
    let (host, port) = new_master.split_once(':').unwrap();
    assert_eq!(
        steady(switch.clone()),
        json!({
            "id": switch["id"],
            "time_ms": "*",
            "channel": "+switch-master",
            "group": "mymaster",
            "payload": format!("mymaster 127.0.0.1 {m} {host} {port}"),
        })
    );
    let last = events["next"].as_u64().unwrap();
    let (_, none) = http_get(s.admin, &format!("/api/v1/events?since={last}")).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&none).unwrap()["events"],
        json!([])
    );

    // The stream carried the failover too.
    let mut seen = Vec::new();
    while !seen.iter().any(|c: &String| c == "+failover-end") {
        let (kind, data) = next_message();
        if kind == "event" {
            let e: Value = serde_json::from_str(&data).unwrap();
            seen.push(e["channel"].as_str().unwrap().to_string());
        }
    }
    assert!(seen.iter().any(|c| c == "+switch-master"), "{seen:?}");
}

/// Waits, bounded, for the group's verdict to be ready and to promote
/// one of `candidates`; returns it.
fn ready_verdict(admin: u16, candidates: &[String]) -> Value {
    let mut verdict = Value::Null;
    wait_until(Duration::from_secs(20), || {
        verdict = groups(admin).map_or(Value::Null, |d| d["groups"][0]["readiness"].clone());
        verdict["ready"] == true
            && candidates
                .iter()
                .any(|c| verdict["would_promote"]["addr"] == c.as_str())
    });
    assert_eq!(verdict["reason"], "ready");
    assert_eq!(verdict["holds"], json!([]));
    let to = verdict["would_promote"]["addr"].as_str().unwrap();
    let text = verdict["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("ready: would promote {to} (lag ")),
        "{text}"
    );
    assert!(
        verdict["would_promote"]["lag_bytes"].is_u64(),
        "{verdict:#}"
    );
    verdict
}

#[test]
fn a_bad_since_is_refused_and_the_page_holds_no_secret() {
    let s = setup(
        "status-secret",
        "sentinel auth-pass mymaster Sup3rSecretPass\nrequirepass An0therSecret\n",
    );
    for path in ["/", "/api/v1/groups", "/api/v1/events", "/app.js"] {
        let (code, body) = http_get(s.admin, path).unwrap();
        assert_eq!(code, 200, "{path}");
        assert!(!body.contains("Sup3rSecretPass") && !body.contains("An0therSecret"));
    }
    let (code, _) = http_get(s.admin, "/api/v1/events?since=abc").unwrap();
    assert_eq!(code, 400);
}

#[test]
fn auth_guards_the_page_and_api_but_not_the_probes_and_admin_bind_moves_the_port() {
    let bin = valkey_server();
    let tmp = TempDir::new("status-auth");
    let server = Server::start(&bin, &tmp.0, free_port(), None);
    let (sentinel, admin) = (free_port(), free_port());
    let token = tmp.0.join("token");
    std::fs::write(&token, "s3cr3t-t0ken\n").unwrap();
    let basic = tmp.0.join("basic");
    std::fs::write(&basic, "ops:pa55word\n").unwrap();
    let conf = tmp.0.join("valkyrie.conf");
    std::fs::write(
        &conf,
        format!(
            "port {sentinel}\nbind 127.0.0.1\ndir {dir}\nadmin-port {admin}\n\
             admin-bind 127.0.0.2\n\
             admin-auth-token-file {token}\nadmin-auth-basic-file {basic}\n\
             sentinel monitor mymaster 127.0.0.1 {m} 1\n",
            dir = tmp.0.display(),
            token = token.display(),
            basic = basic.display(),
            m = server.port,
        ),
    )
    .unwrap();
    let log = tmp.0.join("valkyrie.log");
    let _daemon = Daemon::start(&conf, &log);
    let get = |path: &str, auth: &str| -> Result<(u16, String), String> {
        let mut s = TcpStream::connect(("127.0.0.2", admin)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let mut out = String::new();
        std::io::Read::read_to_string(&mut s, &mut out).map_err(|e| e.to_string())?;
        let code = out
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or("no status")?;
        Ok((code, out))
    };
    wait_until(Duration::from_secs(10), || {
        get("/healthz", "").is_ok_and(|(c, _)| c == 200)
    });
    // Only on the admin-bind address.
    assert!(TcpStream::connect(("127.0.0.1", admin)).is_err());
    for path in [
        "/",
        "/app.js",
        "/api/v1/groups",
        "/api/v1/events",
        "/api/v1/stream",
    ] {
        let (code, out) = get(path, "").unwrap();
        assert_eq!(code, 401, "{path}");
        assert!(
            out.to_ascii_lowercase()
                .contains("www-authenticate: basic realm=\"valkyrie\""),
            "{out}"
        );
        for wrong in [
            "Authorization: Bearer s3cr3t-t0ke\r\n",
            "Authorization: Bearer s3cr3t-t0ken2\r\n",
            "Authorization: Basic s3cr3t-t0ken\r\n",
        ] {
            assert_eq!(get(path, wrong).unwrap().0, 401, "{path} {wrong}");
        }
    }
    let basic_ok = format!(
        "Authorization: Basic {}\r\n",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "ops:pa55word")
    );
    let basic_bad = format!(
        "Authorization: Basic {}\r\n",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "ops:pa55wor")
    );
    assert_eq!(
        get("/api/v1/groups", "Authorization: Bearer s3cr3t-t0ken\r\n")
            .unwrap()
            .0,
        200
    );
    assert_eq!(get("/api/v1/groups", &basic_ok).unwrap().0, 200);
    assert_eq!(get("/", &basic_ok).unwrap().0, 200);
    assert_eq!(get("/api/v1/groups", &basic_bad).unwrap().0, 401);
    // The probes stay open.
    for path in ["/healthz", "/metrics"] {
        assert_eq!(get(path, "").unwrap().0, 200, "{path}");
    }
    // The credentials never reach the log.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("s3cr3t-t0ken") && !logged.contains("pa55word"));
}
