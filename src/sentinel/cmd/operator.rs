//! The `SENTINEL` subcommands that change what is monitored or how:
//! `FAILOVER`, `MONITOR`, `REMOVE`, `SET`, `RESET`, `FLUSHCONFIG` and
//! `CONFIG GET|SET`.
//!
//! Arguments are validated here, with Sentinel's exact error texts; the
//! change itself is made by the runtime, through the core, and saved in the
//! state file before the reply is sent.
//!
//! # Format
//!
//! ```text
//! SENTINEL FAILOVER <name>                    -> +OK | -INPROG … | -NOGOODSLAVE …
//! SENTINEL MONITOR <name> <ip> <port> <quorum> -> +OK | -ERR Duplicate master name. | …
//!     (an empty name, or one with a space, newline or byte outside `!`..`~`:
//!      -ERR Master names cannot contain spaces, newlines or special characters.
//!      a name longer than 1024 bytes:
//!      -ERR Master names cannot be longer than 1024 bytes.)
//! SENTINEL REMOVE <name>                      -> +OK | -ERR No such master with that name
//! SENTINEL SET <name> <option> <value> […]    -> +OK | -ERR Invalid argument '…' for SENTINEL SET '…'
//! SENTINEL RESET <pattern>                    -> :count
//! SENTINEL FLUSHCONFIG                        -> +OK
//! SENTINEL CONFIG GET <pattern>…              -> flat array (RESP2) | map (RESP3)
//! SENTINEL CONFIG SET <param> <value> […]     -> +OK
//! ```
//!
//! Unlike Sentinel, `SET` and `CONFIG SET` apply all their options or none
//! (Sentinel keeps the options before a bad one); the replies are the same.
//!
//! A change that cannot be saved (`MONITOR`, `REMOVE`, `SET`, `FLUSHCONFIG`,
//! `CONFIG SET`) gets Sentinel's `-ERR Failed to save config file. Check
//! server logs.` and, unlike Sentinel, is not made; a `FAILOVER` whose
//! epoch cannot be saved gets the same reply and does not start acting.

use std::net::IpAddr;

use valkyrie_protocol::Frame;

use super::call::{switch, text};
use super::pubsub::glob_match;
use crate::config::bounds::{self, strict_long};
use crate::config::{GroupConfig, Secret};
use crate::runtime::{Handle, Refusal, SetChange};
use crate::state::RuntimeConfig;

/// `+OK`, or the refusal's text.
fn ok_or_error(r: Result<(), Refusal>) -> Frame {
    match r {
        Ok(()) => Frame::simple("OK"),
        Err(e) => Frame::error(e.to_string()),
    }
}

/// `SENTINEL FAILOVER <name>`.
pub async fn failover(handle: &Handle, name: &[u8]) -> Frame {
    let group = text(name);
    ok_or_error(handle.failover(group).await)
}

/// `SENTINEL MONITOR <name> <ip> <port> <quorum>`.
pub async fn monitor(handle: &Handle, args: &[&[u8]], own: std::net::SocketAddr) -> Frame {
    let [name, host, port, quorum] = args else {
        return super::call::wrong_arity("sentinel|monitor");
    };
    // Checked in Sentinel's order: quorum, port, quorum range, address.
    let Some(quorum) = strict_long(quorum) else {
        return Frame::error("ERR Invalid quorum");
    };
    let Some(port) = strict_long(port) else {
        return Frame::error("ERR Invalid port");
    };
    if quorum <= 0 {
        return Frame::error("ERR Quorum must be 1 or greater.");
    }
    let name = text(name);
    if let Some(e) = crate::config::master_name_error(&name) {
        return Frame::error(format!("ERR {e}"));
    }
    let host = text(host);
    let settings = match handle.config_get().await {
        Ok(s) => s,
        Err(e) => return Frame::error(e.to_string()),
    };
    // A host name must also fit event payloads and `INFO` lines (no
    // spaces, newlines or control characters), resolvable or not.
    let valid_host = host.parse::<IpAddr>().is_ok()
        || (settings.resolve_hostnames
            && crate::config::valid_name(&host)
            && tokio::net::lookup_host((host.as_str(), 0))
                .await
                .is_ok_and(|mut addrs| addrs.next().is_some()));
    if !valid_host {
        return Frame::error("ERR Invalid IP address or hostname specified");
    }
    let Ok(port) = u16::try_from(port) else {
        return Frame::error("ERR Invalid port number.");
    };
    // Our own Sentinel port (the one this request came in on) is no
    // master: monitoring it would fail every second and bring our own
    // hellos back as a duplicate identity.
    if let Ok(ip) = host.parse::<IpAddr>()
        && port == own.port()
        && (ip == own.ip() || ip.is_loopback() || ip.is_unspecified())
    {
        return Frame::error(format!(
            "ERR {host}:{port} is this Valkyrie's own Sentinel port, not a master"
        ));
    }
    let quorum = bounds::count(quorum);
    let mut group = GroupConfig::new(name, host, port, quorum);
    // Sentinel's defaults for a new group, as `SENTINEL DEBUG` set them.
    let timers = *handle.timers.borrow();
    group.down_after = std::time::Duration::from_millis(timers.default_down_after);
    group.failover_timeout = std::time::Duration::from_millis(timers.default_failover_timeout);
    ok_or_error(handle.monitor(group).await)
}

