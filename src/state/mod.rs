//! The persisted state file: epochs, advertised masters, fenced old
//! masters and any failover in flight, written atomically.
//!
//! Writes go to a temporary file in the same directory, are fsynced,
//! renamed over the old file, and the directory is fsynced, so after a crash
//! at any instant the file holds either the old or the new state, never a
//! mix. The core emits `Persist` before the commands that depend on it; the
//! runtime calls [`StateFile::save`] and only then carries on.
//!
//! The daemon's id (`SENTINEL MYID`) is kept here too, so it survives
//! restarts as Sentinel's `sentinel myid` line does; every save writes the
//! id the [`StateFile`] was given with [`StateFile::with_myid`].
//!
//! The format is JSON with a version number, so it can be read by people
//! and evolve compatibly.
//!
//! Monitoring changed at runtime (`SENTINEL MONITOR`, `REMOVE`, `SET`,
//! `CONFIG SET`, `FLUSHCONFIG`) is saved here too, as a [`RuntimeConfig`]:
//! Valkyrie never rewrites the operator's configuration file (it may be
//! read-only, e.g. a Kubernetes ConfigMap). Once saved, it replaces the
//! file's groups and Sentinel settings at the next start. The file is
//! created with mode 0600 because it may then hold `auth-pass` values.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{Config, GroupConfig, GroupOwner, GroupTls, Secret, UserRule};
use crate::core::peering::is_runid;
use crate::core::{Addr, GroupState, KnownPeer, PersistedFailover, State};

/// The file name under the configured `dir`.
pub const FILE_NAME: &str = "valkyrie-state.json";
const VERSION: u32 = 1;

/// Errors reading or writing the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// I/O failed.
    #[error("state file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The file exists but is not a state file we can read.
    #[error("state file {path} is unreadable: {message}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// The state file of one daemon.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
    myid: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Disk {
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    myid: Option<String>,
    groups: BTreeMap<String, DiskGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<DiskConfig>,
    /// The global current epoch.
    #[serde(default)]
    current_epoch: u64,
}

/// The monitoring configuration as changed at runtime; it replaces the
/// configuration file's groups and Sentinel settings once saved.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeConfig {
    /// The monitored groups.
    pub groups: Vec<GroupConfig>,
    /// `announce-ip`.
    pub announce_ip: Option<String>,
    /// `announce-port`.
    pub announce_port: u16,
    /// `resolve-hostnames`.
    pub resolve_hostnames: bool,
    /// `announce-hostnames`.
    pub announce_hostnames: bool,
    /// `sentinel-user`.
    pub sentinel_user: Option<String>,
    /// `sentinel-pass`.
    pub sentinel_pass: Option<Secret>,
    /// `loglevel`.
    pub loglevel: String,
    /// The Sentinel port's ACL, once changed by `ACL SETUSER`/`DELUSER`:
    /// `user` lines whose passwords are SHA-256 digests (`#…`).
    pub acl: Option<Vec<UserRule>>,
}

impl RuntimeConfig {
    /// What `config` currently says.
    pub fn of(config: &Config) -> RuntimeConfig {
        RuntimeConfig {
            groups: config.groups.clone(),
            announce_ip: config.announce_ip.clone(),
            announce_port: config.announce_port,
            resolve_hostnames: config.resolve_hostnames,
            announce_hostnames: config.announce_hostnames,
            sentinel_user: config.sentinel_user.clone(),
            sentinel_pass: config.sentinel_pass.clone(),
            loglevel: config.loglevel.clone(),
            acl: config.acl.clone(),
        }
    }

