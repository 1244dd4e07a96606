//! `/metrics`, `/healthz`, `/readyz` and the 404 answer, byte for byte
//! as the admin port always wrote them: `Content-Type`, `Content-Length`,
//! `Cache-Control: no-store` and `Connection: close`, in that order.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::reply::plain;
use super::state::AdminState;

pub(super) async fn metrics(State(state): State<AdminState>) -> Response {
    plain(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        crate::metrics::render(&state.metrics),
    )
}

pub(super) async fn healthz(State(state): State<AdminState>) -> Response {
    if !runtime_alive(&state) {
        return stopped();
    }
    match &state.health.borrow().state_error {
        Some(e) => plain(
            StatusCode::OK,
            "text/plain",
            format!(
                "degraded: state file not writable: {}\n",
                e.replace(['\r', '\n'], " ")
            ),
        ),
        None => plain(StatusCode::OK, "text/plain", "ok\n".into()),
    }
}

pub(super) async fn readyz(State(state): State<AdminState>) -> Response {
    if !runtime_alive(&state) {
        return stopped();
    }
    match *state.ready.borrow() {
        true => plain(StatusCode::OK, "text/plain", "ready\n".into()),
        false => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "not ready\n".into(),
        ),
    }
}

pub(super) async fn not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "text/plain", "not found\n".into())
}

fn stopped() -> Response {
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain",
        "runtime stopped\n".into(),
    )
}

/// The runtime holds the latch's sender until it stops.
pub(super) fn runtime_alive(state: &AdminState) -> bool {
    state.ready.has_changed().is_ok()
}
