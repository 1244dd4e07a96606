//! The reconciler's retry policy and its topology trigger.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quiet;
mod scenarios;

use std::time::Duration;

use futures_util::{FutureExt, StreamExt};

use super::*;
use crate::topology::{GroupView, InstanceView};

fn api(code: u16) -> Error {
    Error::api(
        "apply StatefulSet shop/cache",
        ::kube::Error::Api(
            ::kube::core::Status::failure("no", "x")
                .with_code(code)
                .boxed(),
        ),
    )
}

#[test]
fn conflicts_retry_at_once_rbac_slowly_and_the_rest_back_off() {
    assert_eq!(retry(&api(409)), Retry::After(Duration::from_secs(1)));
    assert_eq!(retry(&api(403)), Retry::After(Duration::from_secs(300)));
    assert_eq!(retry(&api(500)), Retry::Backoff);
    assert_eq!(retry(&Error::NotLeader), Retry::Never);
    let missing = Error::SecretMissing {
        namespace: "shop".into(),
        name: "cache-auth".into(),
        key: "password".into(),
    };
    assert_eq!(retry(&missing), Retry::After(Duration::from_secs(30)));
}

fn group(host: &str, epoch: u64, down: bool) -> GroupView {
    let master = Addr::new(host, 6379);
    let mut details = InstanceView::new(master.clone());
    details.reports_master = !down;
    GroupView {
        revision: 1,
        config_epoch: epoch,
        master: master.clone(),
        master_down: down,
        failover_in_progress: false,
        replicas: Vec::new(),
        quorum: 2,
        down_after: 5000,
        failover_timeout: 60000,
        parallel_syncs: 1,
        odown: false,
        failover_state: None,
        masterless: false,
        at_risk: Vec::new(),
        fence: None,
        fence_sent: None,
        paused: false,
        managed: false,
        labels: Default::default(),
        master_details: details,
    }
}

fn topology(groups: &[(&str, GroupView)]) -> Arc<Topology> {
    Arc::new(Topology {
        peer_links: 0,
        groups: groups
            .iter()
            .map(|(n, g)| (n.to_string(), Arc::new(g.clone())))
            .collect(),
        tilt: false,
        tilt_since: None,
        readiness: Default::default(),
    })
}

#[tokio::test]
async fn the_topology_triggers_only_on_what_the_status_shows() {
    let (tx, rx) = watch::channel(topology(&[("shop.cache", group("a", 0, true))]));
    let mut changes = std::pin::pin!(topology_changes(rx));
    assert!(
        changes.next().now_or_never().is_none(),
        "nothing changed yet"
    );

    // Offsets and ages move all the time: no trigger.
    let mut same = group("a", 0, true);
    same.master_details.offset = 99;
    same.quorum = 3;
    tx.send(topology(&[("shop.cache", same)])).unwrap();
    assert!(changes.next().now_or_never().is_none());

    // The master comes up: a trigger.
    tx.send(topology(&[("shop.cache", group("a", 0, false))]))
        .unwrap();
    assert_eq!(changes.next().now_or_never(), Some(Some(())));

    // A failover converged: a trigger.
    tx.send(topology(&[("shop.cache", group("b", 1, false))]))
        .unwrap();
    assert_eq!(changes.next().now_or_never(), Some(Some(())));

    // A group appears: a trigger.
    tx.send(topology(&[
        ("shop.cache", group("b", 1, false)),
        ("shop.other", group("c", 0, false)),
    ]))
    .unwrap();
    assert_eq!(changes.next().now_or_never(), Some(Some(())));

    // The runtime stopped: the stream ends.
    drop(tx);
    assert_eq!(changes.next().now_or_never(), Some(None));
}
