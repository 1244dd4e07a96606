//! Malformed requests on the Sentinel port get exactly what a real
//! valkey-sentinel 8.0.1 answers to the same bytes: the same
//! `-ERR Protocol error: …` texts, and the same leniency where Valkey is
//! lenient (it skips the two bytes after a bulk argument unseen, and
//! takes a non-positive multibulk count as an empty request).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::TempDir;
use support::sentinel::RealSentinel;
use valkyrie::config;
use valkyrie::daemon::Daemon;

/// Each case on a fresh connection; both servers close the connection
/// after a protocol error, so everything up to the close is compared.
const CASES: &[&[u8]] = &[
    b"*abc\r\n",
    b"*1\r\n$abc\r\n",
    b"*1\r\nx\r\n",
    b"*1\r\n:4\r\n",
    b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
    b"*1\r\n$4\r\nPING\n\n",
    b"*-5\r\nPING\r\n",
    b"*0\r\nPING\r\n",
    b"*-0\r\n",
    b"*1\r\n$-1\r\n",
    b"*1\r\n$2000000000\r\n",
    b"*3000000000\r\n",
    b"*1\r\n$ 4\r\n",
    b"*1\r\n$4x\r\n",
    b"*+1\r\n",
    b"*1\r\n$+4\r\nPING\r\n",
    b"*01\r\n$4\r\nPING\r\n",
    b"*1\r\n$04\r\nPING\r\n",
    b"\"abc\r\n",
    b"PING \"a\"b\r\n",
    b"PING\r\n",
];

/// Everything the server sends back for `bytes` until it closes the
/// connection or stays silent for 300 ms.
fn exchange(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_valkeys_replies() {
    let dir = TempDir::new("protocol-errors");
    let sentinel = RealSentinel::start(&dir.0, "");
    let text = format!(
        "port 0\nadmin-port 0\nindex-port 0\nbind 127.0.0.1\ndir {}\n",
        dir.0.display()
    );
    let (cfg, _) = config::parse("t.conf", text.as_bytes()).unwrap();
    let d = Daemon::start(cfg).await.unwrap();
    let ours = d.sentinel_addrs[0].port();
    let theirs = sentinel.port;
    let diffs = tokio::task::spawn_blocking(move || {
        CASES
            .iter()
            .filter_map(|case| {
                let (a, b) = (exchange(theirs, case), exchange(ours, case));
                (a != b).then(|| {
                    format!(
                        "{:?}: valkey-sentinel {:?}, Valkyrie {:?}",
                        String::from_utf8_lossy(case),
                        String::from_utf8_lossy(&a),
                        String::from_utf8_lossy(&b)
                    )
                })
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert!(diffs.is_empty(), "replies differ:\n{}", diffs.join("\n"));
    d.stop().await.unwrap();
}
