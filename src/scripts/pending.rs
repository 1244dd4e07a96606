//! `SENTINEL PENDING-SCRIPTS`: one entry per job, in Sentinel's field
//! order (sc:919-956).

use crate::core::Millis;

/// One job as `SENTINEL PENDING-SCRIPTS` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The program as configured, then its arguments.
    pub argv: Vec<String>,
    /// Whether it runs now (`running`) or waits (`scheduled`).
    pub running: bool,
    /// The child's pid; 0 unless running.
    pub pid: u32,
    /// Running: ms since it started (`run-time`). Waiting: ms until it is
    /// due, at least 0 (`run-delay`).
    pub millis: Millis,
    /// Runs started so far (`retry-num`).
    pub retry_num: u32,
}

/// A value of a [`Pending`] entry on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field<'a> {
    /// An array of bulk strings (`argv`).
    Strings(&'a [String]),
    /// A bulk string: numbers too are bulk strings, as in Sentinel.
    Text(String),
}

impl Pending {
    /// The entry's five fields, in Sentinel's order: `argv`, `flags`,
    /// `pid`, `run-time` or `run-delay`, `retry-num` (a map of 5, or a
    /// flat array of 10 in RESP2).
    pub fn fields(&self) -> [(&'static str, Field<'_>); 5] {
        let (flags, time) = if self.running {
            ("running", "run-time")
        } else {
            ("scheduled", "run-delay")
        };
        [
            ("argv", Field::Strings(&self.argv)),
            ("flags", Field::Text(flags.to_string())),
            ("pid", Field::Text(self.pid.to_string())),
            (time, Field::Text(self.millis.to_string())),
            ("retry-num", Field::Text(self.retry_num.to_string())),
        ]
    }
}
