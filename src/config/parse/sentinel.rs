//! The `sentinel …` directives, applied once the whole file is read (see
//! [`super::parse`] for the order).

use crate::config::bounds::{self, BAD_PORT, BAD_QUORUM, NEGATIVE_TIME, ZERO_TIME};
use crate::config::secret::Secret;
use crate::config::settings::{self, GroupConfig};

use super::values::{fence_lag, one, time, yes_no};
use super::{Line, Res};

impl Line<'_> {
    pub(super) fn sentinel(&mut self, sub: &str, args: &[String]) -> Res {
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
                let [name, path] = args else {
                    return Err(format!("wrong number of arguments for 'sentinel {sub}'"));
                };
                // Against the `dir` read so far, as Sentinel, which has
                // moved into it by then.
                let dir = self.config.dir.clone();
                let g = self.group(name)?;
                let notification = sub == "notification-script";
                if !settings::script_runnable(&dir, path) {
                    let why = if notification {
                        settings::BAD_NOTIFICATION_SCRIPT
                    } else {
                        settings::BAD_RECONFIG_SCRIPT
                    };
                    return Err(format!("{why}."));
                }
                let slot = if notification {
                    &mut g.notification_script
                } else {
                    &mut g.client_reconfig_script
                };
                *slot = Some(path.clone());
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
                self.config.deny_scripts_reconfig =
                    match one(sub, args)?.to_ascii_lowercase().as_str() {
                        "yes" => true,
                        "no" => false,
                        _ => {
                            return Err(
                                "Please specify yes or no for the deny-scripts-reconfig options."
                                    .into(),
                            );
                        }
                    };
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