/// `SENTINEL REMOVE <name>`.
pub async fn remove(handle: &Handle, name: &[u8]) -> Frame {
    let group = text(name);
    ok_or_error(handle.remove(group).await)
}

/// Parses `SENTINEL SET` options into changes, or Sentinel's error.
/// `deny`: `deny-scripts-reconfig yes`. Script paths are checked after
/// (`runnable`), off this task's thread.
fn set_changes(options: &[&[u8]], deny: bool) -> Result<Vec<SetChange>, Frame> {
    let bad = |value: &[u8], option: &str| {
        Frame::error(format!(
            "ERR Invalid argument '{}' for SENTINEL SET '{option}'",
            String::from_utf8_lossy(value)
        ))
    };
    // Sentinel's bounds (`config::bounds`): 1 ..= i64::MAX.
    let positive =
        |value: &[u8], option: &str| bounds::positive(value).ok_or_else(|| bad(value, option));
    let mut changes = Vec::new();
    let mut j = 0;
    while j < options.len() {
        let option = text(options[j]);
        let lower = option.to_ascii_lowercase();
        let more = options.len() - j - 1;
        let value: &[u8] = options.get(j + 1).copied().unwrap_or_default();
        let change = match lower.as_str() {
            "down-after-milliseconds" if more > 0 => {
                SetChange::DownAfter(bounds::millis(positive(value, &option)?))
            }
            "failover-timeout" if more > 0 => {
                SetChange::FailoverTimeout(bounds::millis(positive(value, &option)?))
            }
            "parallel-syncs" if more > 0 => {
                SetChange::ParallelSyncs(bounds::count(positive(value, &option)?))
            }
            "quorum" if more > 0 => SetChange::Quorum(bounds::count(positive(value, &option)?)),
            "notification-script" | "client-reconfig-script" if more > 0 => {
                if deny {
                    return Err(Frame::error(
                        "ERR Reconfiguration of scripts path is denied for security reasons. \
                         Check the deny-scripts-reconfig configuration directive in your \
                         Sentinel configuration",
                    ));
                }
                // `""` clears it.
                let path = (!value.is_empty()).then(|| text(value));
                if lower == "notification-script" {
                    SetChange::NotificationScript(path)
                } else {
                    SetChange::ClientReconfigScript(path)
                }
            }
            "auth-pass" if more > 0 => {
                SetChange::AuthPass((!value.is_empty()).then(|| Secret::new(text(value))))
            }
            "auth-user" if more > 0 => {
                SetChange::AuthUser((!value.is_empty()).then(|| text(value)))
            }
            "rename-command" if more > 1 => {
                let new = &options[j + 2];
                if value.is_empty() || new.is_empty() {
                    let culprit = if new.is_empty() { new } else { value };
                    return Err(bad(culprit, &option));
                }
                if let Err(e) = crate::config::check_rename(&text(value), &text(new)) {
                    return Err(Frame::error(format!("ERR {e}")));
                }
                j += 1;
                SetChange::RenameCommand(text(value), text(new))
            }
            "master-reboot-down-after-period" | "primary-reboot-down-after-period" if more > 0 => {
                match bounds::non_negative(value) {
                    Some(n) => SetChange::RebootDownAfter(bounds::millis(n)),
                    None => return Err(bad(value, &option)),
                }
            }
            "write-fence" if more > 0 => match crate::core::FenceMode::parse(&text(value)) {
                Some(m) => SetChange::WriteFence(m),
                None => return Err(bad(value, &option)),
            },
            "write-fence-lag" if more > 0 => match crate::config::fence_lag(&text(value)) {
                Ok(s) => SetChange::WriteFenceLag(s),
                Err(_) => return Err(bad(value, &option)),
            },
            _ => {
                return Err(Frame::error(format!(
                    "ERR Unknown option or number of arguments for SENTINEL SET '{option}'"
                )));
            }
        };
        changes.push(change);
        j += 2;
    }
    Ok(changes)
}

