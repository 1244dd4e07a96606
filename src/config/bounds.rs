//! The bounds Sentinel puts on numeric settings, shared by every path that
//! sets them: the configuration file, `SENTINEL SET`, `SENTINEL MONITOR`
//! and `SENTINEL CONFIG SET`.
//!
//! Numbers are read as Valkey's `string2ll` reads them: an optional `-`,
//! then decimal digits without a leading zero (`0` alone is fine), no `+`,
//! no spaces, and within `i64`. So `9223372036854775807` is accepted (as
//! Sentinel does; the core saturates its arithmetic) and
//! `9223372036854775808`, `05`, `-0` and `+5` are not.
//!
//! | setting | accepted |
//! |---|---|
//! | `down-after-milliseconds`, `failover-timeout` | 1 ..= `i64::MAX` ms |
//! | `master-reboot-down-after-period` | 0 ..= `i64::MAX` ms |
//! | `parallel-syncs`, `quorum` | 1 ..= `i64::MAX` (kept saturated to `u32`) |
//! | ports | 0 ..= 65535 |

use std::time::Duration;

/// Sentinel's file error for a zero, negative or unreadable
/// `down-after-milliseconds` / `failover-timeout`.
pub const ZERO_TIME: &str = "negative or zero time parameter.";
/// Sentinel's file error for a negative `master-reboot-down-after-period`.
pub const NEGATIVE_TIME: &str = "negative time parameter.";
/// Sentinel's error for a quorum below 1.
pub const BAD_QUORUM: &str = "Quorum must be 1 or greater.";
/// Sentinel's error for a port outside 0..=65535.
pub const BAD_PORT: &str = "Invalid port number.";

/// A number as Valkey's `string2ll` reads it, or `None`.
pub fn strict_long(b: &[u8]) -> Option<i64> {
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    let canonical = match digits {
        [] => false,
        [b'0'] => digits.len() == b.len(), // "0", never "-0"
        [first, ..] => *first != b'0' && digits.iter().all(u8::is_ascii_digit),
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// A value of at least 1.
pub fn positive(b: &[u8]) -> Option<i64> {
    strict_long(b).filter(|n| *n > 0)
}

/// A value of at least 0.
pub fn non_negative(b: &[u8]) -> Option<i64> {
    strict_long(b).filter(|n| *n >= 0)
}

/// Milliseconds of a value already checked non-negative.
pub fn millis(n: i64) -> Duration {
    Duration::from_millis(n.unsigned_abs())
}

/// A count kept as `u32`, saturated (Sentinel accepts up to `i64::MAX`).
pub fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// A port number, 0..=65535.
pub fn port(b: &[u8]) -> Option<u16> {
    strict_long(b).and_then(|n| u16::try_from(n).ok())
}

/// A listening port, with Valkey's texts for its numeric configs.
pub(super) fn listen_port(v: &str) -> Result<u16, String> {
    match strict_long(v.as_bytes()) {
        None => Err(format!(
            "'{v}': argument couldn't be parsed into an integer"
        )),
        Some(n) => u16::try_from(n)
            .map_err(|_| format!("'{v}': argument must be between 0 and 65535 inclusive")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_as_string2ll() {
        for (s, want) in [
            ("0", Some(0)),
            ("1", Some(1)),
            ("-5", Some(-5)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("05", None),
            ("-0", None),
            ("+5", None),
            (" 5", None),
            ("5 ", None),
            ("", None),
            ("-", None),
            ("1.5", None),
            ("0x10", None),
        ] {
            assert_eq!(strict_long(s.as_bytes()), want, "{s:?}");
        }
        assert_eq!(positive(b"0"), None);
        assert_eq!(non_negative(b"0"), Some(0));
        assert_eq!(port(b"65535"), Some(65535));
        assert_eq!(port(b"65536"), None);
        assert_eq!(count(i64::MAX), u32::MAX);
    }
}
