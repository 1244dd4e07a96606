//! The per-address connection limit.

use std::net::IpAddr;

use crate::listen::AddressLimit;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn an_address_holds_at_most_max_and_gets_them_back() {
    let limit = AddressLimit::new(2);
    let a = limit.try_acquire(ip("10.0.0.1")).unwrap();
    let _b = limit.try_acquire(ip("10.0.0.1")).unwrap();
    assert!(limit.try_acquire(ip("10.0.0.1")).is_none());
    // Another address is not affected.
    let _c = limit.try_acquire(ip("10.0.0.2")).unwrap();
    drop(a);
    assert!(limit.try_acquire(ip("10.0.0.1")).is_some());
}

#[test]
fn the_map_forgets_an_address_with_no_connection() {
    let limit = AddressLimit::new(4);
    let permits: Vec<_> = (1..=3)
        .map(|i| limit.try_acquire(ip(&format!("10.0.0.{i}"))).unwrap())
        .collect();
    assert_eq!(limit.addresses(), 3);
    drop(permits);
    assert_eq!(limit.addresses(), 0);
}

#[test]
fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
    let limit = AddressLimit::new(1);
    let _a = limit.try_acquire(ip("2001:db8:1:2::1")).unwrap();
    assert!(limit.try_acquire(ip("2001:db8:1:2:ffff::9")).is_none());
    let _b = limit.try_acquire(ip("2001:db8:1:3::1")).unwrap();
    let _c = limit.try_acquire(ip("192.0.2.7")).unwrap();
    assert!(limit.try_acquire(ip("::ffff:192.0.2.7")).is_none());
    assert_eq!(limit.live(ip("::ffff:192.0.2.7")), 1);
}

#[test]
fn zero_is_no_limit() {
    let limit = AddressLimit::new(0);
    let permits: Vec<_> = (0..1000)
        .map(|_| limit.try_acquire(ip("10.0.0.1")).unwrap())
        .collect();
    assert_eq!(permits.len(), 1000);
    assert_eq!(limit.addresses(), 0);
}
