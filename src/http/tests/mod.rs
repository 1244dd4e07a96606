//! Tests of `admin`.

use std::time::Duration;

use tokio::sync::watch;

use super::*;

#[test]
fn request_lines() {
    assert_eq!(
        parse_request_line(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap(),
        Request {
            method: "GET",
            path: "/metrics"
        }
    );
    assert_eq!(
        parse_request_line(b"HEAD /readyz HTTP/1.0\n\n").unwrap(),
        Request {
            method: "HEAD",
            path: "/readyz"
        }
    );
    for bad in [
        &b"GET /metrics\r\n\r\n"[..],
        b"GET metrics HTTP/1.1\r\n\r\n",
        b"get /metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/2\r\n\r\n",
        b"GET  /metrics HTTP/1.1\r\n\r\n",
        b"GET /a HTTP/1.1 extra\r\n\r\n",
        b"\xff\xfe /a HTTP/1.1\r\n\r\n",
        b"no newline",
    ] {
        assert!(parse_request_line(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn head_end() {
    assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
    assert_eq!(find_head_end(b"GET / HTTP/1.1\n\n"), Some(16));
    assert_eq!(find_head_end(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
}

async fn start(limits: Limits) -> (SocketAddr, watch::Sender<bool>, PrometheusHandle) {
    let recorder = crate::metrics::recorder().unwrap();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        crate::metrics::describe();
        crate::metrics::sentinel_rejected();
    });
    let (ready_tx, ready) = watch::channel(false);
    let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = AdminState {
        metrics: handle.clone(),
        ready,
        health: watch::channel(crate::runtime::Health::default()).1,
        tls: None,
        status: None,
        auth: None,
        plans: None,
    };
    tokio::spawn(serve(listener, state, limits));
    (addr, ready_tx, handle)
}

async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    // A refused connection may end in a reset: what arrived counts.
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("the server closes the connection after answering");
    String::from_utf8(out).unwrap()
}

async fn get(addr: SocketAddr, path: &str) -> String {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
    .await
}

#[tokio::test]
async fn paths_and_readiness() {
    let (addr, ready, _) = start(Limits::default()).await;
    assert!(
        get(addr, "/healthz")
            .await
            .starts_with("HTTP/1.1 200 OK\r\n")
    );
    let not_ready = get(addr, "/readyz").await;
    assert!(not_ready.starts_with("HTTP/1.1 503 "), "{not_ready}");
    ready.send(true).unwrap();
    assert!(
        get(addr, "/readyz")
            .await
            .starts_with("HTTP/1.1 200 OK\r\n")
    );

    let metrics = get(addr, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
    assert!(metrics.contains("Content-Type: text/plain; version=0.0.4"));
    assert!(metrics.contains("valkyrie_sentinel_connections_rejected_total 1"));
    let (head, body) = metrics.split_once("\r\n\r\n").unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(length, body.len());

    assert!(get(addr, "/nope").await.starts_with("HTTP/1.1 404 "));
    let head = exchange(addr, b"HEAD /healthz HTTP/1.1\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"));
    let post = exchange(addr, b"POST /readyz HTTP/1.1\r\nContent-Length: 0\r\n\r\n").await;
    assert!(post.starts_with("HTTP/1.1 405 ") && post.contains("Allow: GET, HEAD\r\n"));
    let bad = exchange(addr, b"\x16\x03\x01 hello\r\n\r\n").await;
    assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");

    // The runtime stops (its sender goes): neither live nor ready, and
    // metrics are still served for the post-mortem.
    drop(ready);
    let dead = get(addr, "/healthz").await;
    assert!(dead.starts_with("HTTP/1.1 503 ") && dead.ends_with("runtime stopped\n"));
    assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503 "));
    assert!(get(addr, "/metrics").await.starts_with("HTTP/1.1 200 "));
}

#[tokio::test]
async fn oversized_and_slow_requests_are_cut_off() {
    let limits = Limits {
        max_head: 1024,
        read_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let (addr, _ready, _) = start(limits).await;
    let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
    while big.len() < 64 * 1024 {
        big.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    // The server answers and closes after about 1 KiB; the rest of
    // the write may fail with a reset, which is fine.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(&big).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 431 "), "{out}");

    // A client that sends half a head and stalls gets 408 and is closed.
    let slow = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost:").await;
    assert!(slow.starts_with("HTTP/1.1 408 "), "{slow}");
    // The server still serves others.
    assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200 "));
}

#[tokio::test]
async fn past_the_limit_the_oldest_connection_makes_room() {
    let limits = Limits {
        max_connections: 2,
        read_timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let (addr, _ready, _) = start(limits).await;
    // Two idle clients hold both slots.
    let mut a = TcpStream::connect(addr).await.unwrap();
    a.write_all(b"G").await.unwrap();
    let mut b = TcpStream::connect(addr).await.unwrap();
    b.write_all(b"G").await.unwrap();
    // A probe is served anyway (it takes the place of the oldest
    // connection still sending its head), and every later one too.
    for _ in 0..5 {
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200 "));
    }
    // The oldest idle one was closed to make room; the other still waits.
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), a.read_to_end(&mut out)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    let mut one = [0u8; 1];
    let waiting = tokio::time::timeout(Duration::from_millis(100), b.read(&mut one)).await;
    assert!(waiting.is_err(), "{waiting:?}");
}

#[test]
fn slots_hand_an_evicted_connections_permit_to_the_new_one() {
    let slots = Slots::new(2);
    let first = slots.take(1).unwrap();
    let second = slots.take(2).unwrap();
    // Both answered their head: the oldest goes.
    first
        .reading
        .store(false, std::sync::atomic::Ordering::Relaxed);
    second
        .reading
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let _third = slots.take(3).unwrap();
    assert_eq!(slots.limit.live(), 2);
    assert_eq!(slots.live().keys().copied().collect::<Vec<_>>(), [2, 3]);
    // One still sending its head goes before an older one that is not.
    let _fourth = slots.take(4).unwrap();
    assert_eq!(slots.live().keys().copied().collect::<Vec<_>>(), [2, 4]);
    assert_eq!(slots.limit.live(), 2);
    // A connection that ends gives its permit back.
    slots.live().remove(&2);
    assert_eq!(slots.limit.live(), 1);
    let _fifth = slots.take(5).unwrap();
    assert_eq!(slots.live().keys().copied().collect::<Vec<_>>(), [4, 5]);
}

#[tokio::test]
async fn answers_are_byte_for_byte_as_before() {
    let (addr, ready, _) = start(Limits::default()).await;
    let common = "Content-Type: text/plain\r\nContent-Length: ";
    let tail = "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
    assert_eq!(
        get(addr, "/healthz").await,
        format!("HTTP/1.1 200 OK\r\n{common}3{tail}ok\n")
    );
    assert_eq!(
        get(addr, "/readyz").await,
        format!("HTTP/1.1 503 Service Unavailable\r\n{common}10{tail}not ready\n")
    );
    ready.send(true).unwrap();
    assert_eq!(
        get(addr, "/readyz?verbose").await,
        format!("HTTP/1.1 200 OK\r\n{common}6{tail}ready\n")
    );
    assert_eq!(
        exchange(addr, b"HEAD /readyz HTTP/1.1\r\n\r\n").await,
        format!("HTTP/1.1 200 OK\r\n{common}6{tail}")
    );
    // An HTTP/1.0 client is answered in its version (hyper's rule; the
    // hand-written responder said 1.1 to everyone).
    assert_eq!(
        exchange(addr, b"GET /healthz HTTP/1.0\r\n\r\n").await,
        format!("HTTP/1.0 200 OK\r\n{common}3{tail}ok\n")
    );
    assert_eq!(
        get(addr, "/nope").await,
        format!("HTTP/1.1 404 Not Found\r\n{common}10{tail}not found\n")
    );
    assert_eq!(
        exchange(addr, b"DELETE /healthz HTTP/1.1\r\n\r\n").await,
        format!(
            "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n{common}17{tail}GET or HEAD only\n"
        )
    );
}

#[test]
fn credentials_match_exactly() {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let auth = auth::Auth::new(Some("tok"), Some(("ops", "pw")));
    assert!(auth.allows(b"Bearer tok"));
    assert!(auth.allows(b"bearer  tok "));
    assert!(auth.allows(format!("Basic {}", b64("ops:pw")).as_bytes()));
    for bad in [
        "Bearer to".to_string(),
        "Bearer tokk".into(),
        "Bearer".into(),
        "tok".into(),
        format!("Basic {}", b64("ops:p")),
        format!("Basic {}", b64("ops:pw ")),
        "Basic !!".into(),
        format!("Bearer {}", b64("ops:pw")),
    ] {
        assert!(!auth.allows(bad.as_bytes()), "{bad}");
    }
    let token_only = auth::Auth::new(Some("tok"), None);
    assert!(!token_only.allows(format!("Basic {}", b64("ops:pw")).as_bytes()));
    assert!(!format!("{auth:?}").contains("tok"));
}

#[tokio::test]
async fn the_stream_opens_with_the_groups_and_ends_with_the_runtime() {
    let (topology_tx, topology) =
        watch::channel(std::sync::Arc::new(crate::topology::Topology::default()));
    let bus = crate::events::EventBus::new();
    let published = crate::index::spawn_feed(topology.clone()).first;
    let hub = hub::Hub::start(topology, published, &bus, None);
    let recorder = crate::metrics::recorder().unwrap();
    let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = AdminState {
        metrics: recorder.handle(),
        ready: watch::channel(true).1,
        health: watch::channel(crate::runtime::Health::default()).1,
        tls: None,
        status: Some(hub),
        auth: None,
        plans: None,
    };
    tokio::spawn(serve(listener, state, Limits::default()));
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\n\n") {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&seen).to_string();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("Content-Type: text/event-stream"), "{text}");
    assert!(
        text.contains("event: groups\ndata: {\"groups\":[],\"tilt\":false}\n\n"),
        "{text}"
    );
    // HEAD answers the head and closes.
    let head = tokio::time::timeout(
        Duration::from_secs(5),
        exchange(addr, b"HEAD /api/v1/stream HTTP/1.1\r\n\r\n"),
    )
    .await
    .expect("HEAD of the stream closes");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"));
    // The runtime stops: the stream ends.
    drop(topology_tx);
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .expect("the stream ends with the runtime")
        .unwrap();
}
