//! Against a real valkey-server: hellos published on the command link,
//! the pub/sub link's filtering, and the connections' names.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::timeout;
use valkyrie_protocol::Frame;

use super::kit;
use crate::config::Secret;
use crate::core::{Addr, HelloVia, Input};
use crate::link::pubsub::hello_of;
use crate::link::{HelloJob, INPUT_QUEUE, Job, LinkSpec, run};

const WAIT: Duration = Duration::from_secs(10);

fn spec(addr: Addr, myid: &str, pass: Option<&str>) -> (LinkSpec, watch::Sender<bool>) {
    let (urgent_tx, urgent) = watch::channel(false);
    let spec = LinkSpec {
        group: "m".into(),
        addr,
        down_after: Duration::from_secs(5),
        auth_user: None,
        auth_pass: pass.map(Secret::new),
        renamed: Vec::new().into(),
        urgent,
        timers: watch::channel(crate::core::Timers::default()).1,
        myid: myid.to_string(),
        tls: None,
        texts: Default::default(),
        resolved: Default::default(),
    };
    (spec, urgent_tx)
}

#[tokio::test]
async fn a_hello_goes_out_with_the_connections_local_address() {
    let server = kit::valkey_server(&[]);
    let myid = kit::runid("abcdef12");
    let mut sub = kit::client(server.port, None).await;
    let reply = kit::call(&mut sub, &["SUBSCRIBE", "__sentinel__:hello"]).await;
    assert!(matches!(reply, Frame::Array(_)), "{reply:?}");
    let (spec, _urgent) = spec(server.addr(), &myid, None);
    let (jobs_tx, jobs) = mpsc::unbounded_channel();
    let (inputs_tx, mut inputs) = mpsc::channel(INPUT_QUEUE);
    let link = tokio::spawn(run(spec, jobs, inputs_tx));
    // Connected once its first INFO is in.
    kit::next_input(WAIT, &mut inputs, |i| {
        matches!(i, Input::Report { .. }).then_some(())
    })
    .await;

    let rest = format!("26379,{myid},0,m,127.0.0.1,{},0", server.port);
    let hello = HelloJob {
        rest: rest.clone(),
        announce_ip: None,
    };
    jobs_tx.send(Job::Hello(hello)).unwrap();
    let frame = timeout(WAIT, sub.next_frame()).await.unwrap().unwrap();
    assert_eq!(
        hello_of(&frame, ""),
        Some(format!("127.0.0.1,{rest}")),
        "{frame:?}"
    );

    let announced = HelloJob {
        rest: rest.clone(),
        announce_ip: Some("10.1.2.3".into()),
    };
    jobs_tx.send(Job::Hello(announced)).unwrap();
    let frame = timeout(WAIT, sub.next_frame()).await.unwrap().unwrap();
    assert_eq!(hello_of(&frame, ""), Some(format!("10.1.2.3,{rest}")));

    // Our own hellos come back on the pub/sub link and are dropped; the
    // link stays up meanwhile (PINGs keep being answered).
    let mut pings = 0;
    let quiet = timeout(Duration::from_millis(1500), async {
        while let Some(input) = inputs.recv().await {
            match input {
                Input::Hello { payload, .. } => panic!("own hello handed back: {payload}"),
                Input::LinkDown { failure, .. } => panic!("link down: {failure:?}"),
                Input::PingOk { .. } => pings += 1,
                _ => {}
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "the link ended");
    assert!(pings >= 1, "no PING answered");
    drop(jobs_tx);
    timeout(WAIT, link).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_pubsub_link_forwards_other_hellos_and_drops_ours() {
    let server = kit::valkey_server(&[]);
    let myid = kit::runid("abcdef12");
    let other = kit::runid("0123");
    let (spec, _urgent) = spec(server.addr(), &myid, None);
    let (_jobs_tx, jobs) = mpsc::unbounded_channel();
    let (inputs_tx, mut inputs) = mpsc::channel(INPUT_QUEUE);
    let link = tokio::spawn(run(spec, jobs, inputs_tx));

    let mut publisher = kit::client(server.port, None).await;
    // Until the pub/sub link is subscribed.
    let subscribed = timeout(WAIT, async {
        loop {
            let reply =
                kit::call(&mut publisher, &["PUBSUB", "NUMSUB", "__sentinel__:hello"]).await;
            if reply == Frame::Array(vec![Frame::bulk("__sentinel__:hello"), Frame::Integer(1)]) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(subscribed.is_ok(), "the pub/sub link never subscribed");

    let port = server.port;
    let ours = format!("127.0.0.1,26379,{myid},0,m,127.0.0.1,{port},0");
    let theirs = |p: u16| format!("127.0.0.1,{p},{other},0,m,127.0.0.1,{port},0");
    let too_long = format!("{},{}", theirs(1), "x".repeat(2000));
    for payload in [ours.as_str(), too_long.as_str(), theirs(26380).as_str()] {
        kit::call(&mut publisher, &["PUBLISH", "__sentinel__:hello", payload]).await;
    }
    // In order on one subscription: the first hello handed over is the
    // third message (ours and the oversized one were dropped).
    let (payload, via) = kit::next_input(WAIT, &mut inputs, |i| match i {
        Input::Hello { payload, via } => Some((payload, via)),
        _ => None,
    })
    .await;
    assert_eq!(payload, theirs(26380));
    assert_eq!(via, HelloVia::Channel);
    link.abort();
}

#[tokio::test]
async fn both_connections_authenticate_and_are_named_and_close_with_the_link() {
    let server = kit::valkey_server(&["--requirepass", "s3cret"]);
    let myid = kit::runid("abcdef12");
    let (spec, _urgent) = spec(server.addr(), &myid, Some("s3cret"));
    let (jobs_tx, jobs) = mpsc::unbounded_channel();
    let (inputs_tx, mut inputs) = mpsc::channel(INPUT_QUEUE);
    let link = tokio::spawn(run(spec, jobs, inputs_tx));
    // Authenticated: PINGs are answered with PONG.
    kit::next_input(WAIT, &mut inputs, |i| {
        matches!(i, Input::PingOk { .. }).then_some(())
    })
    .await;
    let drain = tokio::spawn(async move { while inputs.recv().await.is_some() {} });

    let mut admin = kit::client(server.port, Some("s3cret")).await;
    let names = [
        "name=sentinel-abcdef12-cmd ",
        "name=sentinel-abcdef12-pubsub ",
    ];
    let listed = |list: &str| names.map(|n| list.contains(n));
    let mut list = String::new();
    for _ in 0..200 {
        list =
            crate::link::client::text(&kit::call(&mut admin, &["CLIENT", "LIST"]).await).unwrap();
        if listed(&list) == [true, true] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(listed(&list), [true, true], "{list}");

    // The link ends when its jobs close, and its pub/sub link with it.
    drop(jobs_tx);
    timeout(WAIT, link).await.unwrap().unwrap();
    for _ in 0..200 {
        list =
            crate::link::client::text(&kit::call(&mut admin, &["CLIENT", "LIST"]).await).unwrap();
        if listed(&list) == [false, false] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(listed(&list), [false, false], "{list}");
    drain.abort();
}
