//! The status JSON API: `GET /api/v1/groups` and `GET /api/v1/events`
//! (the schema is in docs/operations.md), built by [`groups_document`]
//! from the index port's publication and the advertised topology.
//! Nothing here shows a secret: the topology holds no passwords.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::hub::Hub;
use super::state::AdminState;

/// A JSON answer; never cached.
pub(super) fn json_response(body: String) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn hub(state: &AdminState) -> Option<&Arc<Hub>> {
    state.status.as_ref()
}

pub(super) async fn groups(State(state): State<AdminState>) -> Response {
    match hub(&state) {
        Some(hub) => json_response(hub.groups().as_ref().clone()),
        None => super::probes::not_found().await,
    }
}

/// `?since=N`: events numbered above N (0 or absent: every kept one).
#[derive(Debug, serde::Deserialize)]
pub(super) struct Since {
    since: Option<u64>,
}

pub(super) async fn events(
    State(state): State<AdminState>,
    Query(query): Query<Since>,
) -> Response {
    let since = query.since.unwrap_or(0);
    match hub(&state) {
        Some(hub) => json_response(hub.events_since(since).to_string()),
        None => super::probes::not_found().await,
    }
}
