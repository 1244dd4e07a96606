//! What the status tests share: the daemon binary as a process
//! monitoring a real master and two replicas, and plain HTTP to its
//! admin port.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// The daemon process, killed by PID on drop.
pub struct Daemon(pub Child);

impl Daemon {
    pub fn start(conf: &Path, log: &Path) -> Daemon {
        let child = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .arg(conf)
            .args(["--index-port", "0"])
            .env_remove("VALKYRIE_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
            .spawn()
            .unwrap();
        Daemon(child)
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A master, two replicas, and a daemon monitoring them as `mymaster`
/// (down after 1 s) with its admin port; returned once the admin port
/// shows both replicas with an up link.
pub struct Setup {
    pub tmp: TempDir,
    pub master: Server,
    pub r1: Server,
    pub r2: Server,
    pub daemon: Daemon,
    pub admin: u16,
    pub sentinel: u16,
}

pub fn setup(tag: &str, extra_conf: &str) -> Setup {
    let bin = valkey_server();
    let tmp = TempDir::new(tag);
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let (sentinel, admin) = (free_port(), free_port());
    let conf = tmp.0.join("valkyrie.conf");
    std::fs::write(
        &conf,
        format!(
            "port {sentinel}\nbind 127.0.0.1\ndir {dir}\nadmin-port {admin}\n\
             sentinel monitor mymaster 127.0.0.1 {m} 1\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 10000\n{extra_conf}",
            dir = tmp.0.display(),
            m = master.port,
        ),
    )
    .unwrap();
    let daemon = Daemon::start(&conf, &tmp.0.join("valkyrie.log"));
    let setup = Setup {
        tmp,
        master,
        r1,
        r2,
        daemon,
        admin,
        sentinel,
    };
    wait_until(Duration::from_secs(20), || {
        groups(admin).is_some_and(|doc| {
            let g = &doc["groups"][0];
            g["replicas"].as_array().is_some_and(|r| {
                r.len() == 2 && r.iter().all(|r| r["link"] == "up" && r["state"] == "up")
            })
        })
    });
    setup
}

// Each test module uses a part of them.
#[allow(unused_imports)]
pub use crate::support::http::{http, http_get};

/// `/api/v1/groups`, parsed, when the port answers 200.
pub fn groups(admin: u16) -> Option<Value> {
    match http_get(admin, "/api/v1/groups") {
        Ok((200, body)) => serde_json::from_str(&body).ok(),
        _ => None,
    }
}

/// The groups document with what moves on its own (offsets, lags,
/// times, versions) replaced by a marker, so the rest compares exactly.
pub fn steady(mut doc: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, x) in map.iter_mut() {
                    match k.as_str() {
                        // The verdict moves with the replicas' offsets
                        // and the clock: checked on its own.
                        "offset" | "lag" | "time_ms" | "start_ms" | "end_ms" | "version"
                        | "link_down_ms" | "readiness" => {
                            *x = Value::String("*".into());
                        }
                        _ => walk(x),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut doc);
    doc
}

/// Console entries that are JavaScript errors or warnings.
pub fn script_problems(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["level"] != "INFO" && e["level"] != "DEBUG")
        .collect()
}
