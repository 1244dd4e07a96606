//! Plain data the core reasons about: addresses, time, link failures and
//! parsed `INFO` / `ROLE` replies.

use std::fmt;

/// Monotonic time in milliseconds. The core never reads a clock: the shell
/// passes the time in with every input.
pub type Millis = u64;

/// A Valkey instance address as announced (host or IP, and port).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr {
    /// Host name or IP address.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Addr {
    /// An address.
    pub fn new(host: impl Into<String>, port: u16) -> Addr {
        Addr {
            host: host.into(),
            port,
        }
    }
}

pub use valkyrie_protocol::peer::{HostError, MAX_HOST_LEN, check_host};

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// How a link to an instance failed. The kind decides whether replicas are
/// asked to vouch for a master before it is failed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkFailure {
    /// The connection was refused: the host is up, the process is not.
    Refused,
    /// Connecting timed out: the instance, or our path to it, is gone.
    ConnectTimeout,
    /// An established connection was reset or closed.
    Reset,
    /// A fresh connection succeeded but nothing answered: a hung process.
    Silent,
    /// An established connection that had answered stopped answering.
    /// This proves nothing by itself: the process may be hung, or only our
    /// path to it may be gone. The link reconnects at once, and the fresh
    /// connect classifies it (`Silent`, `ConnectTimeout`, `Refused`, …).
    Stalled,
}

impl LinkFailure {
    /// Whether this failure leaves open that only we are cut off: only then
    /// may replicas veto a failover.
    pub fn is_unreachable(self) -> bool {
        matches!(self, LinkFailure::ConnectTimeout | LinkFailure::Stalled)
    }

    /// Whether a fresh connect has yet to classify this failure.
    pub fn is_unclassified(self) -> bool {
        matches!(self, LinkFailure::Stalled)
    }
}

/// The replication role an instance reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A master, with the replicas it lists.
    Master,
    /// A replica of `master`.
    Replica {
        /// The master it replicates from (`master_host`/`master_port`).
        master: Addr,
        /// `master_link_status:up`.
        link_up: bool,
        /// `master_link_down_since_seconds`, when the link is down.
        link_down_secs: Option<u64>,
        /// `master_last_io_seconds_ago`, when the link is up.
        last_io_secs: Option<u64>,
        /// `master_sync_in_progress:1`.
        sync_in_progress: bool,
    },
}

/// What the core needs from `INFO server replication keyspace`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InfoReport {
    /// `run_id`: changes on every process start.
    pub run_id: String,
    /// The reported role.
    pub role: Role,
    /// `master_repl_offset` (or `slave_repl_offset` on a replica).
    pub offset: u64,
    /// `replica-priority` (`slave_priority`); 0 means never promote.
    pub priority: u32,
    /// `replica_announced` (`replica-announced`, true unless a replica
    /// says 0): an unannounced replica is monitored and may be promoted,
    /// but `SENTINEL REPLICAS` and the index port do not list it.
    pub announced: bool,
    /// `master_replid`.
    pub replid: String,
    /// Replicas a master lists (`slaveN:ip=…,port=…,state=…,offset=…`).
    pub replicas: Vec<ListedReplica>,
    /// Keys over all databases (`# Keyspace`), when the section was sent.
    pub keys: Option<u64>,
}

/// A replica as listed in a master's INFO.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ListedReplica {
    /// Its announced address.
    pub addr: Addr,
    /// Its acknowledged offset.
    pub offset: u64,
    /// `state=online`.
    pub online: bool,
    /// `lag=`: seconds since its last acknowledgement, as the master
    /// counts it for `min-replicas-max-lag` (absent from old servers).
    pub lag: Option<u64>,
}

/// Why an INFO reply could not be understood.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unusable INFO reply: {0}")]
pub struct InfoError(pub String);

impl InfoReport {
    /// Parses the text of an `INFO` reply (any sections; the server,
    /// replication and keyspace ones are read).
    pub fn parse(text: &str) -> Result<InfoReport, InfoError> {
        let mut run_id = None;
        let mut role = None;
        let mut master_host = None;
        let mut master_port = None;
        let mut link_up = false;
        let mut link_down_secs = None;
        let mut last_io_secs = None;
        let mut sync = false;
        let mut master_offset = None;
        let mut replica_offset = None;
        let mut priority = 100;
        let mut announced = true;
        let mut replid = String::new();
        let mut replicas = Vec::new();
        let mut keys: Option<u64> = None;
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if line == "# Keyspace" {
                keys = Some(0);
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            match key {
                "run_id" => run_id = Some(value.to_string()),
                "role" => role = Some(value.to_string()),
                "master_host" => master_host = Some(value.to_string()),
                "master_port" => master_port = value.parse::<u16>().ok(),
                "master_link_status" => link_up = value == "up",
                "master_link_down_since_seconds" => link_down_secs = value.parse().ok(),
                "master_last_io_seconds_ago" => last_io_secs = value.parse().ok(),
                "master_sync_in_progress" => sync = value == "1",
                "master_repl_offset" => master_offset = value.parse().ok(),
                "slave_repl_offset" => replica_offset = value.parse().ok(),
                "slave_priority" | "replica_priority" => {
                    priority = value.parse().unwrap_or(priority)
                }
                "replica_announced" => announced = value != "0",
                "master_replid" => replid = value.to_string(),
                k if k.starts_with("slave") && k[5..].bytes().all(|b| b.is_ascii_digit()) => {
                    if let Some(r) = parse_listed(value) {
                        replicas.push(r);
                    }
                }
                k if k.starts_with("db") && k[2..].bytes().all(|b| b.is_ascii_digit()) => {
                    let n = value
                        .split(',')
                        .find_map(|kv| kv.strip_prefix("keys="))
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                    keys = Some(keys.unwrap_or(0).saturating_add(n));
                }
                _ => {}
            }
        }
        let run_id = run_id.ok_or_else(|| InfoError("no run_id".into()))?;
        let role = match role.as_deref() {
            Some("master") => Role::Master,
            Some("slave") | Some("replica") => Role::Replica {
                master: Addr::new(
                    master_host.ok_or_else(|| InfoError("replica without master_host".into()))?,
                    master_port.ok_or_else(|| InfoError("replica without master_port".into()))?,
                ),
                link_up,
                link_down_secs: if link_up { None } else { link_down_secs },
                last_io_secs: if link_up { last_io_secs } else { None },
                sync_in_progress: sync,
            },
            other => return Err(InfoError(format!("unknown role {other:?}"))),
        };
        let offset = match role {
            Role::Master => master_offset.unwrap_or(0),
            Role::Replica { .. } => replica_offset.or(master_offset).unwrap_or(0),
        };
        Ok(InfoReport {
            run_id,
            role,
            offset,
            priority,
            announced,
            replid,
            replicas,
            keys,
        })
    }
}

fn parse_listed(value: &str) -> Option<ListedReplica> {
    let mut ip = None;
    let mut port = None;
    let mut offset = 0;
    let mut online = false;
    let mut lag = None;
    for kv in value.split(',') {
        match kv.split_once('=')? {
            ("ip", v) => ip = Some(v.to_string()),
            ("port", v) => port = v.parse().ok(),
            ("offset", v) => offset = v.parse().unwrap_or(0),
            ("state", v) => online = v == "online",
            ("lag", v) => lag = v.parse().ok(),
            _ => {}
        }
    }
    Some(ListedReplica {
        addr: Addr::new(ip?, port?),
        offset,
        online,
        lag,
    })
}
