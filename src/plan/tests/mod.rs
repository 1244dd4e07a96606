//! Plan requests: parsing, bounds and the window's clock.

use super::request::{MAX_CONCURRENCY, PlanRequest, RequestError, Targets};

fn parse(body: &str) -> Result<PlanRequest, RequestError> {
    PlanRequest::parse(body.as_bytes())
}

#[test]
fn a_plan_defaults_to_one_at_a_time_now_and_no_end() {
    let r = parse(r#"{"groups": ["a", "b"]}"#).unwrap();
    assert_eq!(r.concurrency(), 1);
    let w = r.window(5_000, 1_700_000_000_000).unwrap();
    assert_eq!((w.start, w.end), (5_000, None));
    let s = r.selection().unwrap();
    assert_eq!(s.names, ["a", "b"]);
    assert!(s.globs.is_empty() && s.selector.is_none());
}

#[test]
fn the_window_is_moved_onto_the_cores_clock() {
    // 2026-11-28T00:00:00Z is 1,795,824,000,000 ms after the epoch.
    let wall = 1_795_824_000_000;
    let r = parse(
        r#"{"match": ["g*"], "start": "2026-11-28T00:00:10Z", "end": "2026-11-28T02:00:00+01:00"}"#,
    )
    .unwrap();
    let w = r.window(1_000, wall).unwrap();
    assert_eq!(w.start, 11_000);
    // 02:00+01:00 is 01:00Z, an hour after the wall clock.
    assert_eq!(w.end, Some(1_000 + 3_600_000));
    let r = parse(r#"{"match": ["g*"], "end": "2026-11-28T00:00:00Z"}"#).unwrap();
    assert!(matches!(r.window(1_000, wall), Err(RequestError::Closed)));
    // A start already past opens the window now.
    let r = parse(r#"{"match": ["g*"], "start": "2020-01-01T00:00:00Z"}"#).unwrap();
    assert_eq!(r.window(1_000, wall).unwrap().start, 1_000);
}

#[test]
fn malformed_requests_say_what_is_wrong() {
    let err = |body: &str| parse(body).and_then(|r| r.selection().map(|_| r));
    assert!(matches!(err("{"), Err(RequestError::Json(_))));
    assert!(matches!(err(r#"{"nope": 1}"#), Err(RequestError::Json(_))));
    assert!(matches!(
        err(r#"{"groups": ["a"], "concurrency": 0}"#),
        Err(RequestError::Concurrency)
    ));
    let over = format!(
        r#"{{"groups": ["a"], "concurrency": {}}}"#,
        MAX_CONCURRENCY + 1
    );
    assert!(matches!(err(&over), Err(RequestError::Concurrency)));
    assert!(matches!(
        err(r#"{"selector": "tier in (cache"}"#),
        Err(RequestError::Selector(_))
    ));
    let r = parse(r#"{"groups": ["a"], "start": "soon"}"#).unwrap();
    let e = r.window(0, 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "start: not an RFC 3339 time (e.g. 2026-11-28T23:00:00Z)"
    );
}

#[test]
fn pause_targets_take_names_globs_and_a_selector_only() {
    let t =
        Targets::parse(br#"{"groups": ["a"], "match": ["b*"], "selector": "tier=cache"}"#).unwrap();
    let s = t.selection().unwrap();
    assert_eq!((s.names.len(), s.globs.len()), (1, 1));
    assert!(s.selector.is_some());
    assert!(Targets::parse(br#"{"concurrency": 2}"#).is_err());
}