    /// Replaces what `config` says with this. Under
    /// `deny-scripts-reconfig yes` the scripts stay the file's: a path
    /// saved under `no` is ignored (with a warning), so that only whoever
    /// writes the file names what runs.
    pub fn apply(&self, config: &mut Config) {
        let mut groups = self.groups.clone();
        if config.deny_scripts_reconfig {
            for g in &mut groups {
                let file = config.groups.iter().find(|f| f.name == g.name);
                let notification = file.and_then(|f| f.notification_script.clone());
                let reconfig = file.and_then(|f| f.client_reconfig_script.clone());
                if g.notification_script != notification || g.client_reconfig_script != reconfig {
                    tracing::warn!(
                        group = %g.name,
                        "the state file names other scripts than the configuration file: \
                         ignored (deny-scripts-reconfig yes)"
                    );
                }
                g.notification_script = notification;
                g.client_reconfig_script = reconfig;
            }
        }
        config.groups = groups;
        config.announce_ip.clone_from(&self.announce_ip);
        config.announce_port = self.announce_port;
        config.resolve_hostnames = self.resolve_hostnames;
        config.announce_hostnames = self.announce_hostnames;
        config.sentinel_user.clone_from(&self.sentinel_user);
        config.sentinel_pass.clone_from(&self.sentinel_pass);
        config.loglevel.clone_from(&self.loglevel);
        config.acl.clone_from(&self.acl);
    }
}

/// Everything the file holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Saved {
    /// The core's state.
    pub state: State,
    /// Monitoring changed at runtime, if it ever was.
    pub config: Option<RuntimeConfig>,
    /// The daemon's id, once it was saved.
    pub myid: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct DiskConfig {
    groups: Vec<DiskMonitor>,
    announce_ip: Option<String>,
    announce_port: u16,
    resolve_hostnames: bool,
    announce_hostnames: bool,
    sentinel_user: Option<String>,
    sentinel_pass: Option<String>,
    loglevel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acl: Option<Vec<DiskUser>>,
}

/// One ACL user: name and rules (`ACL LIST` form, digests only).
#[derive(Serialize, Deserialize)]
struct DiskUser {
    name: String,
    rules: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct DiskMonitor {
    name: String,
    host: String,
    port: u16,
    quorum: u32,
    down_after_ms: u64,
    failover_timeout_ms: u64,
    parallel_syncs: u32,
    auth_user: Option<String>,
    auth_pass: Option<String>,
    #[serde(default)]
    master_reboot_down_after_period_ms: u64,
    /// `write-fence` (absent: off, as in files written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_fence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_fence_lag_secs: Option<u64>,
    #[serde(default)]
    known_replicas: Vec<String>,
    #[serde(default)]
    renamed_commands: Vec<(String, String)>,
    /// The custom resource that owns the group (absent: the configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kubernetes: Option<DiskOwner>,
    /// Where the group's own TLS material comes from (a CR's Secret); the
    /// material itself is never written here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tls_source: Option<String>,
    /// `notification-script` and `client-reconfig-script` (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    notification_script: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_reconfig_script: Option<String>,
}

/// A group's owning `ValkeyCluster`.
#[derive(Serialize, Deserialize)]
struct DiskOwner {
    namespace: String,
    name: String,
    /// The resource's labels, so that a label selector selects the group
    /// from the start, before the resource is seen again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl DiskConfig {
    fn of(c: &RuntimeConfig) -> DiskConfig {
        DiskConfig {
            groups: c
                .groups
                .iter()
                .map(|g| DiskMonitor {
                    name: g.name.clone(),
                    host: g.host.clone(),
                    port: g.port,
                    quorum: g.quorum,
                    down_after_ms: ms(g.down_after),
                    failover_timeout_ms: ms(g.failover_timeout),
                    parallel_syncs: g.parallel_syncs,
                    auth_user: g.auth_user.clone(),
                    auth_pass: g.auth_pass.as_ref().map(|p| p.expose().to_string()),
                    master_reboot_down_after_period_ms: ms(g.master_reboot_down_after_period),
                    write_fence: Some(g.write_fence.mode.as_str().to_string()),
                    write_fence_lag_secs: Some(g.write_fence.lag_secs),
                    known_replicas: g
                        .known_replicas
                        .iter()
                        .map(|(h, p)| addr_str(&Addr::new(h.clone(), *p)))
                        .collect(),
                    renamed_commands: g.renamed_commands.clone(),
                    kubernetes: match &g.owner {
                        GroupOwner::Config => None,
                        GroupOwner::Kubernetes {
                            namespace,
                            name,
                            labels,
                        } => Some(DiskOwner {
                            namespace: namespace.clone(),
                            name: name.clone(),
                            labels: labels.clone(),
                        }),
                    },
                    tls_source: g.tls.as_ref().map(|t| t.source.clone()),
                    notification_script: g.notification_script.clone(),
                    client_reconfig_script: g.client_reconfig_script.clone(),
                })
                .collect(),
            announce_ip: c.announce_ip.clone(),
            announce_port: c.announce_port,
            resolve_hostnames: c.resolve_hostnames,
            announce_hostnames: c.announce_hostnames,
            sentinel_user: c.sentinel_user.clone(),
            sentinel_pass: c.sentinel_pass.as_ref().map(|p| p.expose().to_string()),
            loglevel: c.loglevel.clone(),
            acl: c.acl.as_ref().map(|users| {
                users
                    .iter()
                    .map(|u| DiskUser {
                        name: u.name.clone(),
                        rules: u.rules.clone(),
                    })
                    .collect()
            }),
        }
    }

