//! The `sentinel.conf` parser.
//!
//! Lines are split with Valkey's own rules (quotes, `\xHH` escapes), the
//! directive name is case-insensitive, and per-master directives must follow
//! the `sentinel monitor` line that names the master, as in Sentinel.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Config, ConfigError, GroupConfig, Note, Secret, UserRule};

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
    let mut monitors: Vec<(String, usize)> = Vec::new();
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
        let words = valkyrie_protocol::split_line(trimmed)
            .map_err(|_| err("unbalanced quotes in configuration line".into()))?;
        let words: Vec<String> = words
            .into_iter()
            .map(|w| String::from_utf8(w).map_err(|_| err("not valid UTF-8".into())))
            .collect::<Result<_, _>>()?;
        let Some((first, args)) = words.split_first() else {
            continue;
        };
        let mut ctx = Line {
            config: &mut config,
            notes: &mut notes,
            monitors: &mut monitors,
            line,
        };
        ctx.directive(&first.to_ascii_lowercase(), args)
            .map_err(err)?;
    }
    // As Sentinel: without `resolve-hostnames yes`, monitored addresses
    // must be IP addresses (the directive may come after the monitors).
    if !config.resolve_hostnames {
        for (name, line) in &monitors {
            if let Some(g) = config.group(name)
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
    Ok((config, notes))
}

struct Line<'a> {
    config: &'a mut Config,
    notes: &'a mut Vec<Note>,
    monitors: &'a mut Vec<(String, usize)>,
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
            "port" => self.config.port = port(one(name, args)?)?,
            "bind" => {
                if args.is_empty() {
                    return Err("wrong number of arguments for 'bind'".into());
                }
                self.config.bind = args.to_vec();
            }
            "dir" => self.config.dir = PathBuf::from(one(name, args)?),
            "index-port" => self.config.index_port = port(one(name, args)?)?,
            "admin-port" => self.config.admin_port = port(one(name, args)?)?,
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
            "daemonize" | "pidfile" | "logfile" | "syslog-enabled" | "syslog-ident"
            | "syslog-facility" | "supervised" => self.note(format!(
                "'{name}' ignored: Valkyrie runs in the foreground and logs to stderr; \
                 leave those to the service manager"
            )),
            "protected-mode"
            | "tcp-keepalive"
            | "tcp-backlog"
            | "timeout"
            | "hz"
            | "acllog-max-len"
            | "enable-debug-command"
            | "latency-tracking" => self.note(format!("'{name}' has no effect in Valkyrie")),
            "aclfile" | "include" | "unixsocket" | "unixsocketperm" => {
                // Ignoring these could leave the port unprotected or
                // unreachable: refuse rather than guess.
                return Err(format!("'{name}' is not supported by Valkyrie"));
            }
            n if n.starts_with("tls-") => {
                return Err(format!(
                    "'{n}': TLS is not supported by Valkyrie yet; refusing to run in plain text"
                ));
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
                if self.config.group(name).is_some() {
                    return Err("Duplicate master name.".into());
                }
                let quorum = u32::try_from(number(quorum)?)
                    .ok()
                    .filter(|q| *q >= 1)
                    .ok_or("Quorum must be 1 or greater.")?;
                if quorum > 1 {
                    self.note(format!(
                        "master '{name}': quorum {quorum} is kept only to be reported to \
                         clients; one Valkyrie decides alone, with replicas as witnesses \
                         (docs/failover.md)"
                    ));
                }
                self.config.groups.push(GroupConfig::new(
                    name.clone(),
                    host.clone(),
                    port(p)?,
                    quorum,
                ));
                self.monitors.push((name.clone(), self.line));
            }
            "down-after-milliseconds" => {
                let (g, v) = self.group_value(sub, args)?;
                g.down_after = millis(&v, 1)?;
            }
            "failover-timeout" => {
                let (g, v) = self.group_value(sub, args)?;
                g.failover_timeout = millis(&v, 1)?;
            }
            "parallel-syncs" => {
                let (g, v) = self.group_value(sub, args)?;
                g.parallel_syncs = u32::try_from(number(&v)?)
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or("parallel-syncs must be 1 or greater")?;
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
                g.master_reboot_down_after_period = millis(&v, 0)?;
            }
            "known-replica" | "known-slave" => {
                let [name, host, p] = args else {
                    return Err(format!("wrong number of arguments for 'sentinel {sub}'"));
                };
                let p = port(p)?;
                self.group(name)?.known_replicas.push((host.clone(), p));
            }
            "rename-command" => {
                let [name, cmd, renamed] = args else {
                    return Err("wrong number of arguments for 'sentinel rename-command'".into());
                };
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
            "known-sentinel" | "config-epoch" | "leader-epoch" => {
                let name = args.first().ok_or("missing master name")?;
                self.group(name)?;
                self.note(format!(
                    "'sentinel {sub}' ignored: Valkyrie has no peer sentinels; its epochs \
                     live in its own state file"
                ));
            }
            "current-epoch"
            | "myid"
            | "deny-scripts-reconfig"
            | "sentinel-user"
            | "sentinel-pass" => {
                one(sub, args)?;
                self.note(format!("'sentinel {sub}' has no effect in Valkyrie"));
            }
            "announce-ip" => {
                let ip = one(sub, args)?;
                self.config.announce_ip = (!ip.is_empty()).then(|| ip.to_string());
            }
            "announce-port" => self.config.announce_port = port(one(sub, args)?)?,
            "resolve-hostnames" => self.config.resolve_hostnames = yes_no(one(sub, args)?)?,
            "announce-hostnames" => self.config.announce_hostnames = yes_no(one(sub, args)?)?,
            other => return Err(format!("unknown directive 'sentinel {other}'")),
        }
        Ok(())
    }

    fn group(&mut self, name: &str) -> Result<&mut GroupConfig, String> {
        self.config
            .groups
            .iter_mut()
            .find(|g| g.name == name)
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

fn port(v: &str) -> Result<u16, String> {
    v.parse::<u16>()
        .map_err(|_| format!("'{v}' is not a valid port"))
}

fn millis(v: &str, min: u64) -> Result<Duration, String> {
    let n = number(v)?;
    if n < min {
        return Err(format!("'{v}' must be {min} or greater"));
    }
    Ok(Duration::from_millis(n))
}

fn yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("'{v}' must be yes or no")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> (Config, Vec<Note>) {
        parse("sentinel.conf", text.as_bytes()).unwrap()
    }

    fn bad(text: &str) -> String {
        parse("sentinel.conf", text.as_bytes())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_real_sentinel_conf() {
        // What valkey-sentinel itself writes after running for a while.
        let (c, notes) = ok(r#"
port 26379
daemonize no
pidfile "/var/run/valkey-sentinel.pid"
loglevel notice
logfile ""
dir "/tmp"
sentinel monitor mymaster 127.0.0.1 6379 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 10000
sentinel parallel-syncs mymaster 2
sentinel auth-pass mymaster "s3cr et"
sentinel auth-user mymaster app
acllog-max-len 128
sentinel deny-scripts-reconfig yes
sentinel resolve-hostnames no
sentinel announce-hostnames no
protected-mode no
sentinel myid 6165e0003d05f9e39a4ca4a6bee8ba1de4c6a1e7
sentinel config-epoch mymaster 1
sentinel leader-epoch mymaster 1
sentinel current-epoch 1
sentinel known-replica mymaster 127.0.0.1 6380
sentinel known-slave mymaster 127.0.0.1 6381
sentinel known-sentinel mymaster 127.0.0.1 26380 a2c3f7b8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4
"#);
        assert_eq!(c.port, 26379);
        assert_eq!(c.dir, PathBuf::from("/tmp"));
        let g = c.group("mymaster").unwrap();
        assert_eq!((g.host.as_str(), g.port, g.quorum), ("127.0.0.1", 6379, 2));
        assert_eq!(g.down_after, Duration::from_millis(1000));
        assert_eq!(g.failover_timeout, Duration::from_millis(10_000));
        assert_eq!(g.parallel_syncs, 2);
        assert_eq!(g.auth_pass.as_ref().map(Secret::expose), Some("s3cr et"));
        assert_eq!(g.auth_user.as_deref(), Some("app"));
        assert_eq!(
            g.known_replicas,
            vec![("127.0.0.1".into(), 6380), ("127.0.0.1".into(), 6381)]
        );
        // Quorum, pidfile, myid, epochs, known-sentinel… are explained.
        assert!(
            notes
                .iter()
                .any(|n| n.line == 8 && n.message.contains("quorum 2"))
        );
        assert!(notes.iter().any(|n| n.message.contains("known-sentinel")));
        assert!(notes.len() >= 8, "{notes:?}");
    }

    #[test]
    fn defaults_match_sentinel() {
        let (c, _) = ok("sentinel monitor m 10.0.0.1 6379 1\n");
        let g = &c.groups[0];
        assert_eq!(g.down_after, Duration::from_secs(30));
        assert_eq!(g.failover_timeout, Duration::from_secs(180));
        assert_eq!(g.parallel_syncs, 1);
        assert_eq!(c.port, 26379);
        assert_eq!(c.index_port, 12120);
        assert_eq!(c.admin_port, 9126);
    }

    #[test]
    fn errors_name_file_and_line() {
        assert_eq!(
            bad("port 1\nfrobnicate yes\n"),
            "sentinel.conf:2: unknown directive 'frobnicate'"
        );
        assert_eq!(
            bad("sentinel down-after-milliseconds nosuch 100\n"),
            "sentinel.conf:1: No such master with specified name."
        );
        assert_eq!(
            bad("sentinel monitor m 10.0.0.1 1 0\n"),
            "sentinel.conf:1: Quorum must be 1 or greater."
        );
        assert_eq!(
            bad("sentinel monitor m 10.0.0.1 1 1\nsentinel monitor m 10.0.0.1 2 1\n"),
            "sentinel.conf:2: Duplicate master name."
        );
        assert_eq!(
            bad("port 70000\n"),
            "sentinel.conf:1: '70000' is not a valid port"
        );
        assert_eq!(
            bad("sentinel monitor m 10.0.0.1 1\n"),
            "sentinel.conf:1: wrong number of arguments for 'sentinel monitor'"
        );
        assert!(bad("dir \"/tmp\n").contains("unbalanced quotes"));
        assert!(bad("tls-port 6380\n").contains("TLS is not supported"));
        assert!(bad("aclfile /etc/users.acl\n").contains("not supported"));
        assert!(
            bad("sentinel monitor m 10.0.0.1 1 1\nsentinel down-after-milliseconds m 0\n")
                .contains("must be 1 or greater")
        );
        assert!(bad("sentinel frob m\n").contains("unknown directive 'sentinel frob'"));
    }

    #[test]
    fn hostnames_need_resolve_hostnames() {
        assert_eq!(
            bad("sentinel monitor m valkey-0.svc 6379 1\n"),
            "sentinel.conf:1: 'valkey-0.svc' is not an IP address; set 'sentinel resolve-hostnames yes' to monitor by hostname"
        );
        let (c, _) = ok("sentinel monitor m valkey-0.svc 6379 1\nsentinel resolve-hostnames yes\n");
        assert_eq!(c.groups[0].host, "valkey-0.svc");
        assert!(ok("sentinel monitor m ::1 6379 1\n").0.groups[0].host == "::1");
    }

    #[test]
    fn secrets_never_print() {
        let (c, _) = ok("requirepass hunter2\nuser app on >hunter3 +@all\n\
                         sentinel monitor m 10.0.0.1 1 1\nsentinel auth-pass m hunter4\n");
        let shown = format!("{c:?}");
        for secret in ["hunter2", "hunter3", "hunter4"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
        assert_eq!(c.requirepass.as_ref().map(Secret::expose), Some("hunter2"));
        assert_eq!(c.users[0].rules, vec!["on", ">hunter3", "+@all"]);
    }

    #[test]
    fn case_and_quotes() {
        let (c, _) = ok(
            "PORT 1234\nSentinel MONITOR \"my master\" '10.0.0.2' 7 1\nsentinel parallel-syncs \"my master\" 3\n",
        );
        assert_eq!(c.port, 1234);
        assert_eq!(c.groups[0].name, "my master");
        assert_eq!(c.groups[0].parallel_syncs, 3);
    }

    #[test]
    fn overrides_win() {
        let (mut c, _) = ok("port 1\ndir /a\n");
        super::super::Overrides {
            port: Some(2),
            dir: Some("/b".into()),
            bind: Some(vec!["127.0.0.1".into()]),
            ..Default::default()
        }
        .apply(&mut c);
        assert_eq!(
            (c.port, c.dir.as_path(), c.bind.as_slice()),
            (2, Path::new("/b"), &["127.0.0.1".to_string()][..])
        );
    }
}
