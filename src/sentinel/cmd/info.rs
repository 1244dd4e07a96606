//! `INFO [section…]`: always a bulk string (never verbatim), with both
//! `redis_mode:sentinel` and `server_mode:sentinel` (clients read either),
//! `redis_version` ≥ 5, and the sentinel section in Valkey's format. The
//! clients, cpu and stats sections carry the fields of a sentinel's that
//! mean something here, in Valkey's order.
//!
//! # Format
//!
//! ```text
//! INFO [server|clients|cpu|stats|sentinel|all|default|everything]… -> $text
//! INFO <other>                                           -> $0
//! ```

use super::call::Call;
use std::sync::atomic::Ordering;

use valkyrie_protocol::Frame;

use super::hello::VERSION;

/// `used_cpu_user`/`used_cpu_sys` in seconds, from `/proc/self/stat`
/// (its times are in USER_HZ, 100 per second on Linux).
fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let mut f = rest.split_whitespace().skip(11);
    let tick = |v: Option<&str>| v.and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    let user = tick(f.next());
    let sys = tick(f.next());
    (user, sys)
}

pub async fn run(call: &mut Call<'_>) -> Frame {
    let (args, handle, session) = (call.args, call.handle, &*call.session);
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
        let clients = session.shared.registry.all();
        let pubsub = clients.iter().filter(|c| c.is_pubsub()).count();
        sections.push(format!(
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n\
             pubsub_clients:{pubsub}\r\n",
            clients.len(),
            session.shared.maxclients(),
        ));
    }
    if want("cpu") {
        let (user, sys) = cpu_seconds();
        sections.push(format!(
            "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n"
        ));
    }
    if want("stats") {
        let t = &session.shared.totals;
        let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        sections.push(format!(
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             total_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\n\
             client_output_buffer_limit_disconnections:{}\r\n",
            get(&t.connections),
            get(&t.commands),
            get(&t.net_in),
            get(&t.net_out),
            get(&t.rejected),
            get(&t.output_limit_disconnections),
        ));
    }
    if want("sentinel") {
        let t = handle.topology.borrow().clone();
        let mut s = format!(
            "# Sentinel\r\nsentinel_masters:{}\r\nsentinel_tilt:{}\r\nsentinel_tilt_since_seconds:{}\r\n\
             sentinel_running_scripts:{}\r\nsentinel_scripts_queue_length:{}\r\n\
             sentinel_simulate_failure_flags:{}\r\n",
            t.groups.len(),
            u8::from(t.tilt),
            tilt_since_seconds(t.tilt_since, handle.start.elapsed()),
            handle.scripts.running(),
            handle.scripts.queued(),
            handle.crash_points.load(Ordering::Relaxed),
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
                "master{i}:name={name},status={status},address={}:{},slaves={},sentinels={}\r\n",
                g.master.host,
                g.master.port,
                g.replicas.len(),
                g.master_details.sentinels.len() + 1
            ));
        }
        sections.push(s);
    }
    Frame::bulk(sections.join("\r\n"))
}

/// Sentinel's `sentinel_tilt_since_seconds`: whole seconds in TILT, -1
/// outside it. `entered` and `now` are on the runtime's clock.
fn tilt_since_seconds(entered: Option<crate::core::Millis>, now: std::time::Duration) -> i64 {
    entered.map_or(-1, |at| {
        let now = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        i64::try_from(now.saturating_sub(at) / 1000).unwrap_or(i64::MAX)
    })
}
