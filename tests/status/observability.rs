//! What an operator sees, checked against the daemon binary run as a
//! process and real valkey-server instances: `/readyz` holds until every
//! configured instance was probed once, `/metrics` series move with what
//! happens (a failover increments the counter and sets the new epoch;
//! connections, commands, subscribers and parse errors are counted), and
//! JSON logs parse as JSON, carry group/epoch/instance on every failover
//! step, and never contain a password from the configuration.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;
use valkyrie_protocol::Frame;

/// The daemon process, killed by PID on drop.
struct Daemon(Child);

impl Daemon {
    fn start(conf: &Path, log: Option<&Path>, extra: &[&str]) -> Daemon {
        let stderr = match log {
            Some(p) => Stdio::from(std::fs::File::create(p).unwrap()),
            None => Stdio::null(),
        };
        let child = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .arg(conf)
            .args(["--index-port", "0"])
            .args(extra)
            .env_remove("VALKYRIE_LOG")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Daemon(child)
    }

    /// SIGTERM (a clean shutdown flushes nothing we rely on, but it is
    /// what a service manager sends), then reap.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

use support::http::http_get;

/// One sample of the Prometheus text format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

fn parse_metrics(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let rest = rest.strip_suffix('}').unwrap();
                let labels = rest
                    .split("\",")
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once("=\"").unwrap();
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (n.to_string(), labels)
            }
            None => (series.to_string(), Vec::new()),
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    out
}

fn scrape(port: u16) -> Vec<Sample> {
    let (code, body) = http_get(port, "/metrics").unwrap();
    assert_eq!(code, 200);
    parse_metrics(&body)
}

/// The value of the series `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        })
        .map(|s| s.value)
}

#[test]
fn readiness_waits_for_the_first_probe_round() {
    let bin = valkey_server();
    let tmp = TempDir::new("obs-ready");
    let live = Server::start(&bin, &tmp.0, free_port(), None);
    // A listener that never accepts: connecting works (the kernel
    // completes the handshake) but nothing ever answers, so that link's
    // first probe has no outcome until the reply timeout — half of
    // down-after, at most 5 s — or until the listener goes away.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hung_port = hung.local_addr().unwrap().port();
    let (port, admin) = (free_port(), free_port());
    let conf = tmp.0.join("valkyrie.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\nadmin-port {admin}\n\
             sentinel monitor live 127.0.0.1 {live} 1\n\
             sentinel monitor hung 127.0.0.1 {hung_port} 1\n\
             sentinel down-after-milliseconds hung 60000\n",
            dir = tmp.0.display(),
            live = live.port,
        ),
    )
    .unwrap();
    let daemon = Daemon::start(&conf, None, &[]);

    // Alive at once; not ready while the hung instance has no outcome.
    wait_until(Duration::from_secs(10), || {
        http_get(admin, "/healthz").is_ok_and(|(c, _)| c == 200)
    });
    let (code, body) = http_get(admin, "/readyz").unwrap();
    assert_eq!(code, 503, "{body}");
    let m = scrape(admin);
    assert_eq!(value(&m, "valkyrie_ready", &[]), Some(0.0));
    assert_eq!(value(&m, "valkyrie_groups_monitored", &[]), Some(2.0));

    // The hung instance's listener goes away: its link fails, the first
    // round is complete.
    drop(hung);
    wait_until(Duration::from_secs(15), || {
        http_get(admin, "/readyz").is_ok_and(|(c, _)| c == 200)
    });
    let live_addr = format!("127.0.0.1:{}", live.port);
    let hung_addr = format!("127.0.0.1:{hung_port}");
    // Gauges are refreshed every 100 ms.
    wait_until(Duration::from_secs(5), || {
        let m = scrape(admin);
        value(&m, "valkyrie_ready", &[]) == Some(1.0)
            && value(
                &m,
                "valkyrie_instance_link_up",
                &[("group", "hung"), ("instance", &hung_addr)],
            ) == Some(0.0)
            && value(
                &m,
                "valkyrie_instance_link_up",
                &[("group", "live"), ("instance", &live_addr)],
            ) == Some(1.0)
            && value(
                &m,
                "valkyrie_instance_role",
                &[
                    ("group", "live"),
                    ("instance", &live_addr),
                    ("role", "master"),
                ],
            ) == Some(1.0)
            && value(
                &m,
                "valkyrie_ping_rtt_seconds_count",
                &[("group", "live"), ("instance", &live_addr)],
            )
            .is_some_and(|n| n >= 1.0)
    });
    // Readiness is a latch: it stays once released, whatever the links do.
    assert_eq!(http_get(admin, "/readyz").unwrap().0, 200);
    assert_eq!(http_get(admin, "/nowhere").unwrap().0, 404);
    daemon.stop();
}

