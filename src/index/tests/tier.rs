//! The proven tier over a real loopback socket: what proves a subscriber,
//! what does not, and what loses it.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::watch;

use super::{group, topo};
use crate::index::{self, Admission, Feed, Limits, Stats};
use crate::topology::Topology;

struct Raw {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    w: OwnedWriteHalf,
}

impl Raw {
    async fn connect(port: u16) -> Raw {
        let (r, w) = TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap()
            .into_split();
        let mut raw = Raw {
            lines: BufReader::new(r).lines(),
            w,
        };
        assert!(raw.line().await.starts_with("VALKYRIE-INDEX 2 "));
        raw
    }

    async fn line(&mut self) -> String {
        let next = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line());
        next.await.unwrap().unwrap().unwrap()
    }

    async fn ask(&mut self, text: &str) -> String {
        self.w.write_all(text.as_bytes()).await.unwrap();
        self.line().await
    }

    /// Reads one snapshot and what follows it; returns the mark, if any.
    async fn push(&mut self) -> Option<String> {
        assert!(self.line().await.starts_with("SNAPSHOT a "));
        while !self.line().await.starts_with("END ") {}
        let next = self.ask("PING\n").await;
        match next.strip_prefix("MARK ") {
            Some(token) => {
                assert_eq!(self.line().await, "PONG");
                Some(token.to_string())
            }
            None => {
                assert_eq!(next, "PONG");
                None
            }
        }
    }
}

/// Group `a` in `epoch`, each epoch a revision of its own.
fn at(epoch: u64) -> crate::topology::GroupView {
    crate::topology::GroupView {
        revision: epoch,
        ..group(epoch, 7000, &[])
    }
}

async fn server() -> (watch::Sender<Arc<Topology>>, Feed, u16) {
    let (tx, rx) = watch::channel(Arc::new(topo(&[("a", at(1))])));
    let feed = index::spawn_feed(rx);
    let listener = index::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let limits = Limits::default();
    tokio::spawn(index::serve_limited(
        listener,
        feed.clone(),
        "0123456789012345678901234567890123456789",
        limits,
        Arc::new(Stats::default()),
        Admission::new(&limits),
        None,
    ));
    (tx, feed, port)
}

async fn members_become(feed: &Feed, n: usize) {
    let wait = async {
        while feed.proven.members() != n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("proven: {} and not {n}", feed.proven.members()));
}

#[tokio::test]
async fn answering_the_mark_proves_a_reader_and_ignoring_one_demotes_it() {
    let (tx, feed, port) = server().await;
    let mut c = Raw::connect(port).await;
    assert_eq!(c.ask("HELLO 2\n").await, "HELLO 2");
    assert_eq!(c.ask("WATCH a\n").await, "WATCHING 1");
    let mark = c.push().await.expect("version 2 ends a batch with MARK");
    assert_eq!(mark.len(), 16);
    // A guess, or any token but the last mark's, proves nothing.
    assert_eq!(c.ask("ACK 0000000000000000\nPING\n").await, "PONG");
    assert_eq!(feed.proven.members(), 0);
    assert_eq!(c.ask(&format!("ACK {mark}\nPING\n")).await, "PONG");
    members_become(&feed, 1).await;
    // Answered once is not answered twice.
    assert_eq!(c.ask(&format!("ACK {mark}\nPING\n")).await, "PONG");
    assert_eq!(feed.proven.members(), 1);

    // One mark may be unanswered when the next batch comes (the answer
    // may be on its way); two may not: back with the rest.
    let mut marks = vec![mark];
    for epoch in 2..5 {
        tx.send_replace(Arc::new(topo(&[("a", at(epoch))])));
        marks.push(c.push().await.unwrap());
        if epoch < 4 {
            assert_eq!(feed.proven.members(), 1, "epoch {epoch}");
        }
    }
    members_become(&feed, 0).await;
    let mut distinct = marks.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "a mark is never repeated");
    // A late answer to an older mark does not count; the newest does.
    assert_eq!(c.ask(&format!("ACK {}\nPING\n", marks[2])).await, "PONG");
    assert_eq!(feed.proven.members(), 0);
    assert_eq!(c.ask(&format!("ACK {}\nPING\n", marks[3])).await, "PONG");
    members_become(&feed, 1).await;
    drop(c);
    members_become(&feed, 0).await;
}

#[tokio::test]
async fn version_one_gets_no_marks_and_every_change() {
    let (tx, feed, port) = server().await;
    let mut c = Raw::connect(port).await;
    assert_eq!(c.ask("WATCH a\n").await, "WATCHING 1");
    assert_eq!(c.push().await, None);
    for epoch in 2..5 {
        tx.send_replace(Arc::new(topo(&[("a", at(epoch))])));
        assert_eq!(c.push().await, None);
    }
    assert_eq!(feed.proven.members(), 0);
}
