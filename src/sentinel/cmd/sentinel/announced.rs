//! The addresses the Sentinel port shows. With `announce-hostnames no`
//! (Sentinel's default) a host name from the configuration or from a
//! replica's announcement is shown as the IP address its link reached,
//! as Sentinel shows the address it resolved; with `yes`, as given. An
//! address not reached yet shows as given, and so do the groups of a
//! `ValkeyCluster` resource, whose pods' IP addresses change.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use crate::core::Addr;
use crate::runtime::Handle;
use crate::topology::GroupView;

/// `g` with its addresses as shown.
pub(super) fn view<'a>(handle: &Handle, g: &'a GroupView) -> Cow<'a, GroupView> {
    // A `ValkeyCluster`'s pods are named by their stable DNS names: a
    // pod's IP changes when it restarts, and would send clients nowhere.
    if g.managed || handle.announce_hostnames.load(Ordering::Relaxed) {
        return Cow::Borrowed(g);
    }
    let shown = |a: &Addr| {
        handle.resolved.ip(&a.host).map(|ip| Addr {
            host: ip.to_string(),
            port: a.port,
        })
    };
    let named = std::iter::once(&g.master)
        .chain(std::iter::once(&g.master_details.addr))
        .chain(g.replicas.iter().map(|r| &r.addr))
        .any(|a| shown(a).is_some());
    if !named {
        return Cow::Borrowed(g);
    }
    let mut g = g.clone();
    let replace = |a: &mut Addr| {
        if let Some(s) = shown(a) {
            *a = s;
        }
    };
    replace(&mut g.master);
    replace(&mut g.master_details.addr);
    for r in &mut g.replicas {
        replace(&mut r.addr);
    }
    Cow::Owned(g)
}
