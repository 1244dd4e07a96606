//! `SHUTDOWN`: the daemon exits, as a sentinel does.
//!
//! # Format
//!
//! ```text
//! SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE]  -> (connection closed, daemon exits)
//! SHUTDOWN ABORT                        -> -ERR No shutdown in progress.
//! SHUTDOWN <anything else>              -> -ERR syntax error
//! ```
//!
//! Valkyrie's state is on disk after every decision, so there is nothing to
//! save: the flags are accepted and the exit is the same graceful one as on
//! SIGTERM.

use super::call::Call;
use valkyrie_protocol::Frame;

pub async fn run(call: &mut Call<'_>) -> Frame {
    let (args, handle, session) = (call.args, call.handle, &mut *call.session);
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for a in &args[1..] {
        match a.to_ascii_lowercase().as_slice() {
            b"save" => save = true,
            b"nosave" => nosave = true,
            b"abort" => abort = true,
            b"now" | b"force" => other = true,
            _ => return Frame::error("ERR syntax error"),
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        return Frame::error("ERR syntax error");
    }
    if abort {
        return Frame::error("ERR No shutdown in progress.");
    }
    tracing::warn!(client = session.id, "SHUTDOWN requested by a client");
    handle.request_shutdown();
    session.close_now = true;
    Frame::simple("OK")
}