/// `SENTINEL SET <name> <option> <value> […]`.
pub async fn set(handle: &Handle, args: &[&[u8]]) -> Frame {
    // Sentinel's arity for `sentinel|set` is -5.
    let Some((name, options)) = args.split_first().filter(|(_, o)| o.len() >= 2) else {
        return super::call::wrong_arity("sentinel|set");
    };
    let group = text(name);
    if !handle.topology.borrow().groups.contains_key(&group) {
        return Frame::error(crate::core::AdminError::NoSuchMaster.to_string());
    }
    let changes = match set_changes(options, handle.script_policy.deny) {
        Ok(c) => c,
        Err(f) => return f,
    };
    if let Err(f) = runnable(&handle.script_policy.dir, &changes).await {
        return f;
    }
    ok_or_error(handle.set(group, changes).await)
}

/// Sentinel's check of each script path `changes` set: it exists and may
/// be run (`access(X_OK)`, relative to `dir`), on a blocking thread.
async fn runnable(dir: &std::path::Path, changes: &[SetChange]) -> Result<(), Frame> {
    for change in changes {
        let (path, why) = match change {
            SetChange::NotificationScript(Some(p)) => (p, crate::config::BAD_NOTIFICATION_SCRIPT),
            SetChange::ClientReconfigScript(Some(p)) => (p, crate::config::BAD_RECONFIG_SCRIPT),
            _ => continue,
        };
        let (dir, path) = (dir.to_path_buf(), path.clone());
        let ok = tokio::task::spawn_blocking(move || crate::config::script_runnable(&dir, &path))
            .await
            .unwrap_or(false);
        if !ok {
            return Err(Frame::error(format!("ERR {why}")));
        }
    }
    Ok(())
}

/// `SENTINEL RESET <pattern>`: matched case-sensitively, as Sentinel does.
pub async fn reset(handle: &Handle, pattern: &[u8]) -> Frame {
    let groups: Vec<String> = handle
        .topology
        .borrow()
        .groups
        .keys()
        .filter(|name| glob_match(pattern, name.as_bytes()))
        .cloned()
        .collect();
    match handle.reset(groups).await {
        Ok(n) => Frame::Integer(i64::try_from(n).unwrap_or(i64::MAX)),
        Err(e) => Frame::error(e.to_string()),
    }
}

/// `SENTINEL FLUSHCONFIG`.
pub async fn flushconfig(handle: &Handle) -> Frame {
    ok_or_error(handle.flush_config().await)
}

/// The parameters `SENTINEL CONFIG` knows, in Sentinel's order.
const PARAMETERS: [&str; 7] = [
    "resolve-hostnames",
    "announce-hostnames",
    "announce-ip",
    "announce-port",
    "sentinel-user",
    "sentinel-pass",
    "loglevel",
];

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn parameter(settings: &RuntimeConfig, name: &str) -> String {
    match name {
        "resolve-hostnames" => yes_no(settings.resolve_hostnames).to_string(),
        "announce-hostnames" => yes_no(settings.announce_hostnames).to_string(),
        "announce-ip" => settings.announce_ip.clone().unwrap_or_default(),
        "announce-port" => settings.announce_port.to_string(),
        "sentinel-user" => settings.sentinel_user.clone().unwrap_or_default(),
        // Sentinel shows it to whoever may run SENTINEL CONFIG.
        "sentinel-pass" => settings
            .sentinel_pass
            .as_ref()
            .map(|p| p.expose().to_string())
            .unwrap_or_default(),
        _ => settings.loglevel.clone(),
    }
}

