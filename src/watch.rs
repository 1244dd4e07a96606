//! `valkyrie watch`: subscribe to an index port and print every change,
//! for people (one block per change) or scripts (one JSON object per line).
//!
//! It reconnects when the connection drops (250 ms doubling to 5 s,
//! jittered, and back to 250 ms once subscribed again) and applies the protocol's
//! ordering rule ([`View`]) across reconnects and daemon restarts, so it
//! prints a change only once and never goes back to an older state.

use std::io::Write;
use std::time::Duration;

use valkyrie_protocol::index::{ClientError, GroupSnapshot, IndexClient, Outcome, Update, View};

use crate::backoff::Backoff;

/// First reconnect delay after the connection drops.
const RECONNECT_MIN: Duration = Duration::from_millis(250);
/// Longest reconnect delay.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Options of `valkyrie watch`.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// `host:port` of the index port.
    pub addr: String,
    /// Group names or globs; empty means every group.
    pub groups: Vec<String>,
    /// One JSON object per line instead of text.
    pub json: bool,
    /// Print the current state of the matching groups and exit.
    pub once: bool,
}

/// Runs until interrupted (or, with `once`, after the first state).
pub async fn run(opts: WatchOptions) -> Result<(), ClientError> {
    let patterns: Vec<&str> = if opts.groups.is_empty() {
        vec!["*"]
    } else {
        opts.groups.iter().map(String::as_str).collect()
    };
    let mut view = View::new();
    let mut backoff = Backoff::new(RECONNECT_MIN, RECONNECT_MAX, 20);
    loop {
        let result = session(&opts, &patterns, &mut view, &mut backoff).await;
        match result {
            Ok(()) => return Ok(()),
            Err(e) if opts.once => return Err(e),
            Err(e) => {
                let wait = backoff.next_delay();
                eprintln!("valkyrie watch: {e}; reconnecting in {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

async fn session(
    opts: &WatchOptions,
    patterns: &[&str],
    view: &mut View,
    backoff: &mut Backoff,
) -> Result<(), ClientError> {
    let mut client = IndexClient::connect(opts.addr.as_str()).await?;
    view.set_run(&client.greeting().run);
    client.watch(patterns).await?;
    // Subscribed: the next disconnection retries quickly again.
    backoff.reset();
    if opts.once {
        // The answer to a PING comes after the snapshots the WATCH caused.
        client.ping().await?;
        while let Some(u) = client.pending() {
            show(opts, view, u);
        }
        return Ok(());
    }
    loop {
        let u = client.next().await?;
        show(opts, view, u);
    }
}

fn show(opts: &WatchOptions, view: &mut View, u: Update) {
    let line = match u {
        Update::Snapshot(s) => {
            let text = if opts.json { json(&s) } else { text(&s) };
            if view.apply(s) != Outcome::Changed {
                return;
            }
            text
        }
        Update::Gone(g) => {
            if !view.remove(&g) {
                return;
            }
            if opts.json {
                serde_json::json!({ "group": g, "gone": true }).to_string()
            } else {
                format!("{g}: no longer monitored")
            }
        }
    };
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) ends nothing here; the next write fails
    // the same way and the user has already left.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn text(s: &GroupSnapshot) -> String {
    let mut t = format!(
        "{} epoch {} version {}: master {}:{} {}",
        s.group,
        s.epoch,
        s.version,
        s.master.host,
        s.master.port,
        s.master.state.as_str()
    );
    if let Some(f) = &s.master.failover {
        t.push_str(&format!(" (failover: {f})"));
    }
    for r in &s.replicas {
        t.push_str(&format!(
            "\n  replica {}:{} {} offset {} priority {}",
            r.host,
            r.port,
            r.state.as_str(),
            r.offset,
            r.priority
        ));
    }
    t
}

fn json(s: &GroupSnapshot) -> String {
    serde_json::json!({
        "group": s.group,
        "epoch": s.epoch,
        "version": s.version,
        "master": {
            "host": s.master.host,
            "port": s.master.port,
            "state": s.master.state.as_str(),
            "failover": s.master.failover,
        },
        "replicas": s.replicas.iter().map(|r| serde_json::json!({
            "host": r.host,
            "port": r.port,
            "state": r.state.as_str(),
            "offset": r.offset,
            "priority": r.priority,
        })).collect::<Vec<_>>(),
    })
    .to_string()
}
