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
use crate::core::{Addr, InfoReport, Input};
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
    /// The group's instances by run id, to say who answered instead.
    known: Vec<(String, Addr)>,
}

/// What the last try of the route met.
#[derive(Debug, Default)]
enum Met {
    /// Not tried yet.
    #[default]
    Nothing,
    /// No connection, or no answer: why.
    Failed(String),
    /// An instance with this run id (and its address, if it is the
    /// group's).
    Instance(String, Option<Addr>),
}

impl std::fmt::Display for Met {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Met::Nothing => write!(f, "nothing tried"),
            Met::Failed(why) => write!(f, "{why}"),
            Met::Instance(run_id, Some(addr)) => write!(f, "{addr} (run id {run_id})"),
            Met::Instance(run_id, None) => write!(f, "run id {run_id}, not the group's"),
        }
    }
}

impl Shell {
    /// Moves `group`'s route to `to`. When the core waits (`confirm`), the
    /// route is then tried until it reaches `to`, and the core told. A
    /// later route of the same group replaces this one.
    pub(super) fn route(&mut self, group: String, to: Addr, confirm: bool) {
        if let Some(running) = self.routes.remove(&group) {
            running.abort();
        }
        let g = self.core.groups().get(&group);
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
                if confirm {
                    let _ = inputs.try_send(Input::Routed { group, to });
                }
                return;
            }
        };
        let probe = match (confirm, run_id, self.config.group(&group)) {
            (true, Some(run_id), Some(c)) => Some(Probe {
                to: to.clone(),
                run_id,
                auth_user: c.auth_user.clone(),
                auth_pass: c.auth_pass.clone(),
                renamed: client::renamed(&c.renamed_commands),
                tls: self.links.tls_of(&self.config, &group),
                until: Instant::now() + wait,
                known: g
                    .map(|g| {
                        g.instances
                            .values()
                            .filter_map(|i| Some((i.info.as_ref()?.run_id.clone(), i.addr.clone())))
                            .collect()
                    })
                    .unwrap_or_default(),
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
            .spawn(carry(group.clone(), to, moved, probe, confirm, inputs));
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
    confirm: bool,
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
    if !confirm {
        tracing::info!(group = %group, instance = %to, "route moved back in {:?}", started.elapsed());
        return;
    }
    match (reached, probe) {
        (Some(at), Some(probe)) => {
            match reaches(&at, &probe).await {
                Ok(tries) => {
                    tracing::info!(group = %group, instance = %to, route = %at, "route reaches the chosen replica after {:?} ({tries} tries)", started.elapsed());
                }
                Err((tries, met)) => {
                    tracing::warn!(group = %group, instance = %to, route = %at, "route not seen to reach the chosen replica within its wait ({tries} tries; the last met {met})");
                    return; // the core's own timer goes on
                }
            }
        }
        _ => {
            tracing::info!(group = %group, instance = %to, "route moved in {:?}; nothing to try it by", started.elapsed())
        }
    }
    let _ = inputs.send(Input::Routed { group, to }).await;
}

/// Tries `at` until the instance answering there is the chosen replica,
/// or the wait ends: the tries, and what the last one met if none
/// reached it.
async fn reaches(at: &Addr, probe: &Probe) -> Result<u32, (u32, Met)> {
    let mut tries = 0;
    let mut met = Met::Nothing;
    while Instant::now() < probe.until {
        tries += 1;
        met = answered_by(at, probe).await;
        if matches!(&met, Met::Instance(run_id, _) if *run_id == probe.run_id) {
            return Ok(tries);
        }
        tokio::time::sleep(TRY_EVERY).await;
    }
    Err((tries, met))
}

/// Who a new connection to `at` reaches.
async fn answered_by(at: &Addr, probe: &Probe) -> Met {
    let mut conn =
        match client::connect_as(at, &probe.to.host, TRY_TIMEOUT, probe.tls.as_ref()).await {
            Ok(conn) => conn,
            Err(e) => return Met::Failed(format!("connect: {e:?}")),
        };
    conn.rename(probe.renamed.clone());
    if let Some(pass) = &probe.auth_pass {
        match conn
            .auth(probe.auth_user.as_deref(), pass, TRY_TIMEOUT)
            .await
        {
            Ok(None) => {}
            Ok(Some(refused)) => return Met::Failed(format!("AUTH: {refused}")),
            Err(e) => return Met::Failed(format!("AUTH: {e}")),
        }
    }
    let text = match conn
        .call(&["INFO", "server", "replication"], TRY_TIMEOUT)
        .await
    {
        Ok(reply) => client::text(&reply),
        Err(e) => return Met::Failed(format!("INFO: {e}")),
    };
    match text.map(|t| InfoReport::parse(&t)) {
        Ok(Ok(info)) => {
            let addr = probe
                .known
                .iter()
                .find(|(id, _)| *id == info.run_id)
                .map(|(_, a)| a.clone());
            Met::Instance(info.run_id, addr)
        }
        Ok(Err(e)) => Met::Failed(format!("INFO: {e}")),
        Err(e) => Met::Failed(format!("INFO: {e}")),
    }
}
