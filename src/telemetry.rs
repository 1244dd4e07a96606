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

/// Sets up logging to stderr: human text, or one JSON object per line.
/// A second call does nothing (the first subscriber stays).
pub fn init_logging(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("VALKYRIE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter_for(level)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_levels_map_to_filters() {
        assert_eq!(filter_for("debug"), "valkyrie=debug,info");
        assert_eq!(filter_for("notice"), "info");
        assert_eq!(filter_for("verbose"), "info");
        assert_eq!(filter_for("warning"), "warn");
        assert_eq!(filter_for("nothing"), "off");
        assert_eq!(filter_for("valkyrie=trace"), "valkyrie=trace");
    }
}
