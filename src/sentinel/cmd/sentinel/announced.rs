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

/// `a`, an address of group `g`, as shown; `None` when it shows as
/// given.
fn shown(handle: &Handle, g: &GroupView, a: &Addr) -> Option<Addr> {
    // A `ValkeyCluster`'s pods are named by their stable DNS names: a
    // pod's IP changes when it restarts, and would send clients nowhere.
    if g.managed || handle.announce_hostnames.load(Ordering::Relaxed) {
        return None;
    }
    handle.resolved.ip(&a.host).map(|ip| Addr {
        host: ip.to_string(),
        port: a.port,
    })
}

/// `g`'s master address as shown: `GET-MASTER-ADDR-BY-NAME`, the port's
/// most frequent question, looks up that one address, not the group's.
pub(super) fn master<'a>(handle: &Handle, g: &'a GroupView) -> Cow<'a, Addr> {
    shown(handle, g, &g.master).map_or(Cow::Borrowed(&g.master), Cow::Owned)
}

/// `g` with its addresses as shown.
pub(super) fn view<'a>(handle: &Handle, g: &'a GroupView) -> Cow<'a, GroupView> {
    let named = std::iter::once(&g.master)
        .chain(std::iter::once(&g.master_details.addr))
        .chain(g.replicas.iter().map(|r| &r.addr))
        .any(|a| shown(handle, g, a).is_some());
    if !named {
        return Cow::Borrowed(g);
    }
    let mut shown_g = g.clone();
    let replace = |a: &mut Addr| {
        if let Some(s) = shown(handle, g, a) {
            *a = s;
        }
    };
    replace(&mut shown_g.master);
    replace(&mut shown_g.master_details.addr);
    for r in &mut shown_g.replicas {
        replace(&mut r.addr);
    }
    Cow::Owned(shown_g)
}
