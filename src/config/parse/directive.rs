//! The daemon-wide directives: every line but `sentinel …`.

use std::path::PathBuf;

use crate::config::bounds;
use crate::config::secret::Secret;
use crate::config::settings::{Note, OutputLimit, UserRule};
use crate::config::valkey_directives::is_valkey_directive;

use super::values::{memory, number, one, yes_no};
use super::{Line, Res};

impl Line<'_> {
    pub(super) fn directive(&mut self, name: &str, args: &[String]) -> Res {
        match name {
            "port" => self.config.port = bounds::listen_port(one(name, args)?)?,
            "bind" => {
                if args.is_empty() {
                    return Err("wrong number of arguments for 'bind'".into());
                }
                self.config.bind = args.to_vec();
            }
            "dir" => self.config.dir = PathBuf::from(one(name, args)?),
            "index-port" => {
                self.config.index_port = bounds::listen_port(one(name, args)?)?;
                self.config.index_port_given = true;
            }
            "admin-port" => {
                self.config.admin_port = bounds::listen_port(one(name, args)?)?;
                self.config.admin_port_given = true;
            }
            "admin-bind" => {
                if args.is_empty() {
                    return Err("wrong number of arguments for 'admin-bind'".into());
                }
                self.config.admin_bind = args.to_vec();
            }
            "admin-auth-token-file" => {
                self.config.admin_auth_token_file = Some(PathBuf::from(one(name, args)?));
            }
            "admin-auth-basic-file" => {
                self.config.admin_auth_basic_file = Some(PathBuf::from(one(name, args)?));
            }
            "requirepass" => {
                let pass = one(name, args)?;
                self.config.requirepass = (!pass.is_empty()).then(|| Secret::new(pass));
            }
            "user" => {
                let (user, rules) = args
                    .split_first()
                    .ok_or("wrong number of arguments for 'user'")?;
                self.config.users.push(UserRule {
                    name: user.clone(),
                    rules: rules.to_vec(),
                });
            }
            "loglevel" => {
                let level = one(name, args)?.to_ascii_lowercase();
                if !matches!(
                    level.as_str(),
                    "debug" | "verbose" | "notice" | "warning" | "nothing"
                ) {
                    return Err(format!("invalid loglevel '{level}'"));
                }
                self.config.loglevel = level;
            }
            "maxclients" => {
                let n = number(one(name, args)?)?;
                if n == 0 {
                    return Err("maxclients must be 1 or greater".into());
                }
                self.config.maxclients = usize::try_from(n).map_err(|_| "maxclients too large")?;
            }
            "index-max-subscribers-per-address" => {
                let n = number(one(name, args)?)?;
                self.config.index_max_per_address = usize::try_from(n)
                    .map_err(|_| "index-max-subscribers-per-address too large")?;
            }
            "logfile" => {
                // As Valkey: `logfile ""` is standard error.
                let file = one(name, args)?;
                self.config.logfile = (!file.is_empty()).then(|| PathBuf::from(file));
            }
            "daemonize" | "pidfile" | "syslog-enabled" | "syslog-ident" | "syslog-facility"
            | "supervised" => self.note(format!(
                "'{name}' ignored: Valkyrie runs in the foreground; leave it to the service \
                 manager"
            )),
            "protected-mode" => self.config.protected_mode = yes_no(one(name, args)?)?,
            "tcp-keepalive"
            | "tcp-backlog"
            | "timeout"
            | "hz"
            | "acllog-max-len"
            | "enable-debug-command"
            | "latency-tracking"
            | "latency-tracking-info-percentiles" => {
                self.note(format!("'{name}' has no effect in Valkyrie"))
            }
            "client-output-buffer-limit" => {
                let [class, hard, soft, secs] = args else {
                    return Err("wrong number of arguments for 'client-output-buffer-limit'".into());
                };
                let limit = OutputLimit {
                    hard: memory(hard)?,
                    soft: memory(soft)?,
                    soft_secs: number(secs)?,
                };
                match class.to_ascii_lowercase().as_str() {
                    "pubsub" => self.config.pubsub_limit = limit,
                    "normal" | "replica" | "slave" => self.note(format!(
                        "'client-output-buffer-limit {class}' has no effect in Valkyrie: \
                         ordinary clients are held back (not read) while their replies wait"
                    )),
                    other => return Err(format!("invalid client class '{other}'")),
                }
            }
            // Valkey's own `rename-command` hides or renames a command of
            // the Sentinel port itself: left undone, a command meant to be
            // gone would still answer.
            "aclfile" | "include" | "unixsocket" | "unixsocketperm" | "rename-command" => {
                // Ignoring these could leave the port unprotected or
                // unreachable: refuse rather than guess.
                return Err(format!("'{name}' is not supported by Valkyrie"));
            }
            n if n.starts_with("tls-") || n == "index-tls" || n == "admin-tls" => {
                let notes = &mut *self.notes;
                let line = self.line;
                self.config.tls.directive(n, args, &mut |message| {
                    notes.push(Note {
                        line,
                        message,
                        warning: false,
                    })
                })?;
            }
            other if is_valkey_directive(other) => self.warn(format!(
                "'{other}' ignored: a valkey-server directive with no meaning for Valkyrie"
            )),
            other => return Err(format!("unknown directive '{other}'")),
        }
        Ok(())
    }
}
