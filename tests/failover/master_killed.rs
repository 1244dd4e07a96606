//! Failover against real valkey-server processes: the master is killed,
//! a replica is promoted and advertised, the other replica follows it,
//! acknowledged writes survive, and the old master, restarted empty, is
//! demoted and never advertised again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;
use valkyrie::config::{Config, GroupConfig};
use valkyrie::core::Addr;
use valkyrie::runtime;
use valkyrie_protocol::Frame;

fn config(dir: &std::path::Path, master: u16) -> Config {
    let mut g = GroupConfig::new("mymaster", "127.0.0.1", master, 2);
    g.down_after = Duration::from_millis(1000);
    g.failover_timeout = Duration::from_millis(10_000);
    Config {
        dir: dir.to_path_buf(),
        groups: vec![g],
        ..Config::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_master_fails_over_and_fences_the_old_master() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("valkyrie=info")
        .try_init();
    let bin = valkey_server();
    let tmp = TempDir::new("failover");
    let (mut master, _r1, _r2) = start_trio(&bin, &tmp.0);
    let (pm, p1, p2) = (master.port, _r1.port, _r2.port);
    // Acknowledged writes: confirmed by both replicas.
    write_acknowledged(pm, 100, 2);

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (handle, task) = runtime::start(config(&tmp.0, pm), async {
        let _ = stop_rx.await;
    })
    .await
    .unwrap();
    // Record every advertised master.
    let seen = Arc::new(Mutex::new(Vec::<(u64, Addr)>::new()));
    let mut rx = handle.topology.clone();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        loop {
            {
                let t = rx.borrow_and_update().clone();
                if let Some(g) = t.groups.get("mymaster") {
                    seen2
                        .lock()
                        .unwrap()
                        .push((g.config_epoch, g.master.clone()));
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    });
    // When `+switch-master` is delivered, the advertised topology already
    // names the new master: a client that asks at once is told it.
    let mut events = handle.events.subscribe();
    let topo_at_switch = handle.topology.clone();
    let switch_seen = tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(e) if e.channel.as_str() == "+switch-master" => {
                    let advertised = topo_at_switch.borrow().groups["mymaster"].master.clone();
                    return (e.payload, advertised);
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event bus closed: {e}"),
            }
        }
    });
    let topo = handle.topology.clone();
    let group = move || topo.borrow().groups.get("mymaster").cloned().unwrap();

    // Replicas are discovered from the master.
    tokio::task::spawn_blocking({
        let group = group.clone();
        move || wait_until(Duration::from_secs(10), || group().replicas.len() == 2)
    })
    .await
    .unwrap();

    master.kill();
    let killed_at = std::time::Instant::now();
    let new_master = tokio::task::spawn_blocking({
        let group = group.clone();
        move || {
            wait_until(Duration::from_secs(20), || group().master.port != pm);
            group().master.clone()
        }
    })
    .await
    .unwrap();
    let took = killed_at.elapsed();
    eprintln!("new master {new_master} advertised {took:?} after SIGKILL");
    assert!(new_master.port == p1 || new_master.port == p2);
    assert_eq!(group().config_epoch, 1);
    let (payload, advertised) = tokio::time::timeout(Duration::from_secs(5), switch_seen)
        .await
        .expect("+switch-master within 5 s")
        .unwrap();
    assert_eq!(
        payload,
        format!(
            "mymaster 127.0.0.1 {pm} {} {}",
            new_master.host, new_master.port
        )
    );
    assert_eq!(
        advertised, new_master,
        "advertised when +switch-master was published"
    );
    let other = if new_master.port == p1 { p2 } else { p1 };

    tokio::task::spawn_blocking(move || {
        // The new master is a master and has every acknowledged write.
        match call(new_master.port, &["ROLE"]) {
            Frame::Array(items) => assert_eq!(items[0], Frame::bulk("master")),
            other => panic!("{other:?}"),
        }
        for i in 0..100 {
            assert_eq!(
                call(new_master.port, &["GET", &format!("k{i}")]),
                Frame::bulk(format!("v{i}"))
            );
        }
        // It takes writes.
        assert_eq!(
            call(new_master.port, &["SET", "after", "1"]),
            Frame::simple("OK")
        );
        // The other replica follows it.
        wait_until(Duration::from_secs(15), || {
            info_field(other, "master_port").as_deref() == Some(&new_master.port.to_string())
                && info_field(other, "master_link_status").as_deref() == Some("up")
        });
    })
    .await
    .unwrap();

    // The old master comes back empty, believing it is a master: it must be
    // demoted and never advertised.
    master.restart_empty();
    let back_at = std::time::Instant::now();
    let np = new_master.port;
    tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || {
            info_field(pm, "role").as_deref() == Some("slave")
                && info_field(pm, "master_port").as_deref() == Some(&np.to_string())
        });
        eprintln!(
            "old master demoted {:?} after it came back",
            back_at.elapsed()
        );
        // And it resynced the data from the new master, not the reverse.
        wait_until(Duration::from_secs(10), || {
            try_call(pm, &["GET", "after"]).ok() == Some(Frame::bulk("1"))
        });
        assert_eq!(call(np, &["GET", "k7"]), Frame::bulk("v7"));
    })
    .await
    .unwrap();

    // Advertised masters: one per epoch, changing only with a higher epoch,
    // and the old master never again once replaced.
    let history = seen.lock().unwrap().clone();
    let mut last: Option<(u64, Addr)> = None;
    for (epoch, m) in &history {
        if let Some((e, prev)) = &last {
            assert!(epoch >= e, "epoch went back: {history:?}");
            if epoch == e {
                assert_eq!(m, prev, "two masters in epoch {e}: {history:?}");
            }
        }
        if *epoch >= 1 {
            assert_ne!(
                m.port, pm,
                "old master advertised after the failover: {history:?}"
            );
        }
        last = Some((*epoch, m.clone()));
    }
    assert_eq!(last.map(|(e, m)| (e, m.port)), Some((1, new_master.port)));
    // State survived on disk.
    let state = valkyrie::state::StateFile::in_dir(&tmp.0)
        .load()
        .unwrap()
        .unwrap();
    assert_eq!(state.groups["mymaster"].master, new_master);
    assert_eq!(state.groups["mymaster"].epoch, 1);

    let _ = stop_tx.send(());
    task.await.unwrap().unwrap();
}