    fn into_runtime(self) -> Result<RuntimeConfig, String> {
        let mut groups = Vec::with_capacity(self.groups.len());
        for m in self.groups {
            if !crate::config::valid_name(&m.name) || !crate::config::valid_name(&m.host) {
                return Err(format!(
                    "master {:?} at {:?}: names and hosts cannot contain spaces, newlines \
                     or special characters",
                    m.name, m.host
                ));
            }
            let mut g = GroupConfig::new(m.name, m.host, m.port, m.quorum);
            g.down_after = Duration::from_millis(m.down_after_ms);
            g.failover_timeout = Duration::from_millis(m.failover_timeout_ms);
            g.parallel_syncs = m.parallel_syncs;
            g.auth_user = m.auth_user;
            g.auth_pass = m.auth_pass.map(Secret::new);
            g.master_reboot_down_after_period =
                Duration::from_millis(m.master_reboot_down_after_period_ms);
            if let Some(mode) = &m.write_fence {
                g.write_fence.mode = crate::core::FenceMode::parse(mode)
                    .ok_or_else(|| format!("bad write-fence {mode:?}"))?;
            }
            if let Some(lag) = m.write_fence_lag_secs {
                g.write_fence.lag_secs = crate::config::fence_lag(&lag.to_string())?;
            }
            for r in &m.known_replicas {
                let a = parse_addr(r).ok_or_else(|| format!("bad address {r:?}"))?;
                g.known_replicas.push((a.host, a.port));
            }
            g.renamed_commands = m.renamed_commands;
            if let Some(o) = m.kubernetes {
                g.owner = GroupOwner::Kubernetes {
                    namespace: o.namespace,
                    name: o.name,
                    labels: o.labels,
                };
            }
            g.tls = m.tls_source.map(GroupTls::pending);
            g.notification_script = m.notification_script;
            g.client_reconfig_script = m.client_reconfig_script;
            groups.push(g);
        }
        Ok(RuntimeConfig {
            groups,
            announce_ip: self.announce_ip,
            announce_port: self.announce_port,
            resolve_hostnames: self.resolve_hostnames,
            announce_hostnames: self.announce_hostnames,
            sentinel_user: self.sentinel_user,
            sentinel_pass: self.sentinel_pass.map(Secret::new),
            loglevel: self.loglevel,
            acl: self.acl.map(|users| {
                users
                    .into_iter()
                    .map(|u| UserRule {
                        name: u.name,
                        rules: u.rules,
                    })
                    .collect()
            }),
        })
    }
}

#[derive(Serialize, Deserialize)]
struct DiskGroup {
    epoch: u64,
    #[serde(default)]
    config_epoch: u64,
    master: String,
    #[serde(default)]
    demoted: Vec<String>,
    #[serde(default)]
    master_lost: Option<String>,
    /// Paused by an operator (written only when it is).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    paused: bool,
    #[serde(default)]
    failover: Option<DiskFailover>,
    /// Our vote: the run id ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    leader: Option<String>,
    /// ... and its epoch.
    #[serde(default)]
    leader_epoch: u64,
    /// Known peer sentinels: `[runid, "host:port"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    known_peers: Vec<(String, String)>,
    #[serde(default)]
    peered: bool,
    /// The group's other known instances, `"host:port"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    replicas: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct DiskFailover {
    epoch: u64,
    old_master: String,
    promoted: String,
    confirmed: bool,
    #[serde(default)]
    min_offset: u64,
}

/// The largest epoch a state file may hold: Sentinel prints epochs as
/// signed 64-bit numbers in replies clients parse (`INFO`, `SENTINEL
/// MASTER`), so a larger one would be read back negative or refused.
pub const MAX_EPOCH: u64 = i64::MAX as u64;

fn addr_str(a: &Addr) -> String {
    // host:port, with IPv6 literals in brackets so the last colon splits.
    if a.host.contains(':') {
        format!("[{}]:{}", a.host, a.port)
    } else {
        format!("{}:{}", a.host, a.port)
    }
}

/// `host:port` (`[v6]:port`), the host printable ASCII (a host name is
/// taken: whether it may be one is the configuration's business).
fn parse_addr(s: &str) -> Option<Addr> {
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    crate::core::check_host(host, true).ok()?;
    let port: u16 = port.parse().ok()?;
    (port > 0).then(|| Addr::new(host, port))
}

/// The saved peers that pass today's checks: a 40-hex run id and a
/// printable address. Others (saved before peers were checked: a forged
/// hello's) are dropped with a warning rather than refuse the whole file.
fn known_peers(group: &str, saved: &[(String, String)]) -> Vec<KnownPeer> {
    let mut peers = Vec::with_capacity(saved.len());
    for (runid, a) in saved {
        match parse_addr(a) {
            Some(addr) if is_runid(runid) => peers.push(KnownPeer {
                runid: runid.to_ascii_lowercase(),
                addr,
            }),
            _ => tracing::warn!(
                group = %group,
                "a saved peer with run id {:?} at {:?} is dropped: not a 40-hex run id and \
                 a printable address",
                runid.chars().take(48).collect::<String>(),
                a.chars().take(48).collect::<String>()
            ),
        }
    }
    peers
}

impl StateFile {
    /// The state file in `dir`.
    pub fn in_dir(dir: &Path) -> StateFile {
        StateFile {
            path: dir.join(FILE_NAME),
            myid: None,
        }
    }

