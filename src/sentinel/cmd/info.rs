//! `INFO [section…]`: always a bulk string (never verbatim), with both
//! `redis_mode:sentinel` and `server_mode:sentinel` (clients read either),
//! `redis_version` ≥ 5, and the sentinel section in Valkey's format.
//!
//! # Format
//!
//! ```text
//! INFO [server|clients|sentinel|all|default|everything]… -> $text
//! INFO <other>                                           -> $0
//! ```

use valkyrie_protocol::Frame;

use super::hello::VERSION;
use crate::runtime::Handle;

pub fn run(args: &[&[u8]], handle: &Handle) -> Frame {
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| w == "all" || w == "default" || w == "everything");
    let want = |s: &str| all || wanted.iter().any(|w| w == s);
    let mut sections = Vec::new();
    if want("server") {
        sections.push(format!(
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:{VERSION}\r\n\
             redis_mode:sentinel\r\nserver_mode:sentinel\r\narch_bits:64\r\n\
             process_id:{}\r\nrun_id:{}\r\nuptime_in_seconds:{}\r\nexecutable:valkyrie\r\n",
            std::process::id(),
            handle.myid,
            handle.start.elapsed().as_secs()
        ));
    }
    if want("clients") {
        sections.push(format!(
            "# Clients\r\nconnected_clients:{}\r\n",
            super::super::connection::CONNECTED.load(std::sync::atomic::Ordering::Relaxed)
        ));
    }
    if want("sentinel") {
        let t = handle.topology.borrow().clone();
        let mut s = format!(
            "# Sentinel\r\nsentinel_masters:{}\r\nsentinel_tilt:0\r\nsentinel_tilt_since_seconds:-1\r\n\
             sentinel_running_scripts:0\r\nsentinel_scripts_queue_length:0\r\n\
             sentinel_simulate_failure_flags:0\r\n",
            t.groups.len()
        );
        for (i, (name, g)) in t.groups.iter().enumerate() {
            let status = if g.odown {
                "odown"
            } else if g.master_down {
                "sdown"
            } else {
                "ok"
            };
            s.push_str(&format!(
                "master{i}:name={name},status={status},address={}:{},slaves={},sentinels=1\r\n",
                g.master.host,
                g.master.port,
                g.replicas.len()
            ));
        }
        sections.push(s);
    }
    Frame::bulk(sections.join("\r\n"))
}
