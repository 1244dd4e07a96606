//! From the daemon's configuration to the core's terms: a group's
//! [`GroupSpec`](crate::core::GroupSpec) and milliseconds.

use std::time::Duration;

use crate::config::GroupConfig;
use crate::core::{Addr, GroupSpec, Millis};

/// What the core needs to know of a configured group.
pub(super) fn spec(g: &GroupConfig) -> GroupSpec {
    GroupSpec {
        name: g.name.clone(),
        master: Addr::new(g.host.clone(), g.port),
        quorum: g.quorum,
        down_after: millis(g.down_after),
        failover_timeout: millis(g.failover_timeout),
        parallel_syncs: g.parallel_syncs,
        reboot_down_after: millis(g.master_reboot_down_after_period),
        fence: g.write_fence,
        route_wait: millis(g.route_wait),
        known_replicas: g
            .known_replicas
            .iter()
            .map(|(h, p)| Addr::new(h.clone(), *p))
            .collect(),
    }
}

pub(super) fn millis(d: Duration) -> Millis {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
