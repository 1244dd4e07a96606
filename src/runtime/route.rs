//! A managed group's route moved ahead of its switchover
//! ([`Output::Route`](crate::core::Output::Route)).
//!
//! Clients of a `ValkeyCluster`'s `-master` Service reach the master
//! through kube-proxy, which programs a change of the Service's endpoint
//! some 100–250 ms after it is written (the API server, the EndpointSlice
//! controller, kube-proxy's watch and its `iptables-restore`). Moved after
//! the promotion, that whole chain was a write stall: every client the
//! switchover disconnected reconnected to the demoted master and was told
//! `-READONLY` until the new endpoint was programmed.
//!
//! So a switchover first points the Service at the chosen replica, writes
//! going on: connections already open stay on the old master (kube-proxy
//! never moves an established connection), and new ones reach the chosen
//! replica. The hook writes the selector; this side then tries the
//! Service's address until the instance answering there has the chosen
//! replica's run id, and tells the core ([`Input::Routed`]), which pauses
//! writes only then. When the switchover disconnects the old master's
//! clients, the Service already leads to the new master.
//!
//! What it costs: for those milliseconds a *new* connection to the
//! Service reaches the chosen replica, still a replica: its writes are
//! refused `-READONLY` (as they were after the demotion before), and its
//! reads may miss the master's last few milliseconds of writes. The check
//! is made from this Valkyrie's node; on another node kube-proxy may
//! program the change a little later.
//!
//! Bounded: a route that cannot be moved or confirmed within the group's
//! `route_wait` (the core's own timer) costs that wait, never the
//! switchover.

use std::time::Duration;

use tokio::time::Instant;

use super::role_hook::{RouteFuture, RouteTo};
use super::shell::Shell;
use crate::config::Secret;
use crate::core::{Addr, FailoverPhase, Input};
use crate::link::client::{self, Renamed};

/// The pause between two tries of the route.
const TRY_EVERY: Duration = Duration::from_millis(10);

/// How long one try may take (connect, `AUTH`, `INFO`).
const TRY_TIMEOUT: Duration = Duration::from_millis(500);

/// What a try needs to reach and recognise the chosen replica.
struct Probe {
    /// The chosen replica, whose certificate a TLS route must show.
    to: Addr,
    /// Its run id.
    run_id: String,
    auth_user: Option<String>,
    auth_pass: Option<Secret>,
    renamed: Renamed,
    tls: Option<crate::tls::Outbound>,
    /// Until when to try.
    until: Instant,
}

impl Shell {
    /// Moves `group`'s route to `to`. Ahead of the switchover routing to
    /// it, the route is then tried until it reaches `to`, and the core
    /// told. A later route of the same group replaces this one.
    pub(super) fn route(&mut self, group: String, to: Addr) {
        if let Some(running) = self.routes.remove(&group) {
            running.abort();
        }
        let g = self.core.groups().get(&group);
        let awaited = g
            .and_then(|g| g.failover.as_ref())
            .is_some_and(|f| f.phase == FailoverPhase::Routing && f.promoted == to);
        let wait = Duration::from_millis(g.map_or(0, |g| g.spec.route_wait));
        let run_id = g
            .and_then(|g| g.instances.get(&to))
            .and_then(|i| i.info.as_ref())
            .map(|i| i.run_id.clone());
        let config_epoch = g.map_or(0, |g| g.config_epoch);
        let inputs = self.links.input_tx.clone();
        let (hook, owner) = match (self.publication.role_hook.clone(), self.managed_by(&group)) {
            (Some(hook), Some(owner)) => (hook, owner),
            _ => {
                if awaited {
                    let _ = inputs.try_send(Input::Routed { group, to });
                }
                return;
            }
        };
        let probe = match (awaited, run_id, self.config.group(&group)) {
            (true, Some(run_id), Some(c)) => Some(Probe {
                to: to.clone(),
                run_id,
                auth_user: c.auth_user.clone(),
                auth_pass: c.auth_pass.clone(),
                renamed: c
                    .renamed_commands
                    .iter()
                    .map(|(from, to)| (from.to_ascii_lowercase(), to.clone()))
                    .collect(),
                tls: self.links.tls_of(&self.config, &group),
                until: Instant::now() + wait,
            }),
            _ => None,
        };
        let moved = hook.route(RouteTo {
            group: group.clone(),
            owner,
            config_epoch,
            to: to.clone(),
        });
        let task = self
            .links
            .tasks
            .spawn(carry(group.clone(), to, moved, probe, awaited, inputs));
        self.routes.insert(group, task.abort_handle());
    }
}

/// Waits for the route's move, tries it when a switchover waits, and
/// answers the core.
async fn carry(
    group: String,
    to: Addr,
    moved: RouteFuture,
    probe: Option<Probe>,
    awaited: bool,
    inputs: crate::link::InputSender,
) {
    let started = Instant::now();
    let reached = match tokio::time::timeout(super::ROLE_HOOK_WAIT, moved).await {
        Ok(Ok(reached)) => reached,
        Ok(Err(e)) => {
            tracing::warn!(group = %group, instance = %to, "route not moved: {e}");
            None
        }
        Err(_) => {
            tracing::warn!(group = %group, instance = %to, "route not moved within {:?}", super::ROLE_HOOK_WAIT);
            None
        }
    };
    if !awaited {
        tracing::info!(group = %group, instance = %to, "route moved back in {:?}", started.elapsed());
        return;
    }
    match (reached, probe) {
        (Some(at), Some(probe)) => {
            if reaches(&at, &probe).await {
                tracing::info!(group = %group, instance = %to, route = %at, "route reaches the chosen replica after {:?}", started.elapsed());
            } else {
                tracing::warn!(group = %group, instance = %to, route = %at, "route not seen to reach the chosen replica within its wait");
                return; // the core's own timer goes on
            }
        }
        _ => {
            tracing::info!(group = %group, instance = %to, "route moved in {:?}; nothing to try it by", started.elapsed())
        }
    }
    let _ = inputs.send(Input::Routed { group, to }).await;
}

/// Tries `at` until the instance answering there is the chosen replica,
/// or the wait ends. Whether it was.
async fn reaches(at: &Addr, probe: &Probe) -> bool {
    while Instant::now() < probe.until {
        if answered_by(at, probe).await.as_deref() == Some(probe.run_id.as_str()) {
            return true;
        }
        tokio::time::sleep(TRY_EVERY).await;
    }
    false
}

/// The run id of the instance a new connection to `at` reaches.
async fn answered_by(at: &Addr, probe: &Probe) -> Option<String> {
    let mut conn = client::connect_as(at, &probe.to.host, TRY_TIMEOUT, probe.tls.as_ref())
        .await
        .ok()?;
    conn.rename(probe.renamed.clone());
    if let Some(pass) = &probe.auth_pass {
        let refused = conn
            .auth(probe.auth_user.as_deref(), pass, TRY_TIMEOUT)
            .await
            .ok()?;
        if refused.is_some() {
            return None;
        }
    }
    let reply = conn.call(&["INFO", "server"], TRY_TIMEOUT).await.ok()?;
    let text = client::text(&reply).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|id| id.trim().to_owned())
}