/// The data-loss case Sentinel misses: the master dies and comes back
/// empty before down-after expires. Valkyrie must see the new run id and
/// the offset behind its replicas, promote a replica, and demote the empty
/// node, before the replicas resync from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_restarted_empty_inside_down_after_loses_nothing() {
    let bin = valkey_server();
    let tmp = TempDir::new("empty-restart");
    let (mut master, _r1, _r2) = start_trio(&bin, &tmp.0);
    let (pm, p1, p2) = (master.port, _r1.port, _r2.port);
    // Acknowledged writes: confirmed by both replicas.
    write_acknowledged(pm, 100, 2);

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut cfg = config(&tmp.0, pm);
    // A long down-after: the restart happens well inside it.
    cfg.groups[0].down_after = Duration::from_millis(5000);
    let (handle, task) = runtime::start(cfg, async {
        let _ = stop_rx.await;
    })
    .await
    .unwrap();
    let topo = handle.topology.clone();
    let group = move || topo.borrow().groups.get("mymaster").cloned().unwrap();
    tokio::task::spawn_blocking({
        let group = group.clone();
        move || wait_until(Duration::from_secs(10), || group().replicas.len() == 2)
    })
    .await
    .unwrap();
    // Valkyrie has every replica's INFO: run id and offset.
    tokio::task::spawn_blocking({
        let group = group.clone();
        move || {
            wait_until(Duration::from_secs(10), || {
                group()
                    .replicas
                    .iter()
                    .all(|r| !r.run_id.is_empty() && r.offset > 0)
            })
        }
    })
    .await
    .unwrap();

    master.restart_empty();
    let restarted = std::time::Instant::now();
    let new_master = tokio::task::spawn_blocking({
        let group = group.clone();
        move || {
            wait_until(Duration::from_secs(10), || group().master.port != pm);
            group().master.clone()
        }
    })
    .await
    .unwrap();
    eprintln!(
        "replaced the empty master with {new_master} in {:?}",
        restarted.elapsed()
    );
    tokio::task::spawn_blocking(move || {
        for i in 0..100 {
            assert_eq!(
                call(new_master.port, &["GET", &format!("k{i}")]),
                Frame::bulk(format!("v{i}")),
                "acknowledged write k{i} lost"
            );
        }
        // The restarted, empty node is demoted and refilled from the new
        // master; the other replica kept its data too.
        wait_until(Duration::from_secs(10), || {
            info_field(pm, "role").as_deref() == Some("slave")
                && try_call(pm, &["GET", "k42"]).ok() == Some(Frame::bulk("v42"))
        });
        let other = if new_master.port == p1 { p2 } else { p1 };
        wait_until(Duration::from_secs(10), || {
            try_call(other, &["GET", "k42"]).ok() == Some(Frame::bulk("v42"))
                && info_field(other, "master_port").as_deref() == Some(&new_master.port.to_string())
        });
    })
    .await
    .unwrap();
    let _ = stop_tx.send(());
    task.await.unwrap().unwrap();
}