#[test]
fn failover_moves_the_metrics_and_json_logs_keep_secrets() {
    let bin = valkey_server();
    let tmp = TempDir::new("obs-failover");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let (pm, p1, p2) = (master.port, r1.port, r2.port);
    write_acknowledged(pm, 10, 2);

    // Passwords the daemon holds: the Sentinel port's own, an ACL user's,
    // and the one it sends to the monitored servers (which have none, so
    // they refuse it; the daemon goes on without).
    let requirepass = "req-secret-7f3a91";
    let user_pass = "acl-secret-c04e2b";
    let auth_pass = "auth-secret-9d81e5";
    let wrong = "client-guess-51aa0c";
    let (port, admin) = (free_port(), free_port());
    let conf = tmp.0.join("valkyrie.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\nadmin-port {admin}\nloglevel debug\n\
             requirepass {requirepass}\nuser ops on >{user_pass} +@all allchannels\n\
             sentinel monitor mymaster 127.0.0.1 {pm} 1\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 10000\n\
             sentinel auth-pass mymaster {auth_pass}\n",
            dir = tmp.0.display(),
        ),
    )
    .unwrap();
    let log = tmp.0.join("valkyrie.log");
    let daemon = Daemon::start(&conf, Some(&log), &["--log-format", "json"]);
    wait_until(Duration::from_secs(15), || {
        http_get(admin, "/readyz").is_ok_and(|(c, _)| c == 200)
    });

    // Sentinel-port traffic: a wrong password, a right one, a subscriber,
    // a garbage request.
    let mut sub = Client::connect(port).unwrap();
    assert!(matches!(
        sub.call(&["AUTH", wrong]).unwrap(),
        Frame::Error(_)
    ));
    assert_eq!(
        sub.call(&["AUTH", "ops", user_pass]).unwrap(),
        Frame::simple("OK")
    );
    assert!(matches!(
        sub.call(&["SUBSCRIBE", "+switch-master"]).unwrap(),
        Frame::Array(_)
    ));
    let mut other = Client::connect(port).unwrap();
    assert_eq!(
        other.call(&["AUTH", requirepass]).unwrap(),
        Frame::simple("OK")
    );
    assert!(matches!(
        other.call(&["NOSUCHCOMMAND", "x"]).unwrap(),
        Frame::Error(_)
    ));
    let mut garbage = TcpStream::connect(("127.0.0.1", port)).unwrap();
    garbage.write_all(b"*1\r\n$2000000000\r\n").unwrap();
    let mut sink = Vec::new();
    garbage
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = garbage.read_to_end(&mut sink);
    assert!(sink.starts_with(b"-ERR Protocol error"));

    let before = scrape(admin);
    let g = [("group", "mymaster")];
    assert_eq!(value(&before, "valkyrie_group_epoch", &g), Some(0.0));
    assert_eq!(
        value(&before, "valkyrie_failovers_total", &g),
        None,
        "no failover yet"
    );
    assert_eq!(
        value(&before, "valkyrie_sentinel_pubsub_subscribers", &[]),
        Some(1.0)
    );
    assert!(value(&before, "valkyrie_sentinel_connections", &[]).unwrap() >= 2.0);
    assert_eq!(
        value(
            &before,
            "valkyrie_sentinel_commands_total",
            &[("command", "auth")]
        ),
        Some(3.0)
    );
    assert_eq!(
        value(
            &before,
            "valkyrie_sentinel_commands_total",
            &[("command", "unknown")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &before,
            "valkyrie_parse_errors_total",
            &[("listener", "sentinel"), ("kind", "bulk_length")]
        ),
        Some(1.0)
    );
    assert!(
        !before
            .iter()
            .any(|s| s.labels.iter().any(|(k, _)| k == "peer" || k == "client")),
        "no client addresses as labels"
    );
    wait_until(Duration::from_secs(5), || {
        value(&scrape(admin), "valkyrie_group_healthy_replicas", &g) == Some(2.0)
    });
    // The readiness verdict: one series per reason, 1 on "ready" only,
    // and the candidate's lag known.
    let mut ready = Vec::new();
    wait_until(Duration::from_secs(10), || {
        ready = scrape(admin);
        value(
            &ready,
            "valkyrie_group_ready",
            &[("group", "mymaster"), ("reason", "ready")],
        ) == Some(1.0)
    });
    let reasons: Vec<&Sample> = ready
        .iter()
        .filter(|s| s.name == "valkyrie_group_ready")
        .collect();
    assert_eq!(reasons.len(), valkyrie::core::Reason::LABELS.len());
    assert_eq!(reasons.iter().map(|s| s.value).sum::<f64>(), 1.0);
    assert!(
        value(&ready, "valkyrie_group_candidate_lag_bytes", &g).is_some_and(|l| l >= 0.0),
        "the candidate's lag"
    );

    master.kill();
    let mut after = Vec::new();
    wait_until(Duration::from_secs(30), || {
        after = scrape(admin);
        value(
            &after,
            "valkyrie_failovers_total",
            &[("group", "mymaster"), ("result", "succeeded")],
        ) == Some(1.0)
    });
    // The failover is over: counter, duration, epochs and instance series
    // all moved.
    assert_eq!(value(&after, "valkyrie_group_epoch", &g), Some(1.0));
    assert_eq!(value(&after, "valkyrie_group_config_epoch", &g), Some(1.0));
    assert_eq!(
        value(
            &after,
            "valkyrie_failover_duration_seconds_count",
            &[("group", "mymaster"), ("result", "succeeded")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &after,
            "valkyrie_failovers_total",
            &[("group", "mymaster"), ("result", "aborted")]
        ),
        None
    );
    assert!(
        value(
            &after,
            "valkyrie_sdown_events_total",
            &[("group", "mymaster"), ("role", "master")]
        )
        .is_some_and(|n| n >= 1.0)
    );
    assert_eq!(
        value(
            &after,
            "valkyrie_events_total",
            &[("group", "mymaster"), ("event", "+switch-master")]
        ),
        Some(1.0)
    );
    // Gauges lag the counter by up to one refresh: scrape until one of
    // the replicas shows as master.
    let master_in = |text: &[Sample]| {
        [p1, p2].into_iter().find(|p| {
            value(
                text,
                "valkyrie_instance_role",
                &[("instance", &format!("127.0.0.1:{p}")), ("role", "master")],
            ) == Some(1.0)
        })
    };
    wait_until(Duration::from_secs(5), || {
        after = scrape(admin);
        master_in(&after).is_some()
    });
    let new_master = master_in(&after).expect("a replica reported itself master");
    assert_eq!(
        value(
            &after,
            "valkyrie_instance_link_up",
            &[("instance", &format!("127.0.0.1:{pm}"))]
        ),
        Some(0.0)
    );
    assert_eq!(
        value(&after, "valkyrie_failover_in_progress", &g),
        Some(0.0)
    );
    // The subscriber heard about it.
    match sub.call(&["PING"]) {
        Ok(Frame::Array(items)) => assert_eq!(items[0], Frame::bulk("message")),
        other => panic!("expected the +switch-master message first: {other:?}"),
    }
    drop((sub, other));
    daemon.stop();

    // Every line is a JSON object; no password appears anywhere.
    let text = std::fs::read_to_string(&log).unwrap();
    for secret in [requirepass, user_pass, auth_pass, wrong] {
        assert!(!text.contains(secret), "{secret} leaked into the log");
    }
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() > 10);
    // Every failover step names its group, epoch and instance.
    let steps = [
        "+new-epoch",
        "+try-failover",
        "+vote-for-leader",
        "+selected-slave",
        "+failover-state-send-slaveof-noone",
        "+promoted-slave",
        "+switch-master",
        "+failover-end",
    ];
    for step in steps {
        let line = lines
            .iter()
            .find(|l| l["fields"]["channel"] == step)
            .unwrap_or_else(|| panic!("no log line for {step}"));
        let f = &line["fields"];
        assert_eq!(f["group"], "mymaster", "{line}");
        assert_eq!(f["epoch"], 1, "{line}");
        assert!(
            f["instance"]
                .as_str()
                .is_some_and(|i| i.starts_with("127.0.0.1:")),
            "{line}"
        );
    }
    let switch = lines
        .iter()
        .find(|l| l["fields"]["channel"] == "+switch-master")
        .unwrap();
    assert_eq!(
        switch["fields"]["instance"],
        format!("127.0.0.1:{new_master}")
    );
    let sent = lines
        .iter()
        .find(|l| {
            l["fields"]["message"] == "sending"
                && l["fields"]["command"]
                    .as_str()
                    .is_some_and(|c| c.contains("ReplicaOfNoOne"))
        })
        .expect("the promotion command is logged");
    assert_eq!(sent["fields"]["epoch"], 1);
    assert_eq!(sent["fields"]["group"], "mymaster");
}
