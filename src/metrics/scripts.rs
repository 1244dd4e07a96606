//! The scripts' metrics: jobs running and queued, runs by outcome, jobs
//! dropped from a full queue.

use metrics::{counter, describe_counter, describe_gauge, gauge};

/// Scripts running now.
pub const SCRIPTS_RUNNING: &str = "valkyrie_scripts_running";
/// Script jobs queued, the running ones included.
pub const SCRIPTS_QUEUED: &str = "valkyrie_scripts_queued";
/// Script runs and start attempts, by outcome.
pub const SCRIPT_RUNS: &str = "valkyrie_script_runs_total";
/// Script jobs dropped from a full queue.
pub const SCRIPTS_DROPPED: &str = "valkyrie_scripts_dropped_total";

/// Describes the scripts' metrics.
pub fn describe() {
    describe_gauge!(
        SCRIPTS_RUNNING,
        "Notification and client-reconfig scripts running now (at most 16)."
    );
    describe_gauge!(
        SCRIPTS_QUEUED,
        "Script jobs queued, the running ones included (at most 256; INFO's \
         sentinel_scripts_queue_length)."
    );
    describe_counter!(
        SCRIPT_RUNS,
        "Script runs by outcome: ok (exit 0), retried (exit 1 or a signal, run again later), \
         failed (given up, a -script-error event), spawn_retried (not started for lack of \
         resources, tried again 100 ms later), spawn_failed (could not be run at all)."
    );
    describe_counter!(
        SCRIPTS_DROPPED,
        "Script jobs dropped, the oldest not running, because 256 were queued."
    );
}

/// Sets the gauges of running and queued (running included) jobs.
pub fn scripts_queue(running: usize, queued: usize) {
    gauge!(SCRIPTS_RUNNING).set(running as f64);
    gauge!(SCRIPTS_QUEUED).set(queued as f64);
}

/// Counts a run, or an attempt to start one, by `outcome`.
pub fn script_run(outcome: &'static str) {
    counter!(SCRIPT_RUNS, "outcome" => outcome).increment(1);
}

/// Counts a job dropped from a full queue.
pub fn script_dropped() {
    counter!(SCRIPTS_DROPPED).increment(1);
}
