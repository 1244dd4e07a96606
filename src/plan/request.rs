//! A plan as an operator asks for it (`POST /api/v1/plans`, the body in
//! docs/operations.md), parsed once: its groups, concurrency and window.

use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::core::Millis;
use crate::core::plan::Window;
use crate::topology::{LabelSelector, Selection};

/// The largest concurrency a plan may ask for.
pub const MAX_CONCURRENCY: usize = 256;
/// How far ahead a window may open.
const MAX_AHEAD_MS: u64 = 30 * 24 * 3600 * 1000;

/// Why a plan request is refused.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Not the JSON object expected.
    #[error("malformed plan: {0}")]
    Json(String),
    /// A label selector that does not parse.
    #[error("selector: {0}")]
    Selector(String),
    /// Concurrency out of bounds.
    #[error("concurrency must be 1 to {MAX_CONCURRENCY}")]
    Concurrency,
    /// A time that is not RFC 3339.
    #[error("{field}: not an RFC 3339 time (e.g. 2026-11-28T23:00:00Z)")]
    Time {
        /// `start` or `end`.
        field: &'static str,
    },
    /// The window closes before now.
    #[error("end: the window has already closed")]
    Closed,
    /// The window opens too far ahead.
    #[error("start: more than 30 days ahead")]
    TooFar,
}

/// A plan request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// Group names.
    #[serde(default)]
    groups: Vec<String>,
    /// Globs of group names.
    #[serde(default, rename = "match")]
    globs: Vec<String>,
    /// A Kubernetes label selector over the groups of custom resources.
    #[serde(default)]
    selector: Option<String>,
    /// Switchovers at once (default 1).
    #[serde(default)]
    concurrency: Option<usize>,
    /// When the window opens (RFC 3339; default now).
    #[serde(default)]
    start: Option<String>,
    /// When it closes (RFC 3339; default never).
    #[serde(default)]
    end: Option<String>,
}

impl PlanRequest {
    /// Parses a request body.
    pub fn parse(body: &[u8]) -> Result<PlanRequest, RequestError> {
        let request: PlanRequest =
            serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))?;
        if !(1..=MAX_CONCURRENCY).contains(&request.concurrency()) {
            return Err(RequestError::Concurrency);
        }
        Ok(request)
    }

    /// Which groups it means.
    pub fn selection(&self) -> Result<Selection, RequestError> {
        selection(&self.groups, &self.globs, self.selector.as_deref())
    }

    /// Switchovers at once.
    pub fn concurrency(&self) -> usize {
        self.concurrency.unwrap_or(1)
    }

    /// The window in the core's clock, which reads `now` when the wall
    /// clock reads `wall` (Unix milliseconds).
    pub fn window(&self, now: Millis, wall: u64) -> Result<Window, RequestError> {
        let core = |at: u64| now.saturating_add(at.saturating_sub(wall));
        let start = match &self.start {
            None => now,
            Some(text) => {
                let at = unix_ms(text, "start")?;
                if at.saturating_sub(wall) > MAX_AHEAD_MS {
                    return Err(RequestError::TooFar);
                }
                core(at)
            }
        };
        let end = match &self.end {
            None => None,
            Some(text) => {
                let at = unix_ms(text, "end")?;
                if at <= wall {
                    return Err(RequestError::Closed);
                }
                Some(core(at))
            }
        };
        Ok(Window { start, end })
    }

    /// The request as shown back.
    pub fn shown(&self) -> Value {
        json!({
            "groups": self.groups,
            "match": self.globs,
            "selector": self.selector,
            "concurrency": self.concurrency(),
            "start": self.start,
            "end": self.end,
        })
    }
}

/// Groups named for a pause or a resume (`POST /api/v1/pause`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    /// Group names.
    #[serde(default)]
    groups: Vec<String>,
    /// Globs of group names.
    #[serde(default, rename = "match")]
    globs: Vec<String>,
    /// A Kubernetes label selector over the groups of custom resources.
    #[serde(default)]
    selector: Option<String>,
}

impl Targets {
    /// Parses a request body.
    pub fn parse(body: &[u8]) -> Result<Targets, RequestError> {
        serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))
    }

    /// Which groups it means.
    pub fn selection(&self) -> Result<Selection, RequestError> {
        selection(&self.groups, &self.globs, self.selector.as_deref())
    }
}

fn selection(
    names: &[String],
    globs: &[String],
    selector: Option<&str>,
) -> Result<Selection, RequestError> {
    let selector = match selector {
        None => None,
        Some(text) => Some(
            text.parse::<LabelSelector>()
                .map_err(|e| RequestError::Selector(e.to_string()))?,
        ),
    };
    Ok(Selection {
        names: names.to_vec(),
        globs: globs.to_vec(),
        selector,
    })
}

/// An RFC 3339 time in Unix milliseconds (0 for times before 1970).
fn unix_ms(text: &str, field: &'static str) -> Result<u64, RequestError> {
    let t = OffsetDateTime::parse(text, &Rfc3339).map_err(|_| RequestError::Time { field })?;
    let ms = t.unix_timestamp_nanos() / 1_000_000;
    Ok(u64::try_from(ms).unwrap_or(0))
}
