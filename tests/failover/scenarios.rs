//! More failure scenarios against real valkey-server processes: a stopped
//! (hung) master, a dead replica, a manual failover under continuous
//! writes, two groups, and Valkyrie itself restarted mid-failover.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::observe::{Writer, lost_writes};
use support::*;
use valkyrie::config::{Config, GroupConfig};
use valkyrie::runtime::{self, Handle, OperatorRequest, Request};
use valkyrie::topology::GroupView;
use valkyrie_protocol::Frame;

struct Setup {
    _tmp: TempDir,
    master: Server,
    replicas: Vec<Server>,
    pm: u16,
}

fn three_nodes(tag: &str) -> (Setup, std::path::PathBuf) {
    let bin = valkey_server();
    let tmp = TempDir::new(tag);
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let pm = master.port;
    let replicas = vec![r1, r2];
    let dir = tmp.0.clone();
    (
        Setup {
            _tmp: tmp,
            master,
            replicas,
            pm,
        },
        dir,
    )
}

fn group_config(name: &str, master: u16) -> GroupConfig {
    let mut g = GroupConfig::new(name, "127.0.0.1", master, 1);
    g.down_after = Duration::from_millis(1000);
    g.failover_timeout = Duration::from_millis(10_000);
    g
}

async fn start(
    dir: &std::path::Path,
    groups: Vec<GroupConfig>,
) -> (
    Handle,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), runtime::RuntimeError>>,
) {
    let cfg = Config {
        dir: dir.to_path_buf(),
        groups,
        ..Config::default()
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (handle, task) = runtime::start(cfg, async {
        let _ = rx.await;
    })
    .await
    .unwrap();
    (handle, tx, task)
}

fn view(h: &Handle, name: &str) -> std::sync::Arc<GroupView> {
    h.topology.borrow().groups.get(name).cloned().unwrap()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_master_is_failed_over_and_demoted_when_it_resumes() {
    let (s, dir) = three_nodes("sigstop");
    let (h, stop, task) = start(&dir, vec![group_config("mymaster", s.pm)]).await;
    let h2 = h.clone();
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            view(&h2, "mymaster").replicas.len() == 2
        })
    })
    .await;
    s.master.signal("STOP");
    let h2 = h.clone();
    let pm = s.pm;
    let new = blocking(move || {
        wait_until(Duration::from_secs(20), || {
            view(&h2, "mymaster").master.port != pm
        });
        view(&h2, "mymaster").master.clone()
    })
    .await;
    s.master.signal("CONT");
    // The resumed old master still thinks it is master: it must be demoted.
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            info_field(pm, "role").as_deref() == Some("slave")
                && info_field(pm, "master_port").as_deref() == Some(&new.port.to_string())
        })
    })
    .await;
    assert_eq!(view(&h, "mymaster").master, new);
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_replica_causes_no_failover() {
    let (mut s, dir) = three_nodes("replica-dead");
    let (h, stop, task) = start(&dir, vec![group_config("mymaster", s.pm)]).await;
    let h2 = h.clone();
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            view(&h2, "mymaster").replicas.len() == 2
        })
    })
    .await;
    s.replicas[0].kill();
    let dead = s.replicas[0].port;
    let h2 = h.clone();
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            view(&h2, "mymaster")
                .replicas
                .iter()
                .any(|r| r.addr.port == dead && r.down)
        })
    })
    .await;
    let v = view(&h, "mymaster");
    assert_eq!(v.master.port, s.pm);
    assert_eq!(v.config_epoch, 0);
    assert!(!v.failover_in_progress);
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_failover_under_writes_loses_no_acknowledged_write() {
    let (s, dir) = three_nodes("manual");
    let (h, stop, task) = start(&dir, vec![group_config("mymaster", s.pm)]).await;
    let h2 = h.clone();
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            view(&h2, "mymaster").replicas.len() == 2
        })
    })
    .await;
    // Valkyrie has every replica's INFO (run id, offset) before the
    // switchover is asked for.
    replicas_known(&h, 2).await;

    // A writer that follows the advertised master and records every write
    // the server acknowledged.
    let h2 = h.clone();
    let writer = Writer::start(Duration::ZERO, move || {
        Some(view(&h2, "mymaster").master.port)
    });
    let pm = s.pm;
    let writer = blocking(move || {
        wait_until(Duration::from_secs(10), || writer.acked_on(pm) > 100);
        writer
    })
    .await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    h.requests
        .send(Request::Operator(OperatorRequest::Failover {
            group: "mymaster".into(),
            from: None,
            reply: tx,
        }))
        .await
        .unwrap();
    rx.await.unwrap().unwrap();
    let h2 = h.clone();
    let new = blocking(move || {
        wait_until(Duration::from_secs(20), || {
            view(&h2, "mymaster").master.port != pm
        });
        view(&h2, "mymaster").master.clone()
    })
    .await;
    // The writer found the new master and wrote there too.
    let (acked, missing) = blocking(move || {
        wait_until(Duration::from_secs(10), || writer.acked_on(new.port) > 100);
        let acked = writer.stop();
        let missing = lost_writes(&acked, new.port);
        (acked, missing)
    })
    .await;
    assert!(
        acked.len() > 200,
        "too few writes to mean anything: {}",
        acked.len()
    );
    assert_eq!(missing, 0, "acknowledged writes lost");
    // The old master is now a replica of the new one, and no longer
    // paused: a write gets `-READONLY` at once instead of waiting out the
    // pause.
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            info_field(pm, "master_port").as_deref() == Some(&new.port.to_string())
        });
        let mut c = Client::connect_timeout(pm, Duration::from_secs(2)).unwrap();
        let reply = c.call(&["SET", "after-switchover", "x"]).unwrap();
        assert!(
            matches!(&reply, Frame::Error(e) if e.starts_with(b"READONLY")),
            "{reply:?}"
        );
    })
    .await;
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_fail_over_independently() {
    let ((mut a, dir), (b, _)) = (three_nodes("two-a"), three_nodes("two-b"));
    let (h, stop, task) = start(
        &dir,
        vec![group_config("alpha", a.pm), group_config("beta", b.pm)],
    )
    .await;
    let h2 = h.clone();
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            view(&h2, "alpha").replicas.len() == 2 && view(&h2, "beta").replicas.len() == 2
        })
    })
    .await;
    a.master.kill();
    let h2 = h.clone();
    let pa = a.pm;
    blocking(move || {
        wait_until(Duration::from_secs(20), || {
            view(&h2, "alpha").master.port != pa
        })
    })
    .await;
    let beta = view(&h, "beta");
    assert_eq!((beta.master.port, beta.config_epoch), (b.pm, 0));
    assert_eq!(view(&h, "alpha").config_epoch, 1);
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkyrie_restarted_mid_failover_promotes_once() {
    let (mut s, dir) = three_nodes("restart-mid");
    let (h, stop, task) = start(&dir, vec![group_config("mymaster", s.pm)]).await;
    let h2 = h.clone();
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            view(&h2, "mymaster").replicas.len() == 2
        })
    })
    .await;
    s.master.kill();
    // Stop Valkyrie the moment the failover epoch is on disk, before (or
    // while) it promotes.
    let file = valkyrie::state::StateFile::in_dir(&dir);
    let f2 = file.clone();
    blocking(move || {
        wait_until(Duration::from_secs(20), || {
            f2.load()
                .ok()
                .flatten()
                .is_some_and(|st| st.groups.get("mymaster").is_some_and(|g| g.epoch >= 1))
        })
    })
    .await;
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    drop(h);

    // A new daemon resumes from the state file.
    let (h, stop, task) = start(&dir, vec![group_config("mymaster", s.pm)]).await;
    let h2 = h.clone();
    let pm = s.pm;
    let new = blocking(move || {
        wait_until(Duration::from_secs(30), || {
            let v = view(&h2, "mymaster");
            v.master.port != pm && !v.failover_in_progress
        });
        view(&h2, "mymaster").master.clone()
    })
    .await;
    // Exactly one master among the replicas, and it is the advertised one.
    let ports: Vec<u16> = s.replicas.iter().map(|r| r.port).collect();
    let masters: Vec<u16> = blocking(move || {
        ports
            .into_iter()
            .filter(|&p| info_field(p, "role").as_deref() == Some("master"))
            .collect()
    })
    .await;
    assert_eq!(masters, vec![new.port]);
    let st = file.load().unwrap().unwrap();
    // At most one more epoch if the first attempt had to be abandoned.
    assert!(st.groups["mymaster"].epoch <= 2, "{st:?}");
    assert_eq!(st.groups["mymaster"].master, new);
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}
