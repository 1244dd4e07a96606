//! The `sentinel.conf` parser.
//!
//! Lines are split with Valkey's own rules (quotes, `\xHH` escapes), the
//! directive name is case-insensitive, and per-master directives must follow
//! the `sentinel monitor` line that names the master, as in Sentinel.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::bounds::{self, BAD_PORT, BAD_QUORUM, NEGATIVE_TIME, ZERO_TIME};
use super::secret::Secret;
use super::settings::{self, Config, ConfigError, GroupConfig, Note, OutputLimit, UserRule};

/// Reads and parses the file at `path`.
pub fn parse_file(path: &Path) -> Result<(Config, Vec<Note>), ConfigError> {
    let text = std::fs::read(path).map_err(|e| ConfigError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse(&path.display().to_string(), &text)
}

/// Parses configuration `text`; `path` is used in error messages.
pub fn parse(path: &str, text: &[u8]) -> Result<(Config, Vec<Note>), ConfigError> {
    let mut config = Config::default();
    let mut notes = Vec::new();
    // (group index, line) of each `sentinel monitor`, and groups by name:
    // per-master directives find their group in O(1), so parsing stays
    // linear in the number of lines.
    let mut monitors: Vec<(usize, usize)> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    // The last TLS directive: what the TLS settings lack is reported there.
    let mut last_tls_line: Option<usize> = None;
    // The `sentinel announce-ip` line, checked once `resolve-hostnames`
    // is known.
    let mut announce_line = 0;
    for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = index + 1;
        let err = |message: String| ConfigError::Directive {
            path: path.to_string(),
            line,
            message,
        };
        let trimmed = raw.trim_ascii();
        if trimmed.is_empty() || trimmed.starts_with(b"#") {
            continue;
        }
        // A raw control character (a NUL cutting `port 26\079` to 26, an
        // escape sequence) is never part of a directive: Sentinel writes
        // such bytes quoted and escaped.
        if let Some(b) = trimmed
            .iter()
            .find(|b| b.is_ascii_control() && !matches!(b, b'\t' | b'\r'))
        {
            return Err(err(format!(
                "control character 0x{b:02x} in configuration line (quote and escape it)"
            )));
        }
        let words = valkyrie_protocol::split_line(trimmed)
            .map_err(|_| err("unbalanced quotes in configuration line".into()))?;
        let words: Vec<String> = words
            .into_iter()
            .map(|w| String::from_utf8(w).map_err(|_| err("not valid UTF-8".into())))
            .collect::<Result<_, _>>()?;
        let Some((first, args)) = words.split_first() else {
            continue;
        };
        let lower = first.to_ascii_lowercase();
        if lower.starts_with("tls-") || lower == "index-tls" || lower == "admin-tls" {
            last_tls_line = Some(line);
        }
        if lower == "sentinel"
            && args
                .first()
                .is_some_and(|a| a.eq_ignore_ascii_case("announce-ip"))
        {
            announce_line = line;
        }
        let mut ctx = Line {
            config: &mut config,
            notes: &mut notes,
            monitors: &mut monitors,
            by_name: &mut by_name,
            line,
        };
        ctx.directive(&lower, args).map_err(err)?;
    }
    // Once the whole file is read: a `known-sentinel` line (a file a
    // sentinel rewrote) already names the peers the quorum counts.
    for (index, line) in &monitors {
        if let Some(g) = config.groups.get(*index)
            && g.quorum > 1
            && g.known_sentinels.is_empty()
        {
            notes.push(Note {
                line: *line,
                message: format!(
                    "master '{}': quorum {} applies once peers (other Valkyries or \
                     sentinels) are known; until then one Valkyrie decides alone, with \
                     replicas as witnesses (docs/peering.md)",
                    g.name, g.quorum
                ),
            });
        }
    }
    notes.sort_by_key(|n| n.line);
    // As Sentinel: without `resolve-hostnames yes`, monitored addresses
    // must be IP addresses (the directive may come after the monitors).
    if !config.resolve_hostnames {
        for (index, line) in &monitors {
            if let Some(g) = config.groups.get(*index)
                && g.host.parse::<std::net::IpAddr>().is_err()
            {
                return Err(ConfigError::Directive {
                    path: path.to_string(),
                    line: *line,
                    message: format!(
                        "'{}' is not an IP address; set 'sentinel resolve-hostnames yes' to monitor by hostname",
                        g.host
                    ),
                });
            }
        }
    }
    if let Some(ip) = &config.announce_ip
        && let Err(e) = crate::core::check_host(ip, config.resolve_hostnames)
    {
        return Err(ConfigError::Directive {
            path: path.to_string(),
            line: announce_line,
            message: format!("sentinel announce-ip: {e}"),
        });
    }
    if let Some(missing) = config.tls.missing() {
        return Err(ConfigError::Directive {
            path: path.to_string(),
            line: last_tls_line.unwrap_or(0),
            message: missing.to_string(),
        });
    }
    Ok((config, notes))
}

