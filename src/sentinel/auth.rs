//! Authentication on the Sentinel port: `requirepass` (the default user's
//! password) and ACL `user` lines, with Valkey's error texts.
//!
//! Supported user rules: `on`/`off`, `>password`, `nopass`, `resetpass`.
//! Command and key permissions are accepted and not enforced: the Sentinel
//! port has no data to protect, only topology (documented).

use std::collections::BTreeMap;

use crate::config::Config;

/// Who may connect.
#[derive(Debug, Clone, Default)]
pub struct Security {
    users: BTreeMap<String, User>,
}

#[derive(Debug, Clone)]
struct User {
    enabled: bool,
    nopass: bool,
    passwords: Vec<String>,
}

impl Security {
    /// From `requirepass` and `user` lines.
    pub fn from_config(config: &Config) -> Security {
        let mut users = BTreeMap::new();
        // The default user: no password unless `requirepass` says so.
        users.insert(
            "default".to_string(),
            User {
                enabled: true,
                nopass: config.requirepass.is_none(),
                passwords: config
                    .requirepass
                    .iter()
                    .map(|p| p.expose().to_string())
                    .collect(),
            },
        );
        for rule in &config.users {
            let u = users.entry(rule.name.clone()).or_insert(User {
                enabled: false,
                nopass: false,
                passwords: Vec::new(),
            });
            for r in &rule.rules {
                match r.as_str() {
                    "on" => u.enabled = true,
                    "off" => u.enabled = false,
                    "nopass" => {
                        u.nopass = true;
                        u.passwords.clear();
                    }
                    "resetpass" => {
                        u.nopass = false;
                        u.passwords.clear();
                    }
                    p if p.starts_with('>') => {
                        u.nopass = false;
                        u.passwords.push(p[1..].to_string());
                    }
                    _ => {}
                }
            }
        }
        Security { users }
    }

    /// Whether a new connection starts authenticated (as `default`).
    pub fn open(&self) -> bool {
        self.users
            .get("default")
            .is_some_and(|u| u.enabled && u.nopass)
    }

    /// Whether any password is configured for the default user.
    pub fn default_has_password(&self) -> bool {
        self.users
            .get("default")
            .is_some_and(|u| !u.nopass && !u.passwords.is_empty())
    }

    /// Checks credentials.
    pub fn check(&self, user: &str, password: &str) -> bool {
        self.users
            .get(user)
            .is_some_and(|u| u.enabled && (u.nopass || u.passwords.iter().any(|p| p == password)))
    }

    /// Whether `user` exists (`CLIENT KILL USER`).
    pub fn has_user(&self, user: &str) -> bool {
        self.users.contains_key(user)
    }
}
