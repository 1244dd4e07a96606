//! The readiness verdict's peer quorum, with a real valkey-sentinel peer:
//! a Valkyrie and a real sentinel (quorum 2) are ready together; once the
//! real one is killed and seen down, the verdict on the Valkyrie names
//! the quorum out of reach with its numbers (`VALKYRIE READINESS`, before
//! anything fails), and once it is back, ready again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::peers::{Deployment, Spec, poll, serial};
use valkyrie_protocol::Frame;

const S: Duration = Duration::from_secs(1);

/// `VALKYRIE READINESS mymaster` on sentinel `port`: the scalar fields.
fn verdict(port: u16) -> BTreeMap<String, String> {
    let Ok(Frame::Array(kv)) = support::try_call(port, &["VALKYRIE", "READINESS", "mymaster"])
    else {
        return BTreeMap::new();
    };
    kv.chunks(2)
        .filter_map(|p| {
            let key = String::from_utf8_lossy(p[0].as_bytes()?).into_owned();
            let value = String::from_utf8_lossy(p.get(1)?.as_bytes()?).into_owned();
            Some((key, value))
        })
        .collect()
}

#[test]
fn the_verdict_names_a_peer_quorum_out_of_reach() {
    let _serial = serial();
    let mut d = Deployment::start("verdict-quorum", &[Spec::valkyrie(), Spec::real()]);
    d.check_i7(30 * S)
        .unwrap_or_else(|e| panic!("{e}\n{}", d.log_tail(0, 30)));
    let port = d.sentinels[0].port;
    let ready = |v: &BTreeMap<String, String>| {
        (v.get("reason").map(String::as_str) == Some("ready")
            && v.get("usable-sentinels").map(String::as_str) == Some("2"))
        .then_some(())
        .ok_or_else(|| format!("{v:?}"))
    };
    poll(20 * S, || ready(&verdict(port))).unwrap();

    d.kill_sentinel(1);
    let v = poll(15 * S, || {
        let v = verdict(port);
        (v.get("reason").map(String::as_str) == Some("quorum_unreachable"))
            .then(|| v.clone())
            .ok_or_else(|| format!("{v:?}"))
    })
    .unwrap();
    assert_eq!(v["ready"], "0", "{v:?}");
    assert_eq!(v["usable-sentinels"], "1", "{v:?}");
    assert_eq!(v["quorum"], "2", "{v:?}");
    assert_eq!(v["votes-needed"], "2", "{v:?}");
    assert!(
        v["text"].contains("only 1 sentinel(s) reachable") && v["text"].contains("quorum of 2"),
        "{v:?}"
    );
    // Nothing failed: the master is still the first one.
    assert_eq!(d.advertised(0), Some(d.nodes[0].port));

    d.start_sentinel(1);
    poll(20 * S, || ready(&verdict(port))).unwrap();
}
