//! `/metrics`, `/healthz`, `/readyz` and the 404 answer, byte for byte
//! as the admin port always wrote them: `Content-Type`, `Content-Length`,
//! `Cache-Control: no-store` and `Connection: close`, in that order.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

use super::AdminState;

/// A complete answer with the admin port's usual headers.
pub(super) fn plain(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let len = body.len();
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

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
