//! Client processes driven over stdin/stdout: the drivers under
//! `tests/clients/` print one line per step, and wait for a line on stdin
//! before the failover part of their run.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A client process: its stdout lines arrive on a channel.
pub struct Proc {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            name: name.to_string(),
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line starting with `prefix`; returns the rest, trimmed.
    /// Lines seen earlier count too.
    pub fn expect(&mut self, prefix: &str, limit: Duration) -> String {
        if let Some(l) = self.seen.iter().find(|l| l.starts_with(prefix)) {
            return l[prefix.len()..].trim().to_string();
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.trim().to_string();
                    }
                }
                Err(_) => panic!(
                    "{}: no line starting with {prefix:?} within {limit:?}; saw {:?}",
                    self.name, self.seen
                ),
            }
        }
    }

    /// Lets the driver go on to the part after the failover.
    pub fn go(&mut self) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(b"go\n");
            let _ = stdin.flush();
        }
    }

    /// Waits, bounded, for the process to exit; its exit status.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{}: still running after {limit:?}; saw {:?}",
                self.name,
                self.seen
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// fred with a Sentinel server config over `sentinels` for `name`, set up
/// so that replica commands really reach a replica: fred's fallback to
/// the primary is off and the replica connections (found by `ROLE` on the
/// primary) are opened at init.
pub async fn fred_sentinel(sentinels: &[u16], name: &str) -> fred::prelude::Client {
    use fred::prelude::*;
    let config = Config {
        server: ServerConfig::Sentinel {
            hosts: sentinels
                .iter()
                .map(|&p| Server::new("127.0.0.1", p))
                .collect(),
            service_name: name.into(),
        },
        ..Default::default()
    };
    let connection = ConnectionConfig {
        replica: fred::types::config::ReplicaConfig {
            lazy_connections: false,
            primary_fallback: false,
            ignore_reconnection_errors: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let client = Builder::from_config(config)
        .set_connection_config(connection)
        .set_policy(ReconnectPolicy::new_constant(0, 100))
        .build()
        .unwrap();
    client.init().await.unwrap();
    client
}

/// Reads `key` through one of `master`'s replicas with fred (retrying for
/// 5 s while replication catches up) and checks that the node that served
/// it is a replica. fred 10 routes a replica command by its cluster hash
/// slot's owner, which a Sentinel client has none of; with the primary
/// named as the command's node, it picks one of that primary's replicas.
pub async fn fred_replica_read(client: &fred::prelude::Client, master: u16, key: &str) -> String {
    use fred::prelude::*;
    use fred::types::InfoKind;
    let via_replica = Options {
        cluster_node: Some(Server::new("127.0.0.1", master)),
        ..Default::default()
    };
    let replica = client.replicas().with_options(&via_replica);
    let deadline = Instant::now() + Duration::from_secs(5);
    let read = loop {
        let read: Option<String> = replica.get(key).await.unwrap();
        if let Some(v) = read {
            break v;
        }
        assert!(Instant::now() < deadline, "fred: no replica read of {key}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let role: String = replica.info(Some(InfoKind::Replication)).await.unwrap();
    assert!(
        role.contains("role:slave"),
        "fred's replica read was served by: {role}"
    );
    read
}
