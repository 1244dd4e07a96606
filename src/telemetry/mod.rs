//! Logging: human-readable text by default, one JSON object per line with
//! `--log-format json`; the level from `loglevel` (Sentinel's names) or,
//! overriding it, a `VALKYRIE_LOG` filter (`tracing_subscriber`'s
//! `EnvFilter` syntax, e.g. `valkyrie=debug,info`). Lines go to standard
//! error, or to the `logfile`, which follows rotation ([`logfile`]).
//!
//! Secrets never reach a log line: passwords are held as
//! [`Secret`](crate::config::Secret), whose `Debug` prints `******`, ACL
//! rules print only their count, and nothing logs a client's command
//! arguments.
//!
//! Nothing a peer, a client or an operator wrote can forge a log line: in
//! the text format every field, the message included, goes through
//! [`EscapedFields`], which writes control characters (newline, carriage
//! return, tab, escape, …) and Unicode line separators as Rust escapes
//! (`\n`, `\u{1b}`), so one event is always one line. The JSON format
//! escapes them by construction.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

pub mod logfile;

pub use logfile::LogFile;

/// The `EnvFilter` directive for a Sentinel `loglevel` (other values are
/// taken as filter directives themselves).
pub fn filter_for(level: &str) -> &str {
    match level {
        "debug" => "valkyrie=debug,info",
        "verbose" | "notice" => "info",
        "warning" => "warn",
        "nothing" => "off",
        other => other,
    }
}

type Reload = Box<dyn Fn(&str) + Send + Sync>;

/// Changes the level of the installed logger (`SENTINEL CONFIG SET
/// loglevel`).
static RELOAD: std::sync::OnceLock<Reload> = std::sync::OnceLock::new();

/// Sets up logging to stderr: human text, or one JSON object per line.
/// A second call does nothing (the first subscriber stays). A
/// `VALKYRIE_LOG` filter wins over `level`, and then also over later
/// `SENTINEL CONFIG SET loglevel`.
pub fn init_logging(level: &str, json: bool) {
    init_logging_to(level, json, None);
}

/// As [`init_logging`], to `logfile` when given (plain text, without
/// terminal colours), else to stderr.
pub fn init_logging_to(level: &str, json: bool, logfile: Option<std::sync::Arc<LogFile>>) {
    use tracing_subscriber::prelude::*;
    let from_env = tracing_subscriber::EnvFilter::try_from_env("VALKYRIE_LOG").ok();
    let fixed = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| tracing_subscriber::EnvFilter::new(filter_for(level)));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    let to_file = logfile.is_some();
    let writer = match logfile {
        Some(file) => BoxMakeWriter::new(file),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let installed = if json {
        let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
        registry.with(fmt.json()).try_init()
    } else if to_file {
        registry
            .with(text_layer(writer).with_ansi(false))
            .try_init()
    } else {
        registry.with(text_layer(writer)).try_init()
    };
    if installed.is_ok() && !fixed {
        let _ = RELOAD.set(Box::new(move |level| {
            let _ = handle.reload(tracing_subscriber::EnvFilter::new(filter_for(level)));
        }));
    }
}

/// Applies a Sentinel `loglevel` to the running logger, if it was set up by
/// [`init_logging`] without `VALKYRIE_LOG`.
pub fn apply_loglevel(level: &str) {
    if let Some(reload) = RELOAD.get() {
        reload(level);
    }
}

/// The text-format layer, writing to `writer`, with every field escaped.
pub fn text_layer<S, W>(
    writer: W,
) -> tracing_subscriber::fmt::Layer<S, EscapedFields, tracing_subscriber::fmt::format::Format, W>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + 'static,
{
    tracing_subscriber::fmt::layer()
        .fmt_fields(EscapedFields)
        .with_writer(writer)
}

/// The text format's fields: the message first, then `name=value`
/// separated by spaces, as `tracing_subscriber`'s default, but with every
/// control character (and U+2028/U+2029) escaped, so no value can end
/// the line or start a forged one.
#[derive(Debug, Clone, Copy, Default)]
pub struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut v = FieldVisitor {
            out: Escape(writer),
            first: true,
            result: Ok(()),
        };
        fields.record(&mut v);
        v.result
    }
}

/// Writes through to the log line, escaping what could break it.
struct Escape<'w>(Writer<'w>);

impl fmt::Write for Escape<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(i) = rest.find(needs_escape) {
            self.0.write_str(&rest[..i])?;
            let mut chars = rest[i..].chars();
            if let Some(c) = chars.next() {
                write!(self.0, "{}", c.escape_default())?;
            }
            rest = chars.as_str();
        }
        self.0.write_str(rest)
    }
}

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

struct FieldVisitor<'w> {
    out: Escape<'w>,
    first: bool,
    result: fmt::Result,
}

impl Visit for FieldVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            // Quoted, as the default formatter does.
            self.record_debug(field, &value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let name = field.name();
        if name.starts_with("log.") {
            // `log` records' metadata, shown by the formatter itself.
            return;
        }
        let sep = if self.first { "" } else { " " };
        self.first = false;
        self.result = if name == "message" {
            write!(self.out, "{sep}{value:?}")
        } else {
            let name = name.strip_prefix("r#").unwrap_or(name);
            write!(self.out, "{sep}{name}={value:?}")
        };
    }
}

#[cfg(test)]
mod tests;
