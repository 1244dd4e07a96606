//! Peer links against a real valkey-sentinel: PINGs, questions and votes,
//! hellos, a refused AUTH, a hung peer; the reconnect pace against a
//! closed port under tokio's paused clock; the job queue's coalescing.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use valkyrie_protocol::Frame;

use super::link::{Pending, down_answer, ping_valid, with_jobs};
use super::*;
use crate::config::Secret;
use crate::core::Addr;
use crate::core::{DownAnswer, Input};
use crate::link::INPUT_QUEUE;
use crate::link::client::text;
use crate::link::tests::kit;

/// The bound of a wait whose expiry only means the link is broken.
const WAIT: Duration = Duration::from_secs(10);
/// Added to a bound derived from the link's timers, for timers and
/// scheduling on a loaded machine.
const SLACK: Duration = Duration::from_secs(2);

fn spec(addr: Addr, pass: Option<&str>) -> PeerSpec {
    PeerSpec {
        runid: kit::runid("feed"),
        addr,
        myid: kit::runid("abcdef12"),
        auth_user: None,
        auth_pass: pass.map(Secret::new),
        ping_period: Duration::from_millis(200),
        reply_timeout: Duration::from_secs(2),
        tls: None,
    }
}

type Link = (
    mpsc::UnboundedSender<PeerJob>,
    mpsc::Receiver<Input>,
    tokio::task::JoinHandle<()>,
);

fn start(spec: PeerSpec) -> Link {
    let (jobs_tx, jobs) = mpsc::unbounded_channel();
    let (inputs_tx, inputs) = mpsc::channel(INPUT_QUEUE);
    let task = tokio::spawn(run(spec, jobs, inputs_tx));
    (jobs_tx, inputs, task)
}

async fn next_answer(inputs: &mut mpsc::Receiver<Input>, peer: &str) -> DownAnswer {
    kit::next_input(WAIT, inputs, |i| match i {
        Input::DownReply {
            group,
            runid,
            answer,
        } => {
            assert_eq!(group, "m");
            assert_eq!(runid, peer);
            Some(answer)
        }
        _ => None,
    })
    .await
}

