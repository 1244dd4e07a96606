//! What runs inside a failover step, outside the core: today the role
//! labels of a Kubernetes-managed group ([`RoleHook`]), moved before
//! `+switch-master` is published so that clients reaching the `-master`
//! Service follow as soon as Sentinel clients do.
//!
//! The hook is installed at run time by the input that owns such groups
//! ([`Handle::set_role_hook`]); without one nothing runs. It is awaited
//! for at most [`ROLE_HOOK_WAIT`]: the shell owns every group, and a slow
//! API server must not hold the others. A hook that fails or times out is
//! logged; the event is published all the same and the reconciler repairs
//! the labels from the converged topology.

use super::role_hook::{MasterSwitch, ROLE_HOOK_WAIT};
use super::shell::Shell;
use crate::core::{Addr, Channel, Event};

/// The old and new masters of a `+switch-master` payload
/// (`<name> <old-ip> <old-port> <new-ip> <new-port>`).
fn switched(payload: &str) -> Option<(Addr, Addr)> {
    let parts: Vec<&str> = payload.split(' ').collect();
    let [_, old_ip, old_port, new_ip, new_port] = parts[..] else {
        return None;
    };
    Some((
        Addr::new(old_ip, old_port.parse().ok()?),
        Addr::new(new_ip, new_port.parse().ok()?),
    ))
}

impl Shell {
    /// Runs the role hook for a `+switch-master` of a managed group.
    pub(super) async fn before_publishing(&mut self, e: &Event) {
        if e.channel != Channel::SwitchMaster {
            return;
        }
        let (Some(hook), Some(group)) = (self.publication.role_hook.clone(), e.group.as_deref())
        else {
            return;
        };
        let Some(owner) = self.managed_by(group) else {
            return;
        };
        let (Some((old, new)), Some(g)) = (switched(&e.payload), self.core.groups().get(group))
        else {
            return;
        };
        let switch = MasterSwitch {
            group: group.to_string(),
            owner,
            config_epoch: g.config_epoch,
            old,
            new,
        };
        let started = tokio::time::Instant::now();
        let outcome =
            tokio::time::timeout(ROLE_HOOK_WAIT, hook.master_switched(switch.clone())).await;
        // A wait of our own choosing, not a stall of the daemon (TILT).
        let now = self.now();
        self.core.waited(now);
        match outcome {
            Ok(Ok(())) => tracing::info!(
                group = %switch.group,
                epoch = switch.config_epoch,
                instance = %switch.new,
                "role labels moved in {:?}",
                started.elapsed()
            ),
            Ok(Err(e)) => tracing::warn!(
                group = %switch.group,
                epoch = switch.config_epoch,
                instance = %switch.new,
                "role labels not moved (the reconciler will repair them): {e}"
            ),
            Err(_) => tracing::warn!(
                group = %switch.group,
                epoch = switch.config_epoch,
                instance = %switch.new,
                "role labels not moved within {ROLE_HOOK_WAIT:?} (the reconciler will repair them)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_payloads_are_read_and_bad_ones_ignored() {
        assert_eq!(
            switched("shop.cache 10.0.0.1 6379 cache-1.h.shop.svc 6379"),
            Some((
                Addr::new("10.0.0.1", 6379),
                Addr::new("cache-1.h.shop.svc", 6379)
            ))
        );
        assert_eq!(switched("m 1.1.1.1 6379 2.2.2.2"), None);
        assert_eq!(switched("m 1.1.1.1 x 2.2.2.2 6379"), None);
    }
}
