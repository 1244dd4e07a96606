//! Valkey's ACL on the Sentinel port: users, their command and channel
//! rules, the permission check every request goes through, and the ACL
//! log.
//!
//! - [`categories`] owns the command table (ids, arity, categories);
//! - [`rules`] owns one user: applying rules, checking a command,
//!   describing the user as `ACL LIST` does;
//! - this module owns the set of users ([`Acl`]), built from `requirepass`
//!   and `user` lines (or from the state file once `ACL SETUSER`/`DELUSER`
//!   changed them), and the ACL log ([`Log`]).
//!
//! Behaviour and texts are Valkey 8.0.1's (`acl.c`), proven side by side
//! with a real `valkey-sentinel` in `tests/sentinel/acl_differential.rs`.

pub mod categories;
pub mod log;
pub mod rules;
pub mod user;

use std::collections::BTreeMap;

use crate::config::{Config, UserRule};
use crate::sentinel::commands;
pub use log::Log;
pub use rules::Denial;
pub use user::User;

/// A permission refusal: Valkey's error text and what the ACL log records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The error reply, without the leading `-`.
    pub error: String,
    /// `command` or `channel`.
    pub reason: &'static str,
    /// The command's full name or the channel.
    pub object: String,
}

/// The users of one Sentinel port.
#[derive(Debug, Clone)]
pub struct Acl {
    users: BTreeMap<String, User>,
}

impl Default for Acl {
    fn default() -> Acl {
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), User::default_user());
        Acl { users }
    }
}

impl Acl {
    /// From the configuration: `requirepass` sets the default user's
    /// password, then the `user` lines apply in order (a `user default`
    /// line starts from `reset`, as Valkey loads it). When the ACL was
    /// changed at runtime, `config.acl` (restored from the state file)
    /// replaces both.
    pub fn from_config(config: &Config) -> Acl {
        let mut acl = Acl::default();
        let lines: &[UserRule] = match &config.acl {
            Some(saved) => saved,
            None => {
                if let (Some(pass), Some(d)) = (&config.requirepass, acl.users.get_mut("default")) {
                    let _ = d.apply("resetpass");
                    let _ = d.apply(&format!(">{}", pass.expose()));
                }
                &config.users
            }
        };
        let mut seen = Vec::new();
        for line in lines {
            let fresh = !seen.contains(&line.name);
            seen.push(line.name.clone());
            let user = acl
                .users
                .entry(line.name.clone())
                .or_insert_with(|| User::new(&line.name));
            if fresh && line.name == "default" {
                let _ = user.apply("reset");
            }
            let merged = user::merge_selectors(&line.rules).unwrap_or_default();
            for r in &merged {
                if let Err(e) = user.apply(r) {
                    // Validated when the file was read; a state file
                    // written by this daemon only holds valid rules.
                    tracing::warn!(user = %line.name, "ACL rule ignored: {}", e.text());
                }
            }
        }
        acl
    }

    /// A user by name.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// All users, by name.
    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// Whether `user` may log in with `password`.
    pub fn authenticate(&self, user: &str, password: &[u8]) -> bool {
        self.users
            .get(user)
            .is_some_and(|u| u.check_password(password))
    }

    /// Checks a request of `user`. `Ok` also when the command is unknown or
    /// its arity wrong: the handler answers those, before any permission
    /// check, as Valkey does. A user that no longer exists may run nothing.
    pub fn authorize(&self, user: &str, args: &[&[u8]]) -> Result<(), Refusal> {
        // Every request passes the port's hot path: skip the lookup for a
        // user that may run everything.
        if self.users.get(user).is_some_and(User::allows_everything) {
            return Ok(());
        }
        let Some(id) = commands::resolve(args) else {
            return Ok(());
        };
        let name = commands::COMMANDS[id].name;
        let denial = match self.users.get(user) {
            Some(u) => u.check(id, args),
            None => Err(Denial::Command),
        };
        match denial {
            Ok(()) => Ok(()),
            Err(Denial::Command) => Err(Refusal {
                error: format!("NOPERM User {user} has no permissions to run the '{name}' command"),
                reason: "command",
                object: name.to_string(),
            }),
            Err(Denial::Channel(i)) => Err(Refusal {
                error: "NOPERM No permissions to access a channel".into(),
                reason: "channel",
                object: args
                    .get(i)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .unwrap_or_default(),
            }),
        }
    }

    /// `ACL DRYRUN`'s verbose text for a refusal of `user`, or `None` when
    /// allowed.
    pub fn dryrun(&self, user: &User, id: usize, args: &[&[u8]]) -> Option<String> {
        match user.check(id, args) {
            Ok(()) => None,
            Err(Denial::Command) => Some(format!(
                "User {} has no permissions to run the '{}' command",
                user.name,
                commands::COMMANDS[id].name
            )),
            Err(Denial::Channel(i)) => Some(format!(
                "User {} has no permissions to access the '{}' channel",
                user.name,
                args.get(i)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .unwrap_or_default()
            )),
        }
    }

    /// `ACL SETUSER name rules…`: all rules apply, or none.
    pub fn setuser(&mut self, name: &str, ops: &[String]) -> Result<(), String> {
        let merged = user::merge_selectors(ops).map_err(|i| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                ops.get(i).map(String::as_str).unwrap_or_default()
            )
        })?;
        let mut user = self
            .users
            .get(name)
            .cloned()
            .unwrap_or_else(|| User::new(name));
        for op in &merged {
            user.apply(op)
                .map_err(|e| format!("Error in ACL SETUSER modifier '{op}': {}", e.text()))?;
        }
        self.users.insert(name.to_string(), user);
        Ok(())
    }

    /// `ACL DELUSER`: how many of `names` existed.
    pub fn deluser(&mut self, names: &[String]) -> usize {
        names
            .iter()
            .filter(|n| self.users.remove(n.as_str()).is_some())
            .count()
    }

    /// The users as `user` lines (digests, never passwords), each starting
    /// from `reset`: what the state file keeps after a runtime change.
    pub fn lines(&self) -> Vec<UserRule> {
        self.users
            .values()
            .map(|u| {
                let mut rules = vec!["reset".to_string()];
                rules.extend(user::merge_selectors_of(&u.describe()));
                UserRule {
                    name: u.name.clone(),
                    rules,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let mut acl = Acl::default();
        let ops: Vec<String> = ["on", ">pw", "-@all", "+ping", "&ch*", "(+info ~k*)"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(acl.setuser("alice", &ops), Ok(()));
        let config = Config {
            acl: Some(acl.lines()),
            ..Config::default()
        };
        let back = Acl::from_config(&config);
        let a = back.user("alice").map(User::describe);
        assert_eq!(a, acl.user("alice").map(User::describe));
        assert!(back.authenticate("alice", b"pw"));
        assert!(!back.authenticate("alice", b"nope"));
    }

    #[test]
    fn requirepass_is_the_default_password() {
        let config = Config {
            requirepass: Some(crate::config::Secret::new("s".to_string())),
            ..Config::default()
        };
        let acl = Acl::from_config(&config);
        assert!(acl.authenticate("default", b"s"));
        assert!(!acl.user("default").is_some_and(User::open));
    }
}
