//! The link's timers under tokio's paused clock: reconnect pacing, and
//! the fast retries after a connection that answered breaks. Against a
//! real valkey-server: `real` (hellos, the pub/sub link, names).

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::*;

pub(crate) mod kit;
mod real;

#[tokio::test(start_paused = true)]
async fn backoff_is_fast_after_an_answered_connection_then_settles_near_a_second() {
    let mut b = Backoff::new(7);
    b.answered(Instant::now());
    let mut fast = Vec::new();
    for _ in 0..6 {
        let d = b.next(Instant::now());
        fast.push(d);
        tokio::time::advance(d).await;
    }
    // Within the fast window: 10 ms doubling, capped at 100 ms (+20 %).
    assert!(fast[0] <= Duration::from_millis(12), "{fast:?}");
    assert!(
        fast.iter().all(|d| *d <= Duration::from_millis(120)),
        "{fast:?}"
    );
    tokio::time::advance(FAST_RETRY_WINDOW).await;
    let mut late = Vec::new();
    for _ in 0..10 {
        let d = b.next(Instant::now());
        late.push(d);
        tokio::time::advance(d).await;
    }
    // Past it: up to a second, jittered, never beyond a second + 20 %.
    assert!(
        late.iter().all(|d| *d <= Duration::from_millis(1200)),
        "{late:?}"
    );
    assert!(
        late[late.len() - 1] >= Duration::from_millis(800),
        "{late:?}"
    );
    // Jittered: not all equal.
    assert!(late.windows(2).any(|w| w[0] != w[1]), "{late:?}");
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    l.local_addr().map(|a| a.port()).unwrap_or(1)
}

#[tokio::test(start_paused = true)]
async fn a_refusing_instance_is_tried_about_once_a_second() {
    let (_urgent_tx, urgent) = watch::channel(false);
    let spec = LinkSpec {
        group: "g".into(),
        addr: Addr::new("127.0.0.1", closed_port()),
        down_after: Duration::from_secs(30),
        auth_user: None,
        auth_pass: None,
        renamed: Vec::new().into(),
        urgent,
        timers: watch::channel(crate::core::Timers::default()).1,
        myid: "0".repeat(40),
        tls: None,
        texts: Default::default(),
        resolved: Default::default(),
    };
    let (jobs_tx, jobs) = mpsc::unbounded_channel();
    let (inputs_tx, mut inputs) = mpsc::channel(INPUT_QUEUE);
    let link = tokio::spawn(run(spec, jobs, inputs_tx));
    let start = Instant::now();
    let mut attempts = 0u32;
    while Instant::now().duration_since(start) < Duration::from_secs(60) {
        match inputs.recv().await {
            Some(Input::LinkDown { failure, .. }) => {
                assert_eq!(failure, LinkFailure::Refused);
                attempts += 1;
            }
            Some(_) => {}
            None => break,
        }
    }
    drop(jobs_tx);
    link.abort();
    // Sentinel's pace is one attempt a second; 60 virtual seconds allow
    // the first few quick ones and then about one a second.
    assert!((50..=75).contains(&attempts), "{attempts} attempts in 60 s");
}
