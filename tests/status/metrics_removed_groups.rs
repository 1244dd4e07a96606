//! Metric series of removed groups are freed: many `SENTINEL MONITOR` /
//! `REMOVE` cycles, with long names, leave `/metrics` about the size it
//! had with one group, and no removed group's name appears in it. The
//! monitored master is a real valkey-server, so the removed groups had
//! link, role and PING series too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::{Server, TempDir, daemon_config, fast_group, free_port, valkey_server, wait_until};
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

fn metrics(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_groups_leave_no_series() {
    let bin = valkey_server();
    let dir = TempDir::new("metrics-removed");
    let master_port = free_port();
    let _master = Server::start(&bin, &dir.0.join("m"), master_port, None);
    let mut cfg = daemon_config(&dir.0.join("v"), vec![fast_group(master_port)]);
    std::fs::create_dir_all(&cfg.dir).unwrap();
    let admin = free_port();
    cfg.admin_port = admin;
    let d = Daemon::start(cfg).await.unwrap();
    let port = d.sentinel_addrs[0].port();

    let sizes = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || {
            metrics(admin).contains("valkyrie_instance_link_up{group=\"mymaster\"")
        });
        let p = master_port.to_string();
        let cycle = |i: usize| {
            let name = format!("{}{i}", "g".repeat(900));
            let ok = support::call(port, &["SENTINEL", "MONITOR", &name, "127.0.0.1", &p, "1"]);
            assert_eq!(ok, Frame::simple("OK"));
            // Until its link has answered, so it has every kind of series.
            wait_until(Duration::from_secs(10), || metrics(admin).contains(&name));
            let ok = support::call(port, &["SENTINEL", "REMOVE", &name]);
            assert_eq!(ok, Frame::simple("OK"));
        };
        for i in 0..5 {
            cycle(i);
        }
        let early = metrics(admin).len();
        for i in 5..300 {
            cycle(i);
        }
        let text = metrics(admin);
        (early, text)
    })
    .await
    .unwrap();
    let (early, text) = sizes;
    let late = text.len();
    eprintln!("/metrics: {early} bytes after 5 cycles, {late} after 300");
    assert!(
        !text.contains(&"g".repeat(900)),
        "a removed group's series remain"
    );
    assert!(text.contains("group=\"mymaster\""), "live group kept");
    assert!(
        late < early + 4096,
        "/metrics grew from {early} to {late} bytes over 295 MONITOR/REMOVE cycles"
    );
    d.stop().await.unwrap();
}
