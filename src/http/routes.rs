//! Every path the admin port answers, and who may ask.

use super::state::AdminState;
use super::{api, auth, page, plans, probes, sse};

/// The path of the server-sent event stream: the one answer not bounded
/// by the write timeout.
pub(super) const STREAM_PATH: &str = "/api/v1/stream";

/// Every path the admin port answers once the head was read and checked:
/// the probes, open to all; the status page and API, behind
/// [`auth::require`], and its writes ([`plans`]) behind credentials that
/// must be configured.
pub(super) fn router(state: AdminState) -> axum::Router {
    use axum::routing::{get, post};
    let status = axum::Router::new()
        .route("/", get(page::index))
        .route("/app.css", get(page::css))
        .route("/app.js", get(page::js))
        .route("/plans.js", get(page::plans_js))
        .route("/api/v1/groups", get(api::groups))
        .route("/api/v1/events", get(api::events))
        .route(STREAM_PATH, get(sse::stream))
        .route("/api/v1/plans", get(plans::list).post(plans::submit))
        .route("/api/v1/plans/{id}/cancel", post(plans::cancel))
        .route("/api/v1/pause", post(plans::pause))
        .route("/api/v1/resume", post(plans::resume))
        .layer(axum::extract::DefaultBodyLimit::max(plans::MAX_BODY))
        .route_layer(axum::middleware::from_fn_with_state(
            state.auth.clone(),
            auth::require,
        ));
    axum::Router::new()
        .route("/metrics", get(probes::metrics))
        .route("/healthz", get(probes::healthz))
        .route("/readyz", get(probes::readyz))
        .merge(status)
        .fallback(probes::not_found)
        .with_state(state)
}
