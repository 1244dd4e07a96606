//! The reconciler's metrics: how many reconciles ran and how they ended,
//! how long they took, and why they failed. Named and described here, in
//! the style of `src/metrics/` (a `valkyrie_` prefix, the unit in the
//! name, `_total` on counters); recorded through the `metrics` facade, so
//! with no recorder installed (no admin port) every helper is a no-op.
//!
//! Labels are bounded: `result` is `ok` or `error`, `reason` is
//! [`Error::metric_label`]. The CR's name is never a label.

use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};

use super::error::Error;

/// Reconciles that ended, by `result` (`ok`, `error`).
pub const RECONCILES: &str = "valkyrie_reconcile_total";
/// How long reconciles took.
pub const RECONCILE_DURATION: &str = "valkyrie_reconcile_duration_seconds";
/// Reconciles that failed, by `reason` ([`Error::metric_label`]).
pub const RECONCILE_ERRORS: &str = "valkyrie_reconcile_errors_total";

/// A reconcile is a handful of API round trips: milliseconds on a quiet
/// API server, seconds when it is slow or far.
pub const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// What the daemon hands to `crate::metrics::install`.
pub const EXTENSION: crate::metrics::Extension = crate::metrics::Extension {
    buckets: &[(RECONCILE_DURATION, RECONCILE_BUCKETS)],
    describe,
};

/// Describes the reconciler's metrics (help text and unit).
pub fn describe() {
    describe_counter!(
        RECONCILES,
        "Reconciles of ValkeyClusters by the Lease holder, by result (ok, error)."
    );
    describe_histogram!(
        RECONCILE_DURATION,
        Unit::Seconds,
        "Duration of reconciles of ValkeyClusters, by result."
    );
    describe_counter!(
        RECONCILE_ERRORS,
        "Failed reconciles of ValkeyClusters, by reason (forbidden, conflict, transport, \
         render, secret_missing, …); each is retried with an exponential backoff."
    );
}

/// One reconcile ended.
pub fn reconciled(outcome: Result<(), &Error>, took: Duration) {
    let result = if outcome.is_ok() { "ok" } else { "error" };
    counter!(RECONCILES, "result" => result).increment(1);
    histogram!(RECONCILE_DURATION, "result" => result).record(took.as_secs_f64());
    if let Err(e) = outcome {
        counter!(RECONCILE_ERRORS, "reason" => e.metric_label()).increment(1);
    }
}
