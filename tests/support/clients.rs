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

/// The Java clients (tests/clients/java, one JVM) against one sentinel:
/// Redisson with its check of `SENTINEL sentinels` off, as it refuses a
/// single sentinel otherwise.
pub const JAVA_ONE_SENTINEL: &[&str] = &[
    "jedis",
    "lettuce-resp3",
    "lettuce-resp2",
    "lettuce-master-replica",
    "redisson-unchecked",
    "spring",
];

/// The go-redis clients (tests/clients/go, one process).
pub const GO_CLIENTS: &[&str] = &["goredis-resp3", "goredis-resp2", "goredis-cluster"];

/// The clients whose Java or Go driver (tests/clients/java,
/// tests/clients/go) subscribes to `+switch-master` through the library
/// and prints the message.
pub const JAVA_GO_SUBSCRIBERS: &[&str] = &[
    "jedis",
    "lettuce-resp3",
    "lettuce-resp2",
    "lettuce-master-replica",
    "redisson",
    "redisson-unchecked",
    "goredis-resp3",
    "goredis-resp2",
    "goredis-cluster",
];

/// The command that runs the Java or Go driver named by the environment
/// variable `var` (VALKYRIE_JAVA_CLIENTS, VALKYRIE_GO_CLIENTS, exported by
/// scripts/deps.sh): a jar runs under `java -jar` (`VALKYRIE_JAVA`, else
/// `java`), anything else is executed. A missing driver fails the test.
pub fn driver_command(var: &str) -> Command {
    use std::path::Path;
    let path = std::env::var_os(var).unwrap_or_else(|| {
        panic!("{var} is not set: run scripts/test (it builds the Java and Go drivers)")
    });
    assert!(
        Path::new(&path).is_file(),
        "{var}={path:?} does not exist: run scripts/test"
    );
    if Path::new(&path).extension().is_some_and(|e| e == "jar") {
        let mut cmd =
            Command::new(std::env::var_os("VALKYRIE_JAVA").unwrap_or_else(|| "java".into()));
        cmd.arg("-jar").arg(path);
        cmd
    } else {
        Command::new(path)
    }
}

/// One Java or Go driver process running several clients against the
/// sentinels on 127.0.0.1, each of its lines prefixed with the client's
/// name (the protocol is described in tests/clients/go/main.go and
/// tests/clients/java/…/Main.java).
pub struct Driver {
    pub proc: Proc,
    pub clients: Vec<&'static str>,
}

