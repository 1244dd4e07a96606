//! Value readers shared by the parser's directives: numbers, Valkey's
//! memory units, times, `yes`/`no`.

use std::time::Duration;

use crate::config::bounds;

pub(super) fn one<'a>(name: &str, args: &'a [String]) -> Result<&'a str, String> {
    match args {
        [v] => Ok(v),
        _ => Err(format!("wrong number of arguments for '{name}'")),
    }
}

pub(super) fn number(v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .map_err(|_| format!("'{v}' is not a non-negative integer"))
}

/// Valkey's memory units: `1k` = 1000, `1kb` = 1024, likewise m/mb, g/gb.
pub(super) fn memory(v: &str) -> Result<u64, String> {
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
pub(super) fn time(
    v: &str,
    check: fn(&[u8]) -> Option<i64>,
    message: &str,
) -> Result<Duration, String> {
    check(v.as_bytes())
        .map(bounds::millis)
        .ok_or_else(|| format!("'{v}': {message}"))
}

pub(super) fn yes_no(v: &str) -> Result<bool, String> {
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
