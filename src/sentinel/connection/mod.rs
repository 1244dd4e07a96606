//! One client connection: read requests with the request decoder (RESP
//! multibulk or inline, Valkey's limits and error texts), dispatch, write
//! replies. A malformed request gets Valkey's `-ERR Protocol error: …` and
//! the connection is closed, as Valkey does.
//!
//! Reading, writing and event delivery run in one select loop, so a client
//! that stops reading never blocks the loop: its pending output is bounded
//! (requests are not run past [`OUT_HIGH_WATER`]; a subscriber is closed
//! past its pub/sub output limit, counting only the events of its own
//! channels), and `CLIENT KILL` reaches it at once. A subscriber that reads
//! is never disconnected and gets every event of its channels, in order.

//!
//! Each connection is a [`serve::Connection`]: its state in one struct, its
//! loop in small steps (dispatch the requests read, follow its
//! subscriptions, wait for the socket or an event, close). The counters
//! and ids of a daemon's Sentinel port live in its [`Shared`] state, never
//! in process globals: several daemons in one process count apart.

mod serve;
pub mod session;

pub use session::{AUTH_FAILURE_DELAY, Session, Shared, Totals};

use std::sync::Arc;

use crate::listen::Permit;
use crate::runtime::Handle;

/// Serves one client until it disconnects; `permit` counts it against
/// `maxclients` until then.
pub async fn run(
    mut stream: crate::tls::Stream,
    handle: Handle,
    shared: Arc<Shared>,
    permit: Permit,
) -> std::io::Result<()> {
    let _permit = permit;
    Totals::add(&shared.totals.connections, 1);
    let _counted = crate::metrics::sentinel_connected();
    let _ = stream.tcp().set_nodelay(true);
    serve::Connection::new(&mut stream, handle, shared)?
        .serve()
        .await
}
