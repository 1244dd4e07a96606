//! A complete answer with the admin port's usual headers, byte for byte
//! as it always wrote them: `Content-Type`, `Content-Length`,
//! `Cache-Control: no-store` and `Connection: close`, in that order.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

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