struct Line<'a> {
    config: &'a mut Config,
    notes: &'a mut Vec<Note>,
    monitors: &'a mut Vec<(usize, usize)>,
    by_name: &'a mut HashMap<String, usize>,
    line: usize,
}

type Res = Result<(), String>;

impl Line<'_> {
    fn note(&mut self, message: impl Into<String>) {
        self.notes.push(Note {
            line: self.line,
            message: message.into(),
        });
    }

    fn directive(&mut self, name: &str, args: &[String]) -> Res {
        match name {
            "port" => self.config.port = bounds::listen_port(one(name, args)?)?,
            "bind" => {
                if args.is_empty() {
                    return Err("wrong number of arguments for 'bind'".into());
                }
                self.config.bind = args.to_vec();
            }
            "dir" => self.config.dir = PathBuf::from(one(name, args)?),
            "index-port" => self.config.index_port = bounds::listen_port(one(name, args)?)?,
            "admin-port" => self.config.admin_port = bounds::listen_port(one(name, args)?)?,
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
            "daemonize" | "pidfile" | "logfile" | "syslog-enabled" | "syslog-ident"
            | "syslog-facility" | "supervised" => self.note(format!(
                "'{name}' ignored: Valkyrie runs in the foreground and logs to stderr; \
                 leave those to the service manager"
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
            "aclfile" | "include" | "unixsocket" | "unixsocketperm" => {
                // Ignoring these could leave the port unprotected or
                // unreachable: refuse rather than guess.
                return Err(format!("'{name}' is not supported by Valkyrie"));
            }
            n if n.starts_with("tls-") || n == "index-tls" || n == "admin-tls" => {
                let notes = &mut *self.notes;
                let line = self.line;
                self.config
                    .tls
                    .directive(n, args, &mut |message| notes.push(Note { line, message }))?;
            }
            "sentinel" => {
                let (sub, rest) = args
                    .split_first()
                    .ok_or("wrong number of arguments for 'sentinel'")?;
                self.sentinel(&sub.to_ascii_lowercase(), rest)?;
            }
            other => return Err(format!("unknown directive '{other}'")),
        }
        Ok(())
    }

    fn sentinel(&mut self, sub: &str, args: &[String]) -> Res {
        match sub {
            "monitor" => {
                let [name, host, p, quorum] = args else {
                    return Err("wrong number of arguments for 'sentinel monitor'".into());
                };
                if self.by_name.contains_key(name) {
                    return Err("Duplicate master name.".into());
                }
                if let Some(e) = settings::master_name_error(name) {
                    // A long name is not echoed back whole.
                    let shown: String = name.chars().take(64).collect();
                    let more = if shown.len() < name.len() { "…" } else { "" };
                    return Err(format!("{e}: {shown:?}{more}"));
                }
                if !settings::valid_name(host) {
                    return Err(format!("{}: {host:?}", settings::BAD_HOST));
                }
                let quorum = bounds::count(bounds::positive(quorum.as_bytes()).ok_or(BAD_QUORUM)?);
                let p = bounds::port(p.as_bytes()).ok_or(BAD_PORT)?;
                self.config
                    .groups
                    .push(GroupConfig::new(name.clone(), host.clone(), p, quorum));
                self.by_name
                    .insert(name.clone(), self.config.groups.len() - 1);
                self.monitors
                    .push((self.config.groups.len() - 1, self.line));
            }
            "down-after-milliseconds" => {
                let (g, v) = self.group_value(sub, args)?;
                g.down_after = time(&v, bounds::positive, ZERO_TIME)?;
            }
            "failover-timeout" => {
                let (g, v) = self.group_value(sub, args)?;
                g.failover_timeout = time(&v, bounds::positive, ZERO_TIME)?;
            }
            "parallel-syncs" => {
                let (g, v) = self.group_value(sub, args)?;
                // Sentinel reads it with atoi (0 for `abc`), which could
                // leave a failover unable to reconfigure any replica.
                g.parallel_syncs = bounds::count(
                    bounds::positive(v.as_bytes()).ok_or("parallel-syncs must be 1 or greater")?,
                );
            }
            "auth-pass" => {
                let (g, v) = self.group_value(sub, args)?;
                g.auth_pass = (!v.is_empty()).then(|| Secret::new(v));
            }
            "auth-user" => {
                let (g, v) = self.group_value(sub, args)?;
                g.auth_user = (!v.is_empty()).then_some(v);
            }
            "master-reboot-down-after-period" | "primary-reboot-down-after-period" => {
                let (g, v) = self.group_value(sub, args)?;
                g.master_reboot_down_after_period = time(&v, bounds::non_negative, NEGATIVE_TIME)?;
            }
            "write-fence" => {
                let (g, v) = self.group_value(sub, args)?;
                g.write_fence.mode = crate::core::FenceMode::parse(&v)
                    .ok_or("write-fence must be off, auto or strict")?;
            }
            "write-fence-lag" => {
                let (g, v) = self.group_value(sub, args)?;
                g.write_fence.lag_secs = fence_lag(&v)?;
            }
            "known-replica" | "known-slave" => {
                let [name, host, p] = args else {
                    return Err(format!("wrong number of arguments for 'sentinel {sub}'"));
                };
                let p = bounds::port(p.as_bytes()).ok_or(BAD_PORT)?;
                if !settings::valid_name(host) {
                    return Err(format!("{}: {host:?}", settings::BAD_HOST));
                }
                self.group(name)?.known_replicas.push((host.clone(), p));
            }
            "rename-command" => {
                let [name, cmd, renamed] = args else {
                    return Err("wrong number of arguments for 'sentinel rename-command'".into());
                };
                settings::check_rename(cmd, renamed)?;
                self.group(name)?
                    .renamed_commands
                    .push((cmd.to_ascii_lowercase(), renamed.clone()));
            }
            "notification-script" | "client-reconfig-script" => {
                let [name, _] = args else {
                    return Err(format!("wrong number of arguments for 'sentinel {sub}'"));
                };
                self.group(name)?;
                self.note(format!(
                    "'sentinel {sub}' for '{name}' ignored: Valkyrie runs no scripts; \
                     subscribe to events on the Sentinel or index port instead"
                ));
            }
            "known-sentinel" => {
                let [name, host, p, runid] = args else {
                    return Err("wrong number of arguments for 'sentinel known-sentinel'".into());
                };
                let p = bounds::port(p.as_bytes())
                    .filter(|p| *p > 0)
                    .ok_or(BAD_PORT)?;
                if !settings::valid_name(host) {
                    return Err(format!("{}: {host:?}", settings::BAD_HOST));
                }
                if !crate::core::peering::is_runid(runid) {
                    return Err(format!(
                        "'sentinel known-sentinel': {runid:?} is not a 40-hex run id"
                    ));
                }
                self.group(name)?.known_sentinels.push((
                    runid.to_ascii_lowercase(),
                    host.clone(),
                    p,
                ));
            }
            "config-epoch" | "leader-epoch" => {
                let [name, epoch] = args else {
                    return Err(format!("wrong number of arguments for 'sentinel {sub}'"));
                };
                let epoch = crate::core::peering::parse_epoch(epoch.as_bytes())
                    .map_err(|e| format!("'sentinel {sub}': {e}"))?;
                let g = self.group(name)?;
                if sub == "config-epoch" {
                    g.config_epoch = epoch;
                } else {
                    g.leader_epoch = epoch;
                }
            }
            "sentinel-user" => {
                let user = one(sub, args)?;
                self.config.sentinel_user = (!user.is_empty()).then(|| user.to_string());
            }
            "sentinel-pass" => {
                let pass = one(sub, args)?;
                self.config.sentinel_pass = (!pass.is_empty()).then(|| Secret::new(pass));
            }
            "myid" => {
                let id = one(sub, args)?;
                if !settings::valid_myid(id) {
                    return Err(format!(
                        "Malformed Sentinel id in myid option: '{id}' is not 40 hexadecimal \
                         characters"
                    ));
                }
                self.config.myid = Some(id.to_string());
            }
            "current-epoch" => {
                let epoch = one(sub, args)?;
                self.config.current_epoch = crate::core::peering::parse_epoch(epoch.as_bytes())
                    .map_err(|e| format!("'sentinel current-epoch': {e}"))?;
            }
            "deny-scripts-reconfig" => {
                one(sub, args)?;
                self.note(format!("'sentinel {sub}' has no effect in Valkyrie"));
            }
            "announce-ip" => {
                let ip = one(sub, args)?;
                if !ip.is_empty() {
                    // Whether it may be a name is checked once the whole
                    // file is read (`resolve-hostnames` may come later).
                    crate::core::check_host(ip, true).map_err(|e| format!("announce-ip: {e}"))?;
                }
                self.config.announce_ip = (!ip.is_empty()).then(|| ip.to_string());
            }
            "announce-port" => self.config.announce_port = bounds::listen_port(one(sub, args)?)?,
            "resolve-hostnames" => self.config.resolve_hostnames = yes_no(one(sub, args)?)?,
            "announce-hostnames" => self.config.announce_hostnames = yes_no(one(sub, args)?)?,
            other => return Err(format!("unknown directive 'sentinel {other}'")),
        }
        Ok(())
    }

    fn group(&mut self, name: &str) -> Result<&mut GroupConfig, String> {
        self.by_name
            .get(name)
            .and_then(|i| self.config.groups.get_mut(*i))
            .ok_or_else(|| "No such master with specified name.".to_string())
    }

    fn group_value(
        &mut self,
        sub: &str,
        args: &[String],
    ) -> Result<(&mut GroupConfig, String), String> {
        let [name, value] = args else {
            return Err(format!("wrong number of arguments for 'sentinel {sub}'"));
        };
        let value = value.clone();
        Ok((self.group(name)?, value))
    }
}

fn one<'a>(name: &str, args: &'a [String]) -> Result<&'a str, String> {
    match args {
        [v] => Ok(v),
        _ => Err(format!("wrong number of arguments for '{name}'")),
    }
}

fn number(v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .map_err(|_| format!("'{v}' is not a non-negative integer"))
}

/// Valkey's memory units: `1k` = 1000, `1kb` = 1024, likewise m/mb, g/gb.
fn memory(v: &str) -> Result<u64, String> {
    let lower = v.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return Err(format!("'{v}' is not a memory size")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("'{v}' is not a memory size"))
}

/// Milliseconds within `check`'s bound, else Sentinel's `message`.
fn time(v: &str, check: fn(&[u8]) -> Option<i64>, message: &str) -> Result<Duration, String> {
    check(v.as_bytes())
        .map(bounds::millis)
        .ok_or_else(|| format!("'{v}': {message}"))
}

fn yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("'{v}' must be yes or no")),
    }
}

/// A `write-fence-lag` value: whole seconds, 1 to 3600 (Valkey's
/// `min-replicas-max-lag` with 0 would turn the fence off).
pub fn fence_lag(v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|n| (1..=3600).contains(n))
        .ok_or_else(|| "write-fence-lag must be between 1 and 3600 seconds".to_string())
}
