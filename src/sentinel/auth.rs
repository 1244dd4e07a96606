//! Authentication and authorization on the Sentinel port: the port's
//! [`Acl`] (users from `requirepass` and `user` lines, or as last changed
//! by `ACL SETUSER`/`DELUSER`), the ACL log, and failed-login accounting.
//!
//! Every request of an authenticated connection is checked against the
//! user's command and channel rules ([`Security::authorize`]), with
//! Valkey's `-NOPERM` texts. Passwords are kept as SHA-256 digests and
//! compared in constant time. Failed logins are counted
//! (`valkyrie_sentinel_auth_failures_total`) and logged at most once per
//! [`FAILURE_LOG_EVERY`]; the connection loop slows a connection down after
//! each failure (see `connection/`).

use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::acl::{Acl, Log, Refusal};
use crate::config::Config;

/// At most one log line about failed logins per this period.
pub const FAILURE_LOG_EVERY: Duration = Duration::from_secs(10);

/// Who may connect and what they may run.
#[derive(Debug, Default)]
pub struct Security {
    acl: RwLock<Acl>,
    log: Mutex<Log>,
    /// Serializes ACL changes from their check to their save in the state
    /// file, so the file always ends with the latest ACL.
    pub write: tokio::sync::Mutex<()>,
    failures: Mutex<FailureLog>,
    /// `protected-mode`.
    protected: bool,
}

#[derive(Debug, Default)]
struct FailureLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl Security {
    /// From `requirepass` and `user` lines, or the saved ACL.
    pub fn from_config(config: &Config) -> Security {
        Security {
            acl: RwLock::new(Acl::from_config(config)),
            protected: config.protected_mode,
            ..Security::default()
        }
    }

    /// Whether protected mode holds for a client at `ip` logged in as
    /// `user`: `protected-mode yes`, the client is the password-less
    /// default user, and it is not on the loopback. Such a client may only
    /// read ([`crate::sentinel::protected`]).
    pub fn protects(&self, user: Option<&str>, ip: std::net::IpAddr) -> bool {
        let loopback = match ip {
            std::net::IpAddr::V6(v6) => {
                v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
            v4 => v4.is_loopback(),
        };
        self.protected && user == Some("default") && !loopback && self.open()
    }

    /// The users, to read.
    pub fn acl(&self) -> RwLockReadGuard<'_, Acl> {
        self.acl.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The users, to change (hold [`Security::write`] across the save).
    pub fn acl_mut(&self) -> RwLockWriteGuard<'_, Acl> {
        self.acl.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The ACL log.
    pub fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a new connection starts authenticated (as `default`).
    pub fn open(&self) -> bool {
        self.acl().user("default").is_some_and(|u| u.open())
    }

    /// Whether the default user needs a password (`AUTH <password>` is
    /// refused otherwise, with Valkey's text).
    pub fn default_has_password(&self) -> bool {
        self.acl().user("default").is_some_and(|u| u.has_password())
    }

    /// Checks credentials (digests compared in constant time). A failure
    /// is counted, logged (rate-limited, never the password) and written
    /// to the ACL log.
    pub fn check(&self, user: &str, password: &[u8], client_info: impl FnOnce() -> String) -> bool {
        if self.acl().authenticate(user, password) {
            return true;
        }
        crate::metrics::sentinel_auth_failure();
        self.log().add("auth", "AUTH", user, client_info());
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        f.unlogged += 1;
        if f.last.is_none_or(|l| l.elapsed() >= FAILURE_LOG_EVERY) {
            tracing::warn!(
                user,
                failures = f.unlogged,
                "failed authentication on the Sentinel port (wrong password or unknown or \
                 disabled user); counted in valkyrie_sentinel_auth_failures_total"
            );
            f.last = Some(Instant::now());
            f.unlogged = 0;
        }
        false
    }

    /// Checks a request of `user`; a refusal is written to the ACL log.
    pub fn authorize(
        &self,
        user: &str,
        args: &[&[u8]],
        client_info: impl FnOnce() -> String,
    ) -> Result<(), String> {
        match self.acl().authorize(user, args) {
            Ok(()) => Ok(()),
            Err(Refusal {
                error,
                reason,
                object,
            }) => {
                self.log().add(reason, &object, user, client_info());
                Err(error)
            }
        }
    }

    /// Whether `user` exists (`CLIENT KILL USER`).
    pub fn has_user(&self, user: &str) -> bool {
        self.acl().user(user).is_some()
    }
}
