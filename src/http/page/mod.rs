//! The status page: static HTML, CSS and JavaScript compiled into the
//! binary (no build step, nothing fetched from elsewhere), served with a
//! content security policy that allows only this origin. The page draws
//! everything from `/api/v1/stream` (see [`super::sse`]).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("index.html");
const CSS: &str = include_str!("app.css");
const JS: &str = include_str!("app.js");
/// The planned switchovers' panel, drawn by `app.js`.
const PLANS_JS: &str = include_str!("plans.js");

/// Only this origin: no inline script or style, no other host.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                      form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

pub(super) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub(super) async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

pub(super) async fn js() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

pub(super) async fn plans_js() -> Response {
    asset("text/javascript; charset=utf-8", PLANS_JS)
}
