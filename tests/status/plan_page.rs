//! Planned switchovers on the status page, in a real browser (headless
//! Chromium through chromedriver) against the daemon binary and real
//! valkey-servers. A plan is sent with credentials (`POST
//! /api/v1/plans`; the browser first goes to the page with basic auth in
//! its URL) and shows in the plans panel above the cards, live, without
//! reload:
//!
//! - `scheduled` with every group `waiting` before its window opens, then
//!   `completed` with every group `done` and its new master;
//! - `cancelled`, once cancelled before its window;
//! - `running`, its group `switching`, held by a replica that holds its
//!   clients' commands for 3 s (`CLIENT PAUSE 3000 ALL`: the switchover
//!   waits for its INFO), then `completed`;
//! - `failed` at a paused group, with the reason on the panel.
//!
//! Any JavaScript error in the browser console fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::{Duration, Instant};

use crate::common::*;
use crate::webdriver::{Driver, Session};
use guarded::{Guarded, rfc3339_in};
use serde_json::Value;
use support::*;
use valkyrie_protocol::Frame;

#[path = "guarded.rs"]
mod guarded;

/// What the test reads off the plans panel: the newest plan and one
/// entry per group.
const PLAN_PROBE: &str = r#"
const panel = document.getElementById('plans');
const plan = panel.querySelector('.plan.current');
return {
  state: document.body.dataset.state,
  shown: !panel.hidden,
  cards: document.querySelectorAll('article.card').length,
  id: plan ? Number(plan.dataset.plan) : null,
  plan: plan ? plan.dataset.state : null,
  badge: plan ? plan.querySelector('h2 .badge').textContent : null,
  counts: plan ? plan.querySelector('.counts').textContent : null,
  meta: plan ? plan.querySelector('.plan-meta').textContent : null,
  stop: plan && plan.querySelector('.plan-stop') ? plan.querySelector('.plan-stop').textContent : null,
  stop_group: plan && plan.querySelector('.plan-stop') ? plan.querySelector('.plan-stop').dataset.group || null : null,
  groups: plan ? Array.from(plan.querySelectorAll('li[data-step]')).map((li) => ({
    name: li.dataset.group, step: li.dataset.step, to: li.dataset.to || null, text: li.textContent })) : [],
  older: Array.from(panel.querySelectorAll('.older-plans li')).map((li) => ({ id: Number(li.dataset.plan), state: li.dataset.state })),
  marker: window.__notReloaded === true,
};
"#;

/// Records each drawing of the newest plan (its state, then each
/// group's step) in `window.__planDrawn`, a drawing that changed nothing
/// left out.
const PLAN_RECORDER: &str = r#"
window.__planDrawn = [];
new MutationObserver(() => {
  const plan = document.querySelector('#plans .plan.current');
  if (!plan) return;
  const drawn = plan.dataset.state + ' ' + Array.from(plan.querySelectorAll('li[data-step]'))
    .map((li) => li.dataset.group + ':' + li.dataset.step).join(' ');
  const all = window.__planDrawn;
  if (all[all.length - 1] !== drawn) all.push(drawn);
}).observe(document.getElementById('plans'), { childList: true });
return null;
"#;

/// The groups' steps as the page shows them: (name, step).
fn steps(p: &Value) -> Vec<(String, String)> {
    p["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let s = |k: &str| g[k].as_str().unwrap().to_string();
            (s("name"), s("step"))
        })
        .collect()
}

