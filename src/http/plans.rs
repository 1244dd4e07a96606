//! The admin API's writes: planned switchovers (`GET`/`POST
//! /api/v1/plans`, `POST /api/v1/plans/{id}/cancel`) and pause and resume
//! (`POST /api/v1/pause`, `/api/v1/resume`); the bodies and answers are
//! in docs/operations.md.
//!
//! Who may write: whoever holds the admin port's credentials, and no one
//! while none are configured (a write then answers 403): an open status
//! page must not be a switch. A write must also say `Content-Type:
//! application/json`, which a page of another site cannot send without
//! a CORS preflight this port never grants, so a browser that holds the
//! credentials cannot be made to write by another site.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::reply::plain;
use super::state::AdminState;
use crate::plan::{PlanRequest, Refusal, Targets};

/// The largest write body read.
pub(super) const MAX_BODY: usize = 64 * 1024;

/// Whether `path` takes writes (`POST`): the request-head check lets
/// only these through with another method than `GET` or `HEAD`.
pub(super) fn takes_writes(path: &str) -> bool {
    path == "/api/v1/plans"
        || path == "/api/v1/pause"
        || path == "/api/v1/resume"
        || path
            .strip_prefix("/api/v1/plans/")
            .is_some_and(|rest| rest.ends_with("/cancel"))
}

fn answer(status: StatusCode, body: &Value) -> Response {
    plain(status, "application/json", format!("{body}\n"))
}

fn refuse(status: StatusCode, error: impl std::fmt::Display) -> Response {
    answer(status, &json!({ "error": error.to_string() }))
}

/// The refusal of a write that no credentials guard, or that is not
/// JSON; `None`: it may go on.
fn unwritable(state: &AdminState, headers: &HeaderMap) -> Option<Response> {
    if state.auth.is_none() {
        return Some(refuse(
            StatusCode::FORBIDDEN,
            "writes need credentials: set admin-auth-token-file or admin-auth-basic-file",
        ));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return Some(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type: application/json expected",
        ));
    }
    None
}

fn status_of(refusal: &Refusal) -> StatusCode {
    match refusal {
        Refusal::Busy(_) => StatusCode::CONFLICT,
        Refusal::NoSuchPlan(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_REQUEST,
    }
}

/// `GET /api/v1/plans`: every kept plan, newest first.
pub(super) async fn list(State(state): State<AdminState>) -> Response {
    match &state.plans {
        Some(plans) => answer(
            StatusCode::OK,
            &json!({ "plans": plans.reports().as_ref() }),
        ),
        None => super::probes::not_found().await,
    }
}

/// `POST /api/v1/plans`: makes and starts a plan.
pub(super) async fn submit(
    State(state): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = unwritable(&state, &headers) {
        return r;
    }
    let Some(plans) = &state.plans else {
        return super::probes::not_found().await;
    };
    let made = PlanRequest::parse(&body)
        .map_err(Refusal::from)
        .and_then(|request| plans.submit(request));
    match made {
        Ok(report) => answer(StatusCode::CREATED, &report),
        Err(e) => refuse(status_of(&e), e),
    }
}

/// `POST /api/v1/plans/{id}/cancel`.
pub(super) async fn cancel(
    State(state): State<AdminState>,
    Path(id): Path<u64>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = unwritable(&state, &headers) {
        return r;
    }
    let Some(plans) = &state.plans else {
        return super::probes::not_found().await;
    };
    match plans.cancel(id) {
        Ok(report) => answer(StatusCode::OK, &report),
        Err(e) => refuse(status_of(&e), e),
    }
}

/// `POST /api/v1/pause`.
pub(super) async fn pause(
    State(state): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    toggle(state, headers, body, true).await
}

/// `POST /api/v1/resume`.
pub(super) async fn resume(
    State(state): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    toggle(state, headers, body, false).await
}

async fn toggle(state: AdminState, headers: HeaderMap, body: Bytes, paused: bool) -> Response {
    if let Some(r) = unwritable(&state, &headers) {
        return r;
    }
    let Some(plans) = &state.plans else {
        return super::probes::not_found().await;
    };
    match Targets::parse(&body).map_err(Refusal::from) {
        Ok(targets) => match plans.pause(&targets, paused).await {
            Ok(groups) => answer(
                StatusCode::OK,
                &json!({ "groups": groups, "paused": paused }),
            ),
            Err(e) => refuse(status_of(&e), e),
        },
        Err(e) => refuse(status_of(&e), e),
    }
}
