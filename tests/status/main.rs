//! What an operator sees on the admin port, one module a subject: the
//! status API, the status page in a real browser, `/readyz`, `/metrics`
//! and the logs, and the series of removed groups. `common` is what the
//! API and page tests share; `webdriver` drives the browser.
//!
//! One test binary for all of them, so that the daemon and `support` are
//! compiled once; scripts/run-tests.py still runs each module in a process
//! of its own (`status <module>::`), as when each was a binary.

#[path = "../support/mod.rs"]
mod support;

mod common;
mod webdriver;

mod api;
mod metrics_removed_groups;
mod observability;
mod page;
mod plan_page;
