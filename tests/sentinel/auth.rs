//! Authentication on the Sentinel port: `requirepass`, ACL `user` lines,
//! Valkey's error texts, and the caps before authentication.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use valkyrie::config;
use valkyrie::daemon::Daemon;

fn ask(s: &mut TcpStream, req: &str) -> String {
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn cmd(args: &[&str]) -> String {
    let mut s = format!("*{}\r\n", args.len());
    for a in args {
        s.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_users_and_caps() {
    let tmp = support::TempDir::new("auth");
    let text = format!(
        "port 0\nadmin-port 0\nindex-port 0\nbind 127.0.0.1\ndir {}\nrequirepass s3cret\nuser app on >apppass +@all\nuser off-user off >x\n",
        tmp.0.display()
    );
    let (cfg, _) = config::parse("t.conf", text.as_bytes()).unwrap();
    let d = Daemon::start(cfg).await.unwrap();
    let port = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let connect = || TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut c = connect();
        assert_eq!(ask(&mut c, &cmd(&["PING"])), "-NOAUTH Authentication required.\r\n");
        assert_eq!(
            ask(&mut c, &cmd(&["SENTINEL", "masters"])),
            "-NOAUTH Authentication required.\r\n"
        );
        assert_eq!(
            ask(&mut c, &cmd(&["HELLO", "3"])),
            "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
        );
        assert_eq!(
            ask(&mut c, &cmd(&["AUTH", "nope"])),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        assert_eq!(
            ask(&mut c, &cmd(&["AUTH", "off-user", "x"])),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        assert_eq!(ask(&mut c, &cmd(&["AUTH", "s3cret"])), "+OK\r\n");
        assert_eq!(ask(&mut c, &cmd(&["PING"])), "+PONG\r\n");
        assert_eq!(ask(&mut c, &cmd(&["ACL", "WHOAMI"])), "$7\r\ndefault\r\n");
        assert_eq!(ask(&mut c, &cmd(&["COMMAND", "COUNT"])), ":15\r\n");
        assert_eq!(
            ask(&mut c, &cmd(&["PUBLISH", "x", "y"])),
            "-ERR Only HELLO messages are accepted by Sentinel instances.\r\n"
        );
        assert_eq!(ask(&mut c, &cmd(&["PUBLISH", "__sentinel__:hello", "y"])), ":1\r\n");
        // Once authenticated, more than 10 arguments are fine.
        let channels = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"];
        let many: Vec<&str> = std::iter::once("SUBSCRIBE").chain(channels).collect();
        let replies = ask(&mut c, &cmd(&many));
        assert!(replies.ends_with("$1\r\nk\r\n:11\r\n"), "{replies}");

        let mut u = connect();
        assert_eq!(ask(&mut u, &cmd(&["AUTH", "app", "apppass"])), "+OK\r\n");
        assert_eq!(ask(&mut u, &cmd(&["ACL", "WHOAMI"])), "$3\r\napp\r\n");

        let mut h = connect();
        let hello = ask(&mut h, &cmd(&["HELLO", "3", "AUTH", "app", "apppass", "SETNAME", "n"]));
        assert!(hello.starts_with("%6\r\n$6\r\nserver\r\n"), "{hello}");
        assert_eq!(ask(&mut h, &cmd(&["CLIENT", "GETNAME"])), "$1\r\nn\r\n");

        // Before authentication, Valkey's caps: 10 arguments, 16 KiB bulks.
        let mut big = connect();
        let eleven = vec!["PING"; 11];
        assert_eq!(
            ask(&mut big, &cmd(&eleven)),
            "-ERR Protocol error: unauthenticated multibulk length\r\n"
        );
        let mut bulk = connect();
        assert_eq!(
            ask(&mut bulk, "*1\r\n$100000000\r\n"),
            "-ERR Protocol error: unauthenticated bulk length\r\n"
        );
        // Other clients go on.
        let mut ok = connect();
        assert_eq!(ask(&mut ok, &cmd(&["AUTH", "default", "s3cret"])), "+OK\r\n");
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_without_a_password_configured() {
    let tmp = support::TempDir::new("noauth");
    let text = format!(
        "port 0\nadmin-port 0\nindex-port 0\nbind 127.0.0.1\ndir {}\n",
        tmp.0.display()
    );
    let (cfg, _) = config::parse("t.conf", text.as_bytes()).unwrap();
    let d = Daemon::start(cfg).await.unwrap();
    let port = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert_eq!(
            ask(&mut c, &cmd(&["AUTH", "x"])),
            "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
        );
        assert_eq!(ask(&mut c, &cmd(&["PING"])), "+PONG\r\n");
        assert_eq!(ask(&mut c, &cmd(&["ACL", "WHOAMI"])), "$7\r\ndefault\r\n");
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

/// A connection opened while the default user was off runs as `default`
/// once `ACL SETUSER default on` opens it again, without `AUTH`: Valkey
/// judges the need for authentication at each command. Side by side with
/// a real valkey-sentinel. A peer's link opened in that window otherwise
/// stayed refused (`-NOAUTH`) for good, and Valkey's whole suite lost
/// its peers after 09-acl-support.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_opened_while_default_was_off_runs_once_it_is_on() {
    let tmp = support::TempDir::new("default-reopened");
    let (real, d) = support::sentinel::beside_a_real_sentinel(&tmp.0).await;
    let ours = d.sentinel_addrs[0].port();
    let real_port = real.port;
    tokio::task::spawn_blocking(move || {
        for (who, port) in [("valkey-sentinel", real_port), ("Valkyrie", ours)] {
            let mut admin = TcpStream::connect(("127.0.0.1", port)).unwrap();
            for args in [
                &["ACL", "SETUSER", "admin", ">pw", "+@all", "on"][..],
                &["ACL", "SETUSER", "default", "off"],
            ] {
                assert_eq!(ask(&mut admin, &cmd(args)), "+OK\r\n", "{who}");
            }
            assert_eq!(
                ask(&mut admin, &cmd(&["AUTH", "admin", "pw"])),
                "+OK\r\n",
                "{who}"
            );
            let mut late = TcpStream::connect(("127.0.0.1", port)).unwrap();
            assert_eq!(
                ask(&mut late, &cmd(&["PING"])),
                "-NOAUTH Authentication required.\r\n",
                "{who}"
            );
            assert_eq!(
                ask(&mut admin, &cmd(&["ACL", "SETUSER", "default", "on"])),
                "+OK\r\n",
                "{who}"
            );
            assert_eq!(ask(&mut late, &cmd(&["PING"])), "+PONG\r\n", "{who}");
            assert_eq!(
                ask(&mut late, &cmd(&["ACL", "WHOAMI"])),
                "$7\r\ndefault\r\n",
                "{who}"
            );
        }
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}