#[tokio::test]
async fn a_real_sentinel_answers_pings_questions_and_votes_and_takes_hellos() {
    let (sentinel, master) = kit::valkey_sentinel("");
    let spec = spec(sentinel.addr(), None);
    let (peer, myid) = (spec.runid.clone(), spec.myid.clone());
    let (jobs, mut inputs, task) = start(spec);
    let valid = kit::next_input(WAIT, &mut inputs, |i| match i {
        Input::PeerPing { runid, valid } if runid == peer => Some(valid),
        _ => None,
    })
    .await;
    assert!(valid, "PONG must count as valid");

    let ask = |epoch, candidate: Option<&str>| PeerJob::Ask {
        group: "m".into(),
        master: master.clone(),
        epoch,
        candidate: candidate.map(str::to_string),
    };
    jobs.send(ask(0, None)).unwrap();
    let answer = next_answer(&mut inputs, &peer).await;
    assert_eq!(answer, DownAnswer::unknown());
    assert!(!answer.down && answer.leader.is_none() && answer.leader_epoch == 0);

    let candidate = kit::runid("c0ffee");
    jobs.send(ask(5, Some(&candidate))).unwrap();
    let answer = next_answer(&mut inputs, &peer).await;
    assert_eq!(answer.leader.as_deref(), Some(candidate.as_str()));
    assert_eq!(answer.leader_epoch, 5);
    assert!(!answer.down);
    // First come, first served: another candidate in the same epoch gets
    // the earlier vote back.
    jobs.send(ask(5, Some(&kit::runid("beef")))).unwrap();
    let answer = next_answer(&mut inputs, &peer).await;
    assert_eq!(answer.leader.as_deref(), Some(candidate.as_str()));

    // A hello about `m` makes us one of the sentinel's peers, at the
    // address the hello gives (the connection's local address).
    let hello = crate::link::HelloJob {
        rest: format!("26999,{myid},5,m,{},{},0", master.host, master.port),
        announce_ip: None,
    };
    jobs.send(PeerJob::Hello(hello)).unwrap();
    let mut admin = kit::client(sentinel.port, None).await;
    let mut seen = Frame::Null;
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        seen = kit::call(&mut admin, &["SENTINEL", "SENTINELS", "m"]).await;
        if format!("{seen:?}").contains(&myid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let shown = format!("{seen:?}");
    assert!(shown.contains(&myid) && shown.contains("26999"), "{shown}");

    let list = text(&kit::call(&mut admin, &["CLIENT", "LIST"]).await).unwrap();
    assert!(list.contains("name=sentinel-abcdef12-cmd "), "{list}");

    drop(jobs);
    timeout(WAIT, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_peer_refusing_auth_answers_pings_but_not_validly() {
    let (sentinel, master) = kit::valkey_sentinel("requirepass x\n");
    let (jobs, mut inputs, task) = start(spec(sentinel.addr(), None));
    let valid = kit::next_input(WAIT, &mut inputs, |i| match i {
        Input::PeerPing { valid, .. } => Some(valid),
        _ => None,
    })
    .await;
    assert!(!valid, "-NOAUTH must not count as valid");
    // Its error replies to questions are no information.
    jobs.send(PeerJob::Ask {
        group: "m".into(),
        master,
        epoch: 0,
        candidate: None,
    })
    .unwrap();
    let mut pings = 0;
    while pings < 5 {
        match timeout(WAIT, inputs.recv()).await.unwrap().unwrap() {
            Input::PeerPing { valid: false, .. } => pings += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    drop(jobs);
    timeout(WAIT, task).await.unwrap().unwrap();

    // With the password: valid.
    let (jobs, mut inputs, task) = start(spec(sentinel.addr(), Some("x")));
    let valid = kit::next_input(WAIT, &mut inputs, |i| match i {
        Input::PeerPing { valid, .. } => Some(valid),
        _ => None,
    })
    .await;
    assert!(valid);
    drop(jobs);
    timeout(WAIT, task).await.unwrap().unwrap();
}

/// A hung peer: a real sentinel stopped with SIGSTOP, for which the
/// kernel still accepts connections while nothing answers.
#[tokio::test]
async fn a_hung_peer_is_a_link_down_and_jobs_closing_ends_the_link_at_once() {
    let (sentinel, master) = kit::valkey_sentinel("");
    let mut s = spec(sentinel.addr(), None);
    s.reply_timeout = Duration::from_millis(500);
    // The link sends its next PING within a ping period of the stop and
    // gives up on it after the reply timeout.
    let bound = s.ping_period + s.reply_timeout + SLACK;
    let (jobs, mut inputs, task) = start(s);
    kit::next_input(WAIT, &mut inputs, |i| {
        matches!(i, Input::PeerPing { valid: true, .. }).then_some(())
    })
    .await;
    sentinel.signal("STOP");
    let stopped = Instant::now();
    kit::next_input(WAIT, &mut inputs, |i| {
        matches!(i, Input::PeerLinkDown { .. }).then_some(())
    })
    .await;
    let down = stopped.elapsed();
    eprintln!("link down {down:?} after the stop");
    assert!(down <= bound, "link down {down:?} after the stop");
    drop(jobs);
    timeout(WAIT, task).await.unwrap().unwrap();

    // Jobs closing ends a link at once, whatever it waits for: a link to
    // the stopped sentinel whose only timers (the connect's and each
    // reply's) are a minute long, stuck on its first command with
    // questions queued. A link that waited for a timer would outlast
    // WAIT by far.
    let mut s = spec(sentinel.addr(), None);
    s.reply_timeout = Duration::from_secs(60);
    let (jobs, inputs, task) = start(s);
    for epoch in 0..1000 {
        let ask = PeerJob::Ask {
            group: "m".into(),
            master: master.clone(),
            epoch,
            candidate: None,
        };
        jobs.send(ask).unwrap();
    }
    // Time to connect and send CLIENT SETNAME (the kernel accepts for a
    // stopped process); still connecting, it would wait for the same
    // minute, so the test holds either way.
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(jobs);
    let closed = Instant::now();
    timeout(WAIT, task).await.unwrap().unwrap();
    eprintln!("link ended {:?} after its jobs closed", closed.elapsed());
    drop(inputs);
    sentinel.signal("CONT");
}

/// Real time: under a paused clock the runtime looks idle while a real
/// connect is in flight and the clock jumps to the connect's timeout, so
/// a loaded machine counted 2 s gaps (35 attempts in a paused minute).
#[tokio::test]
async fn a_closed_port_is_tried_about_once_a_second_and_never_faster() {
    let (jobs, mut inputs, task) = start(spec(Addr::new("127.0.0.1", kit::free_port()), None));
    let mut at = Vec::new();
    while at.len() < 5 {
        match timeout(WAIT, inputs.recv()).await.unwrap() {
            Some(Input::PeerLinkDown { .. }) => at.push(Instant::now()),
            other => panic!("unexpected {other:?}"),
        }
    }
    drop(jobs);
    task.await.unwrap();
    for w in at.windows(2) {
        let gap = w[1] - w[0];
        assert!(gap >= Duration::from_secs(1), "{gap:?}");
    }
    let span = at[4] - at[0];
    assert!(span < Duration::from_secs(6), "5 attempts took {span:?}");
}

#[tokio::test]
async fn waiting_jobs_keep_only_the_newest_question_and_hello_per_group() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    for epoch in 0..1000 {
        for group in ["a", "b"] {
            let ask = PeerJob::Ask {
                group: group.into(),
                master: Addr::new("127.0.0.1", 1),
                epoch,
                candidate: None,
            };
            tx.send(ask).unwrap();
        }
        let hello = crate::link::HelloJob {
            rest: format!("26379,{},{epoch},a,127.0.0.1,1,0", kit::runid("ab")),
            announce_ip: None,
        };
        tx.send(PeerJob::Hello(hello)).unwrap();
    }
    let mut pending = Pending::default();
    let done = with_jobs(
        tokio::time::sleep(Duration::from_millis(100)),
        &mut rx,
        Some(&mut pending),
    )
    .await;
    assert!(done.is_some());
    assert!(rx.is_empty());
    assert_eq!(pending.asks.len(), 2);
    assert!(pending.asks.values().all(|a| a.epoch == 999));
    assert_eq!(pending.hellos.len(), 1);
    assert!(pending.hellos["a"].rest.contains(",999,a,"));
    // Closed: `None`, at once.
    drop(tx);
    let closed = with_jobs(std::future::pending::<()>(), &mut rx, None).await;
    assert!(closed.is_none());
}

#[test]
fn replies_are_read_as_sentinel_reads_them() {
    assert!(ping_valid(&Frame::simple("PONG")));
    assert!(ping_valid(&Frame::error("LOADING loading the dataset")));
    assert!(ping_valid(&Frame::error("MASTERDOWN link down")));
    assert!(!ping_valid(&Frame::error(
        "NOAUTH Authentication required."
    )));
    assert!(!ping_valid(&Frame::Integer(1)));

    let reply = |items| Frame::Array(items);
    let ok = reply(vec![
        Frame::Integer(1),
        Frame::bulk("abc"),
        Frame::Integer(7),
    ]);
    assert_eq!(
        down_answer(&ok),
        Some(DownAnswer {
            down: true,
            leader: Some("abc".into()),
            leader_epoch: 7
        })
    );
    let star = reply(vec![Frame::Integer(0), Frame::bulk("*"), Frame::Integer(0)]);
    assert_eq!(down_answer(&star), Some(DownAnswer::unknown()));
    for bad in [
        Frame::error("ERR value is not an integer or out of range"),
        reply(vec![
            Frame::Integer(0),
            Frame::simple("*"),
            Frame::Integer(0),
        ]),
        reply(vec![Frame::Integer(0), Frame::bulk("*")]),
        reply(vec![Frame::Integer(2), Frame::bulk("*"), Frame::Integer(0)]),
        reply(vec![
            Frame::Integer(0),
            Frame::bulk("x"),
            Frame::Integer(-1),
        ]),
        reply(vec![
            Frame::Integer(0),
            Frame::bulk("*"),
            Frame::Integer(0),
            Frame::Integer(0),
        ]),
    ] {
        assert_eq!(down_answer(&bad), None, "{bad:?}");
    }
}
