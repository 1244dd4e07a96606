//! The hook run inside a failover step, outside the core ([`RoleHook`]):
//! what it is given ([`MasterSwitch`], [`RouteTo`]) and how long it may
//! take ([`ROLE_HOOK_WAIT`]). The shell's sides are `hooks.rs` and
//! `route.rs`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::config::GroupOwner;
use crate::core::Addr;

/// The longest the shell waits for the hook before publishing the event.
pub const ROLE_HOOK_WAIT: Duration = Duration::from_secs(2);

/// A managed group's master changed (`+switch-master`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterSwitch {
    /// The group.
    pub group: String,
    /// Its owner.
    pub owner: GroupOwner,
    /// The configuration epoch of the new master: writes are fenced by it.
    pub config_epoch: u64,
    /// The master replaced.
    pub old: Addr,
    /// The new master.
    pub new: Addr,
}

/// A managed group's route (its `-master` Service) to move: to the
/// chosen replica ahead of a switchover, back to the master after one
/// given up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteTo {
    /// The group.
    pub group: String,
    /// Its owner.
    pub owner: GroupOwner,
    /// The group's configuration epoch: a route written in a later one
    /// (another Valkyrie's failover) is left alone.
    pub config_epoch: u64,
    /// The instance new connections should reach.
    pub to: Addr,
}

/// The future a hook returns.
pub type HookFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// The future [`RoleHook::route`] returns: the address the route is
/// reached at (`None`: it has none to try).
pub type RouteFuture = Pin<Box<dyn Future<Output = Result<Option<Addr>, String>> + Send>>;

/// Runs when a managed group's master changes, before the event goes out.
pub trait RoleHook: Send + Sync + std::fmt::Debug {
    /// Moves whatever follows the master to `switch.new`.
    fn master_switched(&self, switch: MasterSwitch) -> HookFuture;

    /// Points the group's route at `route.to`, without a new epoch.
    fn route(&self, route: RouteTo) -> RouteFuture;
}
