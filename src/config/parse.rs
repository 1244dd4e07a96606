//! The `sentinel.conf` parser.
//!
//! Lines are split with Valkey's own rules (quotes, `\xHH` escapes) and
//! the directive name is case-insensitive. As in Valkey, the `sentinel …`
//! lines are collected while the file is read and applied once it is
//! whole, in three passes: the daemon-wide ones (`myid`, `announce-*`,
//! `resolve-hostnames`, …), then every `monitor`, then the rest, each
//! pass in file order. So `sentinel down-after-milliseconds m …` may come
//! before `sentinel monitor m …`; a per-master line naming a master no
//! `monitor` line creates is still an error naming that line.
//!
//! Every directive of valkey-server 8.0.1 is legal, since Sentinel reads
//! the server's whole table: those without a meaning for Valkyrie are
//! reported as ignored ([`Note::warning`]); a name Valkey does not know
//! either is an error.

use std::collections::HashMap;
use std::path::Path;

use super::settings::{Config, ConfigError, Note};

mod directive;
mod sentinel;
mod values;

pub use values::fence_lag;

/// The `sentinel` subcommands Valkey applies before every `monitor` line
/// (its "pre-monitor" options): daemon-wide settings a group may read.
const BEFORE_MONITORS: &[&str] = &[
    "announce-ip",
    "announce-port",
    "deny-scripts-reconfig",
    "sentinel-user",
    "sentinel-pass",
    "current-epoch",
    "myid",
    "resolve-hostnames",
    "announce-hostnames",
];

/// When a `sentinel <sub> …` line is applied: 0 before the monitors, 1
/// with them, 2 after them.
fn pass_of(sub: &str) -> u8 {
    if sub == "monitor" {
        1
    } else if BEFORE_MONITORS.contains(&sub) {
        0
    } else {
        2
    }
}

/// A `sentinel …` line, kept until the whole file is read.
struct Queued {
    line: usize,
    sub: String,
    args: Vec<String>,
}

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
    let mut queued: Vec<Queued> = Vec::new();
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
        if lower == "sentinel" {
            // A bare `sentinel` line is what makes a valkey-server a
            // sentinel: nothing to apply.
            if let Some((sub, rest)) = args.split_first() {
                let sub = sub.to_ascii_lowercase();
                if sub == "announce-ip" {
                    announce_line = line;
                }
                queued.push(Queued {
                    line,
                    sub,
                    args: rest.to_vec(),
                });
            }
            continue;
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
    // The file is whole: the `sentinel` lines in Valkey's three passes
    // (a stable sort keeps the file order within each).
    queued.sort_by_key(|q| pass_of(&q.sub));
    for q in &queued {
        let mut ctx = Line {
            config: &mut config,
            notes: &mut notes,
            monitors: &mut monitors,
            by_name: &mut by_name,
            line: q.line,
        };
        ctx.sentinel(&q.sub, &q.args)
            .map_err(|message| ConfigError::Directive {
                path: path.to_string(),
                line: q.line,
                message,
            })?;
    }
    // Once the whole file is read: a `known-sentinel` line (a file a
    // sentinel rewrote) already names the peers the quorum counts.
    for (index, line) in &monitors {
        if let Some(g) = config.groups.get(*index)
            && g.quorum > 1
            && g.known_sentinels.is_empty()
        {
            notes.push(Note {
                warning: false,
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
            warning: false,
        });
    }

    fn warn(&mut self, message: impl Into<String>) {
        self.notes.push(Note {
            line: self.line,
            message: message.into(),
            warning: true,
        });
    }
}