#[test]
fn the_page_shows_a_planned_switchover_from_scheduled_to_completed() {
    let g = Guarded::start("status-page-plan");
    let driver = Driver::start();
    let browser = Session::new(&driver);
    browser.goto(&g.login_url());
    browser.goto(&g.page_url());
    // No plan yet: no panel, both cards.
    wait_until(Duration::from_secs(10), || {
        let p = browser.execute(PLAN_PROBE);
        p["state"] == "live" && p["cards"] == 2 && p["shown"] == false
    });
    browser.execute("window.__notReloaded = true; return null;");
    browser.execute(PLAN_RECORDER);

    // 1. A plan whose window opens in a few seconds: on the page at once,
    //    scheduled, each group waiting, with what was asked.
    let start = rfc3339_in(4);
    let body =
        format!(r#"{{"groups": ["mymaster", "other"], "concurrency": 1, "start": "{start}"}}"#);
    let (code, made) = g.post("/api/v1/plans", &body);
    assert_eq!(code, 201, "{made}");
    assert_eq!(made["state"], "scheduled", "{made}");
    let id = made["id"].as_u64().unwrap();
    let mut p = Value::Null;
    wait_until(Duration::from_secs(3), || {
        p = browser.execute(PLAN_PROBE);
        p["id"] == id
    });
    assert_eq!(p["shown"], true, "{p:#}");
    assert_eq!(p["plan"], "scheduled", "{p:#}");
    assert_eq!(p["badge"], "scheduled", "{p:#}");
    let waiting = |names: &[&str]| -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| (n.to_string(), "waiting".to_string()))
            .collect()
    };
    assert_eq!(steps(&p), waiting(&["mymaster", "other"]), "{p:#}");
    let counts = p["counts"].as_str().unwrap();
    assert!(
        counts.contains("2 groups") && counts.contains("2 waiting"),
        "{p:#}"
    );
    let meta = p["meta"].as_str().unwrap();
    assert!(
        meta.contains("concurrency 1") && meta.contains("groups mymaster, other"),
        "{p:#}"
    );
    let png = browser.screenshot();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::write(dir.join("status-page-plan-scheduled.png"), &png).unwrap();

    // 2. The window opens: the page follows the plan to `completed`,
    //    each group `done` with its new master. `running` (and a group
    //    `switching`) is transient, a few hundred milliseconds: the
    //    recorder notes each drawing of the panel, so a state the page
    //    drew between two probes is seen too; it is printed when seen,
    //    not required (the stream may carry none of it).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        p = browser.execute(PLAN_PROBE);
        assert_eq!(p["marker"], true, "the page was reloaded");
        assert_eq!(p["id"], id, "{p:#}");
        if p["plan"] == "completed" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the plan did not complete on the page: {p:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let drawn = browser.execute("return window.__planDrawn;");
    let drawn: Vec<&str> = drawn
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    eprintln!("the plans panel as drawn: {drawn:#?}");
    // The plan's states in the order drawn, each once: never backwards.
    let order = ["scheduled", "running", "completed"];
    let mut states: Vec<&str> = drawn.iter().map(|d| d.split(' ').next().unwrap()).collect();
    states.dedup();
    let rank = |s: &&str| order.iter().position(|o| o == s);
    assert!(states.iter().all(|s| rank(s).is_some()), "{drawn:#?}");
    assert!(
        states.windows(2).all(|w| rank(&w[0]) < rank(&w[1])),
        "{drawn:#?}"
    );
    assert_eq!(states.first(), Some(&"scheduled"), "{drawn:#?}");
    assert_eq!(states.last(), Some(&"completed"), "{drawn:#?}");
    eprintln!(
        "running seen: {}; a group switching seen: {}",
        states.contains(&"running"),
        drawn.iter().any(|d| d.contains(":switching"))
    );
    assert_eq!(p["badge"], "completed", "{p:#}");
    assert!(p["counts"].as_str().unwrap().contains("2 done"), "{p:#}");
    let doc = g.groups().unwrap();
    for (i, shown) in p["groups"].as_array().unwrap().iter().enumerate() {
        let group = &doc["groups"][i];
        let old = format!("127.0.0.1:{}", g.masters[i]);
        let new = group["master"]["addr"].as_str().unwrap();
        assert_eq!(shown["name"], group["name"], "{p:#}");
        assert_eq!(shown["step"], "done", "{p:#}");
        assert_ne!(new, old, "{} kept its master", group["name"]);
        assert_eq!(shown["to"], new, "{p:#}");
        let text = shown["text"].as_str().unwrap();
        assert!(text.contains(&format!("{old} → {new}")), "{text}");
        assert_eq!(doc["plans"][0]["groups"][i]["to"], new, "{doc:#}");
    }
    let png = browser.screenshot();
    std::fs::write(dir.join("status-page-plan.png"), &png).unwrap();

    let console = browser.console();
    assert!(
        script_problems(&console).is_empty(),
        "browser console: {console:#?}"
    );
}

