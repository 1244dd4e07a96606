//! The status page in a real browser (headless Chromium through
//! chromedriver) against the daemon binary and real valkey-servers: the
//! page shows the master; a SIGKILL failover reaches it without reload
//! within 1 s of the daemon's API, with the failover's steps on its
//! timeline; killing the daemon turns it stale. Any JavaScript error in
//! the browser console fails the test. A screenshot after the failover
//! is left in the target directory (and, with
//! `VALKYRIE_DOCS_SCREENSHOT=1`, written to docs/status-page.png).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod status;
mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use status::webdriver::{Driver, Session};
use status::*;
use support::*;

/// What the test reads off the page.
const PROBE: &str = r#"
const card = document.querySelector('[data-group="mymaster"]');
const master = card && card.querySelector('tr[data-role="master"]');
const tl = card && card.querySelector('svg.timeline');
return {
  state: document.body.dataset.state,
  stale_banner: !document.getElementById('stale').hidden,
  master: master ? master.dataset.addr : null,
  marker: window.__notReloaded === true,
  outcome: tl ? tl.dataset.outcome : null,
  steps: tl ? Array.from(tl.querySelectorAll('text:not(.muted)')).map(t => t.textContent) : [],
};
"#;

/// Console entries that are JavaScript errors or warnings.
fn script_problems(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["level"] != "INFO" && e["level"] != "DEBUG")
        .collect()
}

#[test]
fn the_page_follows_a_failover_live_and_turns_stale_when_the_daemon_dies() {
    let mut s = setup("status-page", "");
    let driver = Driver::start();
    let browser = Session::new(&driver);
    let url = format!("http://127.0.0.1:{}/", s.admin);
    browser.goto(&url);
    let old = format!("127.0.0.1:{}", s.master.port);

    // 1. The page loads and shows the master.
    wait_until(Duration::from_secs(10), || {
        let p = browser.execute(PROBE);
        p["state"] == "live" && p["master"] == old.as_str()
    });
    browser.execute("window.__notReloaded = true; return null;");

    // 2. A SIGKILL failover while the page is open: the new master and
    //    the failover's steps appear without a reload, within 1 s of the
    //    daemon's own API showing them.
    s.master.kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut api_at, mut page_at) = (None, None);
    let mut new_master = String::new();
    while page_at.is_none() {
        assert!(Instant::now() < deadline, "no failover seen on the page");
        if api_at.is_none()
            && let Some(doc) = groups(s.admin)
        {
            let m = doc["groups"][0]["master"]["addr"]
                .as_str()
                .unwrap()
                .to_string();
            if m != old {
                api_at = Some(Instant::now());
                new_master = m;
            }
        }
        let p = browser.execute(PROBE);
        assert_eq!(p["marker"], true, "the page was reloaded");
        if api_at.is_some() && p["master"] == new_master.as_str() {
            page_at = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let lag = page_at.unwrap() - api_at.unwrap();
    assert!(lag <= Duration::from_secs(1), "the page took {lag:?}");
    let mut last = Value::Null;
    wait_until(Duration::from_secs(10), || {
        last = browser.execute(PROBE);
        last["outcome"] == "done"
    });
    let steps: Vec<&str> = last["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for wanted in [
        "+sdown",
        "+odown",
        "+try-failover",
        "+elected-leader",
        "+selected-slave",
        "+promoted-slave",
        "+switch-master",
        "+failover-end",
    ] {
        assert!(
            steps.contains(&wanted),
            "{wanted} not on the timeline: {steps:?}"
        );
    }
    assert_eq!(last["marker"], true);
    assert_eq!(last["state"], "live");

    // 4. The screenshot after the failover.
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"));
    let artefact = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    std::fs::write(&artefact, &png).unwrap();
    eprintln!("screenshot: {}", artefact.display());
    if std::env::var_os("VALKYRIE_DOCS_SCREENSHOT").is_some() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/status-page.png");
        std::fs::write(docs, &png).unwrap();
    }

    // No JavaScript error so far (the stream's end below may log a
    // network error, which is what the page is meant to handle).
    let console = browser.console();
    assert!(
        script_problems(&console).is_empty(),
        "browser console: {console:#?}"
    );

    // 3. The daemon dies: the page says stale instead of showing the
    //    old data as current.
    s.daemon.kill();
    wait_until(Duration::from_secs(6), || {
        let p = browser.execute(PROBE);
        p["state"] == "stale" && p["stale_banner"] == true
    });
    let console = browser.console();
    let script_errors: Vec<&Value> = script_problems(&console)
        .into_iter()
        .filter(|e| e["source"] != "network")
        .collect();
    assert!(script_errors.is_empty(), "browser console: {console:#?}");
}
