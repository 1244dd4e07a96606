//! `SENTINEL DEBUG [<param> <value> …]`: Sentinel's timers
//! ([`Timers`](crate::core::Timers)), shown and changed with Valkey
//! 8.0.1's names, order, checks and error texts.
//!
//! # Format
//!
//! ```text
//! SENTINEL DEBUG                       -> 13 pairs, RESP2 flat array | RESP3 map:
//!     INFO-PERIOD PING-PERIOD ASK-PERIOD PUBLISH-PERIOD DEFAULT-DOWN-AFTER
//!     DEFAULT-FAILOVER-TIMEOUT TILT-TRIGGER TILT-PERIOD SLAVE-RECONF-TIMEOUT
//!     MIN-LINK-RECONNECT-PERIOD ELECTION-TIMEOUT SCRIPT-MAX-RUNTIME
//!     SCRIPT-RETRY-DELAY, each value a bulk string of milliseconds
//! SENTINEL DEBUG <param> <value> […]   -> +OK
//!     a value that is not a whole number of at least 1 (Valkey's string2ll):
//!     -ERR Invalid argument '<value>' for SENTINEL DEBUG '<param>'
//!     an unknown parameter, or one without a value:
//!     -ERR Unknown option or number of arguments for SENTINEL DEBUG '<param>'
//! ```
//!
//! Parameter names are matched case-insensitively, and echoed in errors as
//! the client wrote them. Unlike Sentinel (which keeps the pairs before a
//! bad one), the pairs apply all or none, as `SENTINEL SET` and `CONFIG
//! SET` do here. Nothing is saved: as Sentinel's, the values last until the
//! daemon restarts.

use valkyrie_protocol::Frame;

use super::super::call::text;
use crate::config::bounds;
use crate::core::timers::NAMES;
use crate::core::{Millis, Timers};
use crate::runtime::Handle;

/// `SENTINEL DEBUG` (`pairs` are the arguments after `DEBUG`).
pub(super) async fn run(handle: &Handle, pairs: &[&[u8]]) -> Frame {
    if pairs.is_empty() {
        return reply(&handle.timers.borrow());
    }
    match parse(pairs) {
        Ok(changes) => match handle.debug(changes).await {
            Ok(()) => Frame::simple("OK"),
            Err(e) => Frame::error(e.to_string()),
        },
        Err(e) => e,
    }
}

/// Every timer, upper-case names in Sentinel's order, values as bulk
/// strings.
pub(crate) fn reply(timers: &Timers) -> Frame {
    Frame::Map(
        NAMES
            .iter()
            .map(|name| {
                let value = timers.get(name).unwrap_or_default();
                (
                    Frame::bulk(name.to_ascii_uppercase()),
                    Frame::bulk(value.to_string()),
                )
            })
            .collect(),
    )
}

/// The `<param> <value>` pairs as timer changes, checked in order with
/// Sentinel's errors: the first bad pair is the reply.
pub(crate) fn parse(pairs: &[&[u8]]) -> Result<Vec<(&'static str, Millis)>, Frame> {
    let mut changes = Vec::with_capacity(pairs.len() / 2);
    let mut j = 0;
    while j < pairs.len() {
        let option = text(pairs[j]);
        let known = NAMES.iter().find(|name| name.eq_ignore_ascii_case(&option));
        let (Some(name), Some(value)) = (known, pairs.get(j + 1)) else {
            return Err(Frame::error(format!(
                "ERR Unknown option or number of arguments for SENTINEL DEBUG '{option}'"
            )));
        };
        let Some(ms) = bounds::positive(value) else {
            return Err(Frame::error(format!(
                "ERR Invalid argument '{}' for SENTINEL DEBUG '{option}'",
                text(value)
            )));
        };
        changes.push((*name, ms.unsigned_abs()));
        j += 2;
    }
    Ok(changes)
}
