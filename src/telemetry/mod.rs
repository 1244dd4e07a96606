//! Logging: human-readable text by default, one JSON object per line with
//! `--log-format json`; the level from `loglevel` (Sentinel's names) or,
//! overriding it, a `VALKYRIE_LOG` filter (`tracing_subscriber`'s
//! `EnvFilter` syntax, e.g. `valkyrie=debug,info`).
//!
//! Secrets never reach a log line: passwords are held as
//! [`Secret`](crate::config::Secret), whose `Debug` prints `******`, ACL
//! rules print only their count, and nothing logs a client's command
//! arguments.

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
    use tracing_subscriber::prelude::*;
    let from_env = tracing_subscriber::EnvFilter::try_from_env("VALKYRIE_LOG").ok();
    let fixed = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| tracing_subscriber::EnvFilter::new(filter_for(level)));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let installed = if json {
        registry.with(fmt.json()).try_init()
    } else {
        registry.with(fmt).try_init()
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

#[cfg(test)]
mod tests;