impl Driver {
    /// Starts `cmd` (from [`driver_command`], with any environment the
    /// caller set) on `sentinels` with `clients`.
    pub fn start(
        mut cmd: Command,
        name: &str,
        sentinels: &[u16],
        clients: &[&'static str],
    ) -> Driver {
        let ports: Vec<String> = sentinels.iter().map(u16::to_string).collect();
        cmd.arg(ports.join(",")).arg(clients.join(","));
        Driver {
            proc: Proc::spawn(name, cmd),
            clients: clients.to_vec(),
        }
    }

    /// Phase 1: every client found `master`, both `replicas`, and read its
    /// write back from a replica (a node whose role is `slave`).
    pub fn expect_before(&mut self, master: u16, replicas: &[u16]) {
        let s = Duration::from_secs(1);
        let want: std::collections::BTreeSet<u16> = replicas.iter().copied().collect();
        for c in self.clients.clone() {
            // A JVM starting many clients on a loaded machine is slow.
            let got = self.proc.expect(&format!("{c} master "), 90 * s);
            assert_eq!(got, master.to_string(), "{c}: the master it discovered");
            let got: std::collections::BTreeSet<u16> = self
                .proc
                .expect(&format!("{c} replicas "), 20 * s)
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
            assert_eq!(got, want, "{c}: the replicas it discovered");
            let read = self.proc.expect(&format!("{c} replica-read "), 20 * s);
            assert_eq!(read, "1", "{c}: its write read back from a replica");
            let role = self.proc.expect(&format!("{c} replica-role "), 20 * s);
            assert_eq!(role, "slave", "{c}: the node that served the read");
            self.proc.expect(&format!("{c} ready"), 30 * s);
        }
    }

    /// Phase 2: every client wrote to `master` again with the same
    /// object; subscribers got `switch`; `get(port, key)` (a `GET` on the
    /// node at `port`) finds each client's write on the master it
    /// followed. Returns each client's time from the kill to its first
    /// acknowledged write.
    ///
    /// `moved_on` names the master the deployment has converged on since,
    /// when real sentinels failed the new master over again (a client that
    /// reports it followed the promoted node then is right).
    pub fn expect_after(
        &mut self,
        master: u16,
        switch: &str,
        moved_on: &dyn Fn() -> Option<u16>,
        get: &dyn Fn(u16, &str) -> valkyrie_protocol::Frame,
    ) -> Vec<(&'static str, u64)> {
        let s = Duration::from_secs(1);
        let mut recovered = Vec::new();
        for c in self.clients.clone() {
            let ms = self.proc.expect(&format!("{c} recovered-ms "), 70 * s);
            let ms: u64 = ms
                .parse()
                .unwrap_or_else(|_| panic!("{c}: recovered-ms {ms:?}"));
            let followed = self.proc.expect(&format!("{c} followed "), 20 * s);
            let followed: u16 = followed
                .parse()
                .unwrap_or_else(|_| panic!("{c}: followed {followed:?}"));
            assert!(
                followed == master || moved_on() == Some(followed),
                "{c}: writes to {followed}, not the new master {master}"
            );
            if JAVA_GO_SUBSCRIBERS.contains(&c) {
                let got = self.proc.expect(&format!("{c} switch "), 20 * s);
                assert_eq!(got, switch, "{c}: the +switch-master message");
            }
            self.proc.expect(&format!("{c} done"), 20 * s);
            assert_eq!(
                get(followed, &format!("after:{c}")),
                valkyrie_protocol::Frame::bulk("1"),
                "{c}: its write after the failover is on the master it followed"
            );
            recovered.push((c, ms));
        }
        self.proc.expect("done", 20 * s);
        let status = self.proc.wait_exit(20 * s);
        assert!(status.success(), "{}: exit {status}", self.proc.name);
        recovered
    }
}

/// Recovery times by client and by deployment kind (`valkyrie`,
/// `sentinel`), and each kind's failover times (kill to every sentinel
/// advertising the new master), in milliseconds.
#[derive(Default)]
pub struct RecoveryTable {
    pub clients: std::collections::BTreeMap<
        &'static str,
        std::collections::BTreeMap<&'static str, Vec<u64>>,
    >,
    pub failovers: std::collections::BTreeMap<&'static str, Vec<u64>>,
}

impl RecoveryTable {
    /// Records one failover of a `kind` deployment.
    pub fn add(
        &mut self,
        kind: &'static str,
        recovered: Vec<(&'static str, u64)>,
        failover: Duration,
    ) {
        self.failovers
            .entry(kind)
            .or_default()
            .push(u64::try_from(failover.as_millis()).unwrap());
        for (c, ms) in recovered {
            self.clients
                .entry(c)
                .or_default()
                .entry(kind)
                .or_default()
                .push(ms);
        }
    }

    /// Prints the medians as a Markdown table, columns `valkyrie` and
    /// `sentinel` headed `valkyrie` and `sentinel`.
    pub fn print(&self, title: &str, valkyrie: &str, sentinel: &str) {
        let median = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v[v.len() / 2]
        };
        println!("{title}");
        println!("| client | {valkyrie} | {sentinel} | ratio |");
        for (c, by_kind) in &self.clients {
            let v = median(&by_kind["valkyrie"]);
            let s = median(&by_kind["sentinel"]);
            #[allow(clippy::cast_precision_loss)]
            let ratio = v as f64 / s.max(1) as f64;
            println!("| {c} | {v} | {s} | {ratio:.2}× |");
        }
        println!(
            "| (failover settled on every sentinel) | {} | {} | |",
            median(&self.failovers["valkyrie"]),
            median(&self.failovers["sentinel"])
        );
    }
}
