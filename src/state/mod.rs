//! The persisted state file: epochs, advertised masters, fenced old
//! masters and any failover in flight, written atomically.
//!
//! Writes go to a temporary file in the same directory, are fsynced,
//! renamed over the old file, and the directory is fsynced, so after a crash
//! at any instant the file holds either the old or the new state, never a
//! mix. The core emits `Persist` before the commands that depend on it; the
//! runtime calls [`StateFile::save`] and only then carries on.
//!
//! The format is JSON with a version number, so it can be read by people
//! and evolve compatibly.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::{Addr, GroupState, PersistedFailover, State};

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
}

#[derive(Serialize, Deserialize)]
struct Disk {
    version: u32,
    groups: BTreeMap<String, DiskGroup>,
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
    #[serde(default)]
    failover: Option<DiskFailover>,
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

fn addr_str(a: &Addr) -> String {
    // host:port, with IPv6 literals in brackets so the last colon splits.
    if a.host.contains(':') {
        format!("[{}]:{}", a.host, a.port)
    } else {
        format!("{}:{}", a.host, a.port)
    }
}

fn parse_addr(s: &str) -> Option<Addr> {
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some(Addr::new(host, port.parse().ok()?))
}

impl StateFile {
    /// The state file in `dir`.
    pub fn in_dir(dir: &Path) -> StateFile {
        StateFile {
            path: dir.join(FILE_NAME),
        }
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
        let addr = |s: &str| parse_addr(s).ok_or_else(|| corrupt(format!("bad address {s:?}")));
        let mut groups = BTreeMap::new();
        for (name, g) in disk.groups {
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
                    failover,
                },
            );
        }
        Ok(Some(State { groups }))
    }

    /// Writes `state` atomically and durably.
    pub fn save(&self, state: &State) -> Result<(), StateError> {
        let disk = Disk {
            version: VERSION,
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
                            failover: g.failover.as_ref().map(|f| DiskFailover {
                                epoch: f.epoch,
                                old_master: addr_str(&f.old_master),
                                promoted: addr_str(&f.promoted),
                                confirmed: f.confirmed,
                                min_offset: f.min_offset,
                            }),
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
            let mut f = File::create(&tmp).map_err(|e| self.io(e))?;
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

#[cfg(test)]
mod tests;
