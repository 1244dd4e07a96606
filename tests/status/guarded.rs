//! A daemon whose admin port asks for credentials (a bearer token for
//! the API's writes, basic auth for the browser, which can carry it in
//! a URL), monitoring two groups: `mymaster` (a master and two
//! replicas) and `other` (a master and one replica), each with a
//! failover-timeout of 20 s. For the page tests of planned switchovers: a
//! plan can be sent only with credentials.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

use std::time::Duration;

use serde_json::Value;

use crate::common::{Daemon, http};
use crate::support::*;

pub const TOKEN: &str = "page-plan-t0ken";
pub const USER: &str = "ops";
pub const PASSWORD: &str = "pa55word";

pub struct Guarded {
    pub tmp: TempDir,
    pub servers: Vec<Server>,
    pub daemon: Daemon,
    pub admin: u16,
    /// Each group's master port, in name order (`mymaster`, `other`).
    pub masters: [u16; 2],
}

impl Guarded {
    /// Returned once both groups are ready for a switchover: every
    /// replica's link up and the readiness verdict `ready`.
    pub fn start(tag: &str) -> Guarded {
        let bin = valkey_server();
        let tmp = TempDir::new(tag);
        let (m1, r1, r2) = start_trio(&bin, &tmp.0);
        let m2 = Server::start(&bin, &tmp.0, free_port(), None);
        let r3 = Server::start(&bin, &tmp.0, free_port(), Some(m2.port));
        let (sentinel, admin) = (free_port(), free_port());
        let token = tmp.0.join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
        let basic = tmp.0.join("basic");
        std::fs::write(&basic, format!("{USER}:{PASSWORD}\n")).unwrap();
        let conf = tmp.0.join("valkyrie.conf");
        let mut text = format!(
            "port {sentinel}\nbind 127.0.0.1\ndir {dir}\nadmin-port {admin}\n\
             admin-auth-token-file {token}\nadmin-auth-basic-file {basic}\n",
            dir = tmp.0.display(),
            token = token.display(),
            basic = basic.display(),
        );
        // `other` is down only after 10 s: its replica may hold its
        // clients' commands for 3 s (a test's `CLIENT PAUSE … ALL`) and
        // still be up, its link's replies due within 5 s.
        for (name, port, down) in [("mymaster", m1.port, 1000), ("other", m2.port, 10_000)] {
            text.push_str(&format!(
                "sentinel monitor {name} 127.0.0.1 {port} 1\n\
                 sentinel down-after-milliseconds {name} {down}\n\
                 sentinel failover-timeout {name} 20000\n"
            ));
        }
        std::fs::write(&conf, text).unwrap();
        let daemon = Daemon::start(&conf, &tmp.0.join("valkyrie.log"));
        let g = Guarded {
            tmp,
            masters: [m1.port, m2.port],
            servers: vec![m1, r1, r2, m2, r3],
            daemon,
            admin,
        };
        wait_until(Duration::from_secs(30), || {
            g.groups().is_some_and(|doc| {
                let groups = doc["groups"].as_array().unwrap();
                groups.len() == 2
                    && groups.iter().all(|g| {
                        g["readiness"]["ready"] == true
                            && g["replicas"].as_array().is_some_and(|r| {
                                !r.is_empty()
                                    && r.iter().all(|r| r["link"] == "up" && r["state"] == "up")
                            })
                    })
            })
        });
        g
    }

    /// The page's address with the basic-auth credentials in it: a
    /// browser sent there keeps them for the origin. Load [`Self::page_url`]
    /// after it: a page whose own URL holds credentials may not `fetch`
    /// (Chromium refuses a request built from such a URL, and a relative
    /// one inherits them), though its `EventSource` works.
    pub fn login_url(&self) -> String {
        format!("http://{USER}:{PASSWORD}@127.0.0.1:{}/", self.admin)
    }

    /// The page's address, for a browser that went to [`Self::login_url`].
    pub fn page_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.admin)
    }

    /// `GET /api/v1/groups` with the token, parsed, when it answers 200.
    pub fn groups(&self) -> Option<Value> {
        let request = format!(
            "GET /api/v1/groups HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        );
        match http(self.admin, &request) {
            Ok((200, body)) => serde_json::from_str(&body).ok(),
            _ => None,
        }
    }

    /// `POST path` with the token and a JSON `body`: status and answer.
    pub fn post(&self, path: &str, body: &str) -> (u16, Value) {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let (code, text) = http(self.admin, &request).unwrap();
        (code, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// Now plus `secs`, RFC 3339 to the second, as an operator would write
/// it (`date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ`).
pub fn rfc3339_in(secs: u32) -> String {
    let out = std::process::Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("+{secs} seconds"),
            "+%Y-%m-%dT%H:%M:%SZ",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
