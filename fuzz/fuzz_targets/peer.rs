//! The peer protocol's parsers (`valkyrie_protocol::peer`): hellos and
//! vote requests from anyone who can publish on a hello channel or reach
//! the Sentinel port. Never panics; whatever is accepted meets every rule
//! (printable hosts of at most 255 bytes, 40-hex run ids, epochs of at
//! most i64::MAX with the config epoch not above the current one, ports
//! above 0), and an accepted hello written back out parses to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use valkyrie_protocol::peer::{
    HelloFields, MAX_EPOCH, MAX_HOST_LEN, VoteRequest, is_runid,
};

fn printable(host: &str) -> bool {
    !host.is_empty() && host.len() <= MAX_HOST_LEN && host.bytes().all(|b| b.is_ascii_graphic())
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for names in [false, true] {
        if let Ok(h) = HelloFields::parse(&text, names) {
            assert!(printable(h.ip) && printable(h.master_ip));
            if !names {
                assert!(h.ip.parse::<std::net::IpAddr>().is_ok());
                assert!(h.master_ip.parse::<std::net::IpAddr>().is_ok());
            }
            assert!(is_runid(h.runid));
            assert!(h.config_epoch <= h.current_epoch && h.current_epoch <= MAX_EPOCH);
            assert!(h.port > 0 && h.master_port > 0);
            let again = format!(
                "{},{},{},{},{},{},{},{}",
                h.ip,
                h.port,
                h.runid,
                h.current_epoch,
                h.name,
                h.master_ip,
                h.master_port,
                h.config_epoch
            );
            assert_eq!(HelloFields::parse(&again, names), Ok(h));
        }
    }
    // The same bytes as the four arguments of a vote request, split at
    // the first three 0xff bytes (which no argument of interest holds).
    let mut parts = data.splitn(4, |b| *b == 0xff);
    let (Some(ip), Some(port), Some(epoch), Some(runid)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return;
    };
    if let Ok(VoteRequest::About {
        epoch, candidate, ..
    }) = VoteRequest::parse([ip, port, epoch, runid])
    {
        assert!(epoch <= MAX_EPOCH);
        assert!(candidate.is_none_or(is_runid));
    }
});
