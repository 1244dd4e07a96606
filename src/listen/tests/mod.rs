//! Listener helpers: the accept backoff, connection limits, the backlog.

use super::*;

mod per_address;

#[test]
fn backoff_doubles_to_a_second_and_resets() {
    let mut b = accept_backoff();
    let pauses: Vec<u64> = (0..9).map(|_| b.next_delay().as_millis() as u64).collect();
    assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    b.reset();
    assert_eq!(b.next_delay(), Duration::from_millis(10));
}

#[test]
fn connection_limit_hands_out_max_permits_and_takes_them_back() {
    let limit = ConnectionLimit::new(2);
    let a = limit.try_acquire().unwrap();
    let b = limit.try_acquire().unwrap();
    assert_eq!(limit.live(), 2);
    assert!(limit.try_acquire().is_none());
    assert_eq!(limit.live(), 2, "a refusal counts nothing");
    drop(a);
    assert_eq!(limit.live(), 1);
    let c = limit.try_acquire().unwrap();
    assert!(limit.try_acquire().is_none());
    drop((b, c));
    assert_eq!(limit.live(), 0);
    assert_eq!(limit.max(), 2);
    assert!(ConnectionLimit::new(0).try_acquire().is_none());
}

#[test]
fn connection_limit_holds_under_contention() {
    let limit = ConnectionLimit::new(5);
    let granted = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..1000 {
                    if let Some(p) = limit.try_acquire() {
                        assert!(limit.live() <= 5);
                        granted
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(p);
                    }
                }
            });
        }
    });
    let granted = granted
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert_eq!(granted.len(), 5);
    assert_eq!(limit.live(), 5);
    drop(granted);
    assert_eq!(limit.live(), 0);
}

#[test]
fn nofile_plan_follows_valkey() {
    // Enough already.
    assert_eq!(
        plan_nofile(100_000, None, 10_000),
        NofilePlan {
            raise_to: None,
            maxclients: 10_000
        }
    );
    // Raised to what is wanted.
    assert_eq!(
        plan_nofile(1024, Some(1 << 20), 10_000),
        NofilePlan {
            raise_to: Some(10_032),
            maxclients: 10_000
        }
    );
    // Raised to the hard limit, maxclients clamped.
    assert_eq!(
        plan_nofile(1024, Some(4096), 10_000),
        NofilePlan {
            raise_to: Some(4096),
            maxclients: 4064
        }
    );
    // Cannot be raised: limit - 32, at least 1.
    assert_eq!(
        plan_nofile(64, Some(64), 10_000),
        NofilePlan {
            raise_to: None,
            maxclients: 32
        }
    );
    assert_eq!(plan_nofile(20, Some(20), 10_000).maxclients, 1);
}

#[tokio::test]
async fn bind_uses_valkeys_backlog() {
    let l = bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let port = l.local_addr().unwrap().port();
    // The listen queue's size shows as Send-Q in `ss -ltn`.
    let Ok(out) = std::process::Command::new("ss")
        .args(["-ltnH"])
        .arg(format!("( sport = :{port} )"))
        .output()
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let send_q: Vec<&str> = text.split_whitespace().collect();
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(BACKLOG);
    assert_eq!(
        send_q.get(2).copied(),
        Some(BACKLOG.min(somaxconn).to_string().as_str()),
        "{text}"
    );
}

#[test]
fn the_client_budget_leaves_the_links_and_the_admin_port_their_descriptors() {
    use super::budget::{ADMIN, clients};
    // 32 kept as Valkey keeps them, 16 for the admin port.
    assert_eq!(
        clients(1_000, 0),
        1_000 - 32 - usize::try_from(ADMIN).unwrap()
    );
    assert_eq!(clients(1_000, 100), 1_000 - 32 - 16 - 100);
    // A limit too small for the reserve still leaves one client.
    assert_eq!(clients(40, 10), 1);
    // Two links per instance, one per peer link, verified or not.
    let mut t = crate::topology::Topology {
        peer_links: 3,
        ..Default::default()
    };
    assert_eq!(t.link_descriptors(), 3);
    use crate::core::{Addr, Core, GroupSpec, Settings};
    let spec = GroupSpec {
        name: "g".into(),
        master: Addr::new("127.0.0.1", 6379),
        quorum: 1,
        down_after: 1_000,
        failover_timeout: 10_000,
        parallel_syncs: 1,
        reboot_down_after: 0,
        fence: Default::default(),
        route_wait: 0,
        known_replicas: vec![Addr::new("127.0.0.1", 6380), Addr::new("127.0.0.1", 6381)],
    };
    let (core, _) = Core::new(Settings::new("0".repeat(40)), vec![spec], None, 0);
    let groups = crate::topology::Advertiser::new(&core, 0)
        .topology()
        .groups
        .clone();
    assert_eq!(groups["g"].replicas.len(), 2);
    t.groups = groups;
    assert_eq!(t.link_descriptors(), 3 + 2 * 3);
}