/// `SENTINEL CONFIG GET|SET …` (`args` starts after `CONFIG`).
pub async fn config(handle: &Handle, args: &[&[u8]]) -> Frame {
    const ONLY: &str = "ERR Only SENTINEL CONFIG GET <param> [<param> <param> ...] / SET <param> \
                        <value> [<param> <value> ...] are supported.";
    if args.len() < 2 {
        return super::call::wrong_arity("sentinel|config");
    }
    let sub = args[0].to_ascii_lowercase();
    let settings = match handle.config_get().await {
        Ok(s) => s,
        Err(e) => return Frame::error(e.to_string()),
    };
    match sub.as_slice() {
        b"get" => {
            let mut out = Vec::new();
            let mut seen = Vec::new();
            for pattern in &args[1..] {
                for name in PARAMETERS {
                    if !seen.contains(&name) && glob_match_nocase(pattern, name.as_bytes()) {
                        seen.push(name);
                        out.push((Frame::bulk(name), Frame::bulk(parameter(&settings, name))));
                    }
                }
            }
            Frame::Map(out)
        }
        b"set" if args.len() >= 3 => match config_set(settings, &args[1..]) {
            Ok(settings) => ok_or_error(handle.config_set(settings).await),
            Err(f) => f,
        },
        _ => Frame::error(ONLY),
    }
}

fn glob_match_nocase(pattern: &[u8], name: &[u8]) -> bool {
    glob_match(&pattern.to_ascii_lowercase(), name)
}

/// Validates every `<param> <value>` pair, then applies them to `settings`.
fn config_set(mut settings: RuntimeConfig, pairs: &[&[u8]]) -> Result<RuntimeConfig, Frame> {
    let mut seen: Vec<String> = Vec::new();
    let mut i = 0;
    while i < pairs.len() {
        let option = text(pairs[i]);
        let lower = option.to_ascii_lowercase();
        if !PARAMETERS.contains(&lower.as_str()) {
            return Err(Frame::error(format!(
                "ERR Invalid argument '{option}' to SENTINEL CONFIG SET"
            )));
        }
        if seen.contains(&lower) {
            return Err(Frame::error(format!(
                "ERR Duplicate argument '{option}' to SENTINEL CONFIG SET"
            )));
        }
        seen.push(lower.clone());
        let Some(value) = pairs.get(i + 1) else {
            return Err(Frame::error(format!(
                "ERR Missing argument '{option}' value"
            )));
        };
        let value = text(value);
        let badfmt = || {
            Frame::error(format!(
                "ERR Invalid value '{value}' to SENTINEL CONFIG SET '{option}'"
            ))
        };
        let yes_no = |v: &str| switch(v.as_bytes(), "yes", "no");
        match lower.as_str() {
            "resolve-hostnames" => {
                settings.resolve_hostnames = yes_no(&value).ok_or_else(badfmt)?
            }
            "announce-hostnames" => {
                settings.announce_hostnames = yes_no(&value).ok_or_else(badfmt)?;
            }
            "announce-port" => {
                settings.announce_port = bounds::port(value.as_bytes()).ok_or_else(badfmt)?;
            }
            "loglevel" => {
                let level = value.to_ascii_lowercase();
                if !matches!(
                    level.as_str(),
                    "debug" | "verbose" | "notice" | "warning" | "nothing"
                ) {
                    return Err(badfmt());
                }
                settings.loglevel = level;
            }
            "announce-ip" => {
                // Re-emitted raw in every hello and event: printable, and
                // an IP address unless resolve-hostnames.
                if !value.is_empty() {
                    crate::core::check_host(&value, settings.resolve_hostnames)
                        .map_err(|_| badfmt())?;
                }
                settings.announce_ip = (!value.is_empty()).then_some(value);
            }
            "sentinel-user" => settings.sentinel_user = (!value.is_empty()).then_some(value),
            _ => settings.sentinel_pass = (!value.is_empty()).then(|| Secret::new(value)),
        }
        i += 2;
    }
    Ok(settings)
}
