//! `GET /api/v1/stream`: server-sent events of the status hub. The first
//! message is the groups document; then every change of it (`groups`)
//! and every event (`event`), with a `ping` every idle second so a
//! client notices a dead stream (the page then shows itself stale;
//! comments would not reach its script). The stream ends when the
//! runtime stops. A client
//! that falls behind gets the current groups document and goes on.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast;

use super::hub::{Hub, Update};
use super::state::AdminState;

/// How often an idle stream sends a comment.
const KEEP_ALIVE: Duration = Duration::from_secs(1);

pub(super) async fn stream(State(state): State<AdminState>) -> Response {
    let Some(hub) = state.status.clone() else {
        return super::probes::not_found().await;
    };
    let rx = hub.subscribe();
    let first = Some(hub.groups());
    let events = futures_util::stream::unfold((hub, rx, first), next);
    let mut r = Sse::new(events)
        .keep_alive(
            KeepAlive::new()
                .interval(KEEP_ALIVE)
                .event(Event::default().event("ping").data("")),
        )
        .into_response();
    r.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    r
}

type Cursor = (Arc<Hub>, broadcast::Receiver<Update>, Option<Arc<String>>);

async fn next((hub, mut rx, first): Cursor) -> Option<(Result<Event, Infallible>, Cursor)> {
    if let Some(doc) = first {
        return Some((Ok(groups(&doc)), (hub, rx, None)));
    }
    let received = tokio::select! {
        r = rx.recv() => r,
        // The runtime stopped: end the stream rather than keep it alive
        // on a topology nobody updates.
        () = hub.ended() => return None,
    };
    let event = match received {
        Ok(Update::Groups(doc)) => groups(&doc),
        Ok(Update::Event(e)) => Event::default().event("event").data(e.as_str()),
        Err(broadcast::error::RecvError::Lagged(_)) => groups(&hub.groups()),
        Err(broadcast::error::RecvError::Closed) => return None,
    };
    Some((Ok(event), (hub, rx, None)))
}

fn groups(doc: &str) -> Event {
    Event::default().event("groups").data(doc)
}
