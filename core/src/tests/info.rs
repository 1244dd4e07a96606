//! INFO parsing tests.
use crate::{Addr, InfoReport, Role};

const MASTER: &str = "# Server\r\nredis_version:7.2.4\r\nrun_id:aaa\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0\r\nslave1:ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=1\r\nmaster_failover_state:no-failover\r\nmaster_replid:r1\r\nmaster_repl_offset:42\r\n\r\n# Keyspace\r\ndb0:keys=3,expires=0,avg_ttl=0\r\ndb2:keys=4,expires=0,avg_ttl=0\r\n";

const REPLICA: &str = "# Server\r\nrun_id:bbb\r\n# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:6379\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:1\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:40\r\nslave_repl_offset:40\r\nslave_priority:50\r\nmaster_replid:r1\r\nmaster_repl_offset:40\r\n";

#[test]
fn master_info() {
    let i = InfoReport::parse(MASTER).unwrap();
    assert_eq!(i.run_id, "aaa");
    assert_eq!(i.role, Role::Master);
    assert_eq!(i.offset, 42);
    assert_eq!(i.keys, Some(7));
    assert_eq!(i.replicas.len(), 2);
    assert_eq!(i.replicas[0].addr, Addr::new("127.0.0.1", 6380));
    assert!(i.replicas[0].online && !i.replicas[1].online);
}

#[test]
fn replica_info() {
    let i = InfoReport::parse(REPLICA).unwrap();
    assert_eq!(i.priority, 50);
    // No `replica_announced` line (servers before 6.2): announced.
    assert!(i.announced);
    assert_eq!(i.offset, 40);
    assert_eq!(i.keys, None);
    assert_eq!(
        i.role,
        Role::Replica {
            master: Addr::new("127.0.0.1", 6379),
            link_up: true,
            link_down_secs: None,
            last_io_secs: Some(1),
            sync_in_progress: false,
        }
    );
}

#[test]
fn empty_keyspace_section_means_zero_keys() {
    let i = InfoReport::parse("run_id:x\nrole:master\nmaster_repl_offset:0\n# Keyspace\n").unwrap();
    assert_eq!(i.keys, Some(0));
}

#[test]
fn unusable() {
    assert!(InfoReport::parse("role:master\n").is_err());
    assert!(InfoReport::parse("run_id:x\nrole:sentinel\n").is_err());
    assert!(InfoReport::parse("run_id:x\nrole:slave\n").is_err());
}

#[test]
fn a_replica_says_whether_it_is_announced() {
    let with = |v: &str| format!("{REPLICA}replica_announced:{v}\r\n");
    assert!(!InfoReport::parse(&with("0")).unwrap().announced);
    assert!(InfoReport::parse(&with("1")).unwrap().announced);
}