/// Probes the page until `done` holds for the newest plan, for at most
/// `limit`; the last probe.
fn until(browser: &Session, limit: Duration, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let p = browser.execute(PLAN_PROBE);
        assert_eq!(p["marker"], true, "the page was reloaded");
        if done(&p) {
            return p;
        }
        assert!(Instant::now() < deadline, "{what}: not on the page: {p:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_page_shows_a_cancelled_a_running_and_a_failed_plan() {
    let g = Guarded::start("status-page-plan-states");
    let driver = Driver::start();
    let browser = Session::new(&driver);
    browser.goto(&g.login_url());
    browser.goto(&g.page_url());
    wait_until(Duration::from_secs(10), || {
        browser.execute(PLAN_PROBE)["state"] == "live"
    });
    browser.execute("window.__notReloaded = true; return null;");

    // 1. Cancelled before its window opens.
    let body = format!(
        r#"{{"groups": ["mymaster"], "start": "{}"}}"#,
        rfc3339_in(600)
    );
    let (code, made) = g.post("/api/v1/plans", &body);
    assert_eq!(code, 201, "{made}");
    let cancelled = made["id"].as_u64().unwrap();
    until(
        &browser,
        Duration::from_secs(5),
        "the scheduled plan",
        |p| p["id"] == cancelled && p["plan"] == "scheduled",
    );
    let (code, answer) = g.post(&format!("/api/v1/plans/{cancelled}/cancel"), "{}");
    assert_eq!(code, 200, "{answer}");
    let p = until(
        &browser,
        Duration::from_secs(5),
        "the cancelled plan",
        |p| p["id"] == cancelled && p["plan"] == "cancelled",
    );
    assert_eq!(p["badge"], "cancelled", "{p:#}");
    assert_eq!(steps(&p), [("mymaster".into(), "waiting".into())], "{p:#}");

    // 2. Running: `other`'s only replica holds every client's command for
    //    3 s, so the switchover waits for its INFO before anything is
    //    paused (its replication goes on); then it goes through.
    let old = g.masters[1];
    let replica = g.servers[4].port;
    let hold = ["CLIENT", "PAUSE", "3000", "ALL"];
    assert_eq!(call(replica, &hold), Frame::Simple("OK".into()));
    let (code, made) = g.post("/api/v1/plans", r#"{"groups": ["other"]}"#);
    assert_eq!(code, 201, "{made}");
    let running = made["id"].as_u64().unwrap();
    let p = until(&browser, Duration::from_secs(8), "the running plan", |p| {
        p["id"] == running && p["plan"] == "running"
    });
    assert_eq!(p["badge"], "running", "{p:#}");
    assert_eq!(steps(&p), [("other".into(), "switching".into())], "{p:#}");
    assert!(
        p["counts"].as_str().unwrap().contains("1 switching"),
        "{p:#}"
    );
    let shown = p["groups"][0]["text"].as_str().unwrap();
    assert!(shown.contains(&format!("from 127.0.0.1:{old}")), "{shown}");
    // The older plan is listed under it.
    assert_eq!(p["older"][0]["id"], cancelled, "{p:#}");
    assert_eq!(p["older"][0]["state"], "cancelled", "{p:#}");
    let p = until(
        &browser,
        Duration::from_secs(30),
        "the plan completed",
        |p| p["id"] == running && p["plan"] == "completed",
    );
    assert_eq!(steps(&p), [("other".into(), "done".into())], "{p:#}");

    // 3. Failed: a paused group fails its pre-flight; the panel says where
    //    and why.
    let (code, answer) = g.post("/api/v1/pause", r#"{"groups": ["mymaster"]}"#);
    assert_eq!(code, 200, "{answer}");
    let (code, made) = g.post("/api/v1/plans", r#"{"groups": ["mymaster", "other"]}"#);
    assert_eq!(code, 201, "{made}");
    let failed = made["id"].as_u64().unwrap();
    let p = until(&browser, Duration::from_secs(10), "the failed plan", |p| {
        p["id"] == failed && p["plan"] == "failed"
    });
    assert_eq!(p["badge"], "failed", "{p:#}");
    assert_eq!(
        steps(&p),
        [
            ("mymaster".into(), "failed".into()),
            ("other".into(), "waiting".into())
        ],
        "{p:#}"
    );
    assert_eq!(p["stop_group"], "mymaster", "{p:#}");
    let stop = p["stop"].as_str().unwrap();
    assert!(stop.contains("paused"), "{stop}");
    let why = p["groups"][0]["text"].as_str().unwrap();
    assert!(why.contains("paused"), "{why}");

    let console = browser.console();
    assert!(
        script_problems(&console).is_empty(),
        "browser console: {console:#?}"
    );
}