    /// The same file, whose saves also hold the daemon's id.
    #[must_use]
    pub fn with_myid(mut self, myid: &str) -> StateFile {
        self.myid = Some(myid.to_string());
        self
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> StateError {
        StateError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Reads the state; `None` when there is no file yet.
    pub fn load(&self) -> Result<Option<State>, StateError> {
        Ok(self.load_saved()?.map(|s| s.state))
    }

    /// Reads the state and any runtime configuration; `None` when there is
    /// no file yet.
    pub fn load_saved(&self) -> Result<Option<Saved>, StateError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        let corrupt = |message: String| StateError::Corrupt {
            path: self.path.display().to_string(),
            message,
        };
        let disk: Disk = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if disk.version != VERSION {
            return Err(corrupt(format!("unknown version {}", disk.version)));
        }
        if let Some(id) = &disk.myid
            && !crate::config::valid_myid(id)
        {
            return Err(corrupt(format!(
                "myid {id:?} is not 40 hexadecimal characters"
            )));
        }
        let addr = |s: &str| parse_addr(s).ok_or_else(|| corrupt(format!("bad address {s:?}")));
        let mut groups = BTreeMap::new();
        for (name, g) in disk.groups {
            let failover_epoch = g.failover.as_ref().map(|f| f.epoch);
            for (field, value) in [
                ("epoch", Some(g.epoch)),
                ("config_epoch", Some(g.config_epoch)),
                ("failover.epoch", failover_epoch),
                ("leader_epoch", Some(g.leader_epoch)),
            ] {
                if let Some(v) = value
                    && v > MAX_EPOCH
                {
                    return Err(corrupt(format!(
                        "group {name:?}: {field} {v} is above {MAX_EPOCH}, the largest epoch \
                         Sentinel's signed replies can carry"
                    )));
                }
            }
            let known_peers = known_peers(&name, &g.known_peers);
            let failover = match g.failover {
                Some(f) => Some(PersistedFailover {
                    epoch: f.epoch,
                    old_master: addr(&f.old_master)?,
                    promoted: addr(&f.promoted)?,
                    confirmed: f.confirmed,
                    min_offset: f.min_offset,
                }),
                None => None,
            };
            groups.insert(
                name,
                GroupState {
                    epoch: g.epoch,
                    config_epoch: g.config_epoch,
                    master: addr(&g.master)?,
                    demoted: g
                        .demoted
                        .iter()
                        .map(|d| addr(d))
                        .collect::<Result<_, _>>()?,
                    master_lost: g.master_lost.clone(),
                    paused: g.paused,
                    failover,
                    // A vote for something that is no run id (saved before
                    // votes were checked) is dropped; its epoch stays, so
                    // no second vote is granted in it.
                    leader: g.leader.clone().filter(|l| is_runid(l)),
                    leader_epoch: g.leader_epoch,
                    known_peers,
                    peered: g.peered,
                    replicas: g
                        .replicas
                        .iter()
                        .map(|r| addr(r))
                        .collect::<Result<_, _>>()?,
                },
            );
        }
        if disk.current_epoch > MAX_EPOCH {
            return Err(corrupt(format!(
                "current_epoch {} is above {MAX_EPOCH}",
                disk.current_epoch
            )));
        }
        let config = match disk.config {
            Some(c) => Some(c.into_runtime().map_err(corrupt)?),
            None => None,
        };
        Ok(Some(Saved {
            state: State {
                groups,
                current_epoch: disk.current_epoch,
            },
            config,
            myid: disk.myid,
        }))
    }

    /// Writes `state` atomically and durably, without runtime configuration.
    pub fn save(&self, state: &State) -> Result<(), StateError> {
        self.save_with(state, None)
    }

    /// Writes `state` and the runtime configuration, if any, atomically and
    /// durably.
    pub fn save_with(
        &self,
        state: &State,
        config: Option<&RuntimeConfig>,
    ) -> Result<(), StateError> {
        let disk = Disk {
            config: config.map(DiskConfig::of),
            version: VERSION,
            myid: self.myid.clone(),
            current_epoch: state.current_epoch,
            groups: state
                .groups
                .iter()
                .map(|(name, g)| {
                    (
                        name.clone(),
                        DiskGroup {
                            epoch: g.epoch,
                            config_epoch: g.config_epoch,
                            master: addr_str(&g.master),
                            demoted: g.demoted.iter().map(addr_str).collect(),
                            master_lost: g.master_lost.clone(),
                            paused: g.paused,
                            failover: g.failover.as_ref().map(|f| DiskFailover {
                                epoch: f.epoch,
                                old_master: addr_str(&f.old_master),
                                promoted: addr_str(&f.promoted),
                                confirmed: f.confirmed,
                                min_offset: f.min_offset,
                            }),
                            leader: g.leader.clone(),
                            leader_epoch: g.leader_epoch,
                            known_peers: g
                                .known_peers
                                .iter()
                                .map(|p| (p.runid.clone(), addr_str(&p.addr)))
                                .collect(),
                            peered: g.peered,
                            replicas: g.replicas.iter().map(addr_str).collect(),
                        },
                    )
                })
                .collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&disk).map_err(|e| StateError::Corrupt {
            path: self.path.display().to_string(),
            message: e.to_string(),
        })?;
        bytes.push(b'\n');
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let tmp = self.path.with_extension("json.tmp");
        {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| self.io(e))?;
            f.write_all(&bytes).map_err(|e| self.io(e))?;
            f.sync_all().map_err(|e| self.io(e))?;
        }
        fs::rename(&tmp, &self.path).map_err(|e| self.io(e))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io(e))?;
        Ok(())
    }
}

/// Warns when `file` does not exist but its directory holds other
/// entries: more likely a daemon that ran here before lost its state (a
/// deleted file, a volume mounted elsewhere) than a first start. The
/// daemon then starts afresh — epochs from 0, masters from the
/// configuration — which is what the log line says. Returns whether it
/// warned.
pub fn warn_if_missing(file: &StateFile) -> bool {
    let dir = file.path().parent().unwrap_or(Path::new("."));
    let others: Vec<String> = match fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .take(5)
            .collect(),
        Err(_) => Vec::new(),
    };
    if others.is_empty() {
        return false;
    }
    tracing::warn!(
        dir = %dir.display(),
        entries = ?others,
        "no state file ({FILE_NAME}) but its directory is not empty: if Valkyrie ran here \
         before, its state (epochs, current masters, a failover in flight) is lost and it \
         starts afresh from the configuration file"
    );
    true
}

pub mod myid;
#[cfg(test)]
mod tests;
