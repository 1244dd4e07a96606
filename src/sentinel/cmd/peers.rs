//! What peer sentinels ask of us, and what we tell about them:
//! `SENTINEL IS-MASTER-DOWN-BY-ADDR` (votes), `PUBLISH __sentinel__:hello`
//! (hellos on our port), `SENTINEL SENTINELS` and `SENTINEL CKQUORUM`.
//!
//! # Format
//!
//! ```text
//! SENTINEL is-master-down-by-addr|is-primary-down-by-addr <ip> <port> <epoch> <runid>
//!                                  -> *3 :<0|1> $<leader or *> :<leader epoch>
//!                                     (runid `*`: always $1 * and :0)
//! PUBLISH __sentinel__:hello <msg> -> :1
//! PUBLISH <other> <msg>            -> -ERR Only HELLO messages are accepted by Sentinel instances.
//! SENTINEL sentinels <name>        -> *N of peer maps (14 fields, 15 while SDOWN)
//! SENTINEL ckquorum <name>         -> +OK <n> usable Sentinels. Quorum and failover authorization can be reached
//!                                   | -NOQUORUM <n> usable Sentinels. Not enough …
//! ```

use super::call::Call;
use valkyrie_protocol::Frame;

use super::call::{kv, since};
use crate::core::{Addr, Millis};
use crate::runtime::Handle;
use crate::topology::GroupView;
use valkyrie_protocol::peer::VoteRequest;

/// `SENTINEL is-master-down-by-addr <ip> <port> <epoch> <runid>`; `args`
/// are the four arguments, arity already checked. A run id that is not
/// 40 hex digits (or `*`) asks for nothing the core would grant; it is
/// passed on as no candidate, and never stored.
pub async fn is_master_down_by_addr(handle: &Handle, args: [&[u8]; 4]) -> Frame {
    // Deliberate difference: Sentinel takes any signed 64-bit epoch (and
    // `-1` becomes its current epoch as 2^64-1, after which it can never
    // fail over again). We take plain decimals up to i64::MAX, not too far
    // ahead of ours (checked by the core), and refuse anything else with
    // the reply Sentinel gives a non-integer; the asker ignores it.
    let request = match VoteRequest::parse(args) {
        Ok(r) => r,
        Err(e) => return Frame::error(e.to_string()),
    };
    let answer = |down: bool, leader: Option<String>, epoch: u64| {
        Frame::Array(vec![
            Frame::Integer(i64::from(down)),
            Frame::bulk(leader.unwrap_or_else(|| "*".to_string())),
            Frame::Integer(i64::try_from(epoch).unwrap_or(i64::MAX)),
        ])
    };
    let VoteRequest::About {
        host,
        port,
        epoch,
        candidate,
    } = request
    else {
        // An address no master can have: not found, as in Sentinel.
        return answer(false, None, 0);
    };
    match handle
        .is_master_down_by_addr(Addr::new(host, port), epoch, candidate.map(str::to_string))
        .await
    {
        Ok(a) => answer(a.down, a.leader, a.leader_epoch),
        Err(e) => Frame::error(e.to_string()),
    }
}

/// `PUBLISH <channel> <message>`: only hellos, which are processed.
pub async fn publish(call: &mut Call<'_>) -> Frame {
    let (args, handle) = (call.args, call.handle);
    match args.get(1..) {
        Some([channel, message]) if *channel == b"__sentinel__:hello" => {
            let payload = String::from_utf8_lossy(message).into_owned();
            match handle.hello(payload).await {
                Ok(()) => Frame::Integer(1),
                Err(e) => Frame::error(e.to_string()),
            }
        }
        Some([_, _]) => Frame::error("ERR Only HELLO messages are accepted by Sentinel instances."),
        _ => super::call::wrong_arity("publish"),
    }
}

/// `SENTINEL SENTINELS <name>`: the group's peers, in Sentinel's field
/// order (`addReplySentinelValkeyInstance` for a sentinel).
pub fn sentinels(g: &GroupView, now: Millis) -> Frame {
    let peers = g.master_details.sentinels.iter().map(|p| {
        // Sentinel's flag order: s_down, o_down, master, slave, sentinel,
        // disconnected, master_down.
        let mut flags = Vec::with_capacity(4);
        if p.sdown {
            flags.push("s_down");
        }
        flags.push("sentinel");
        if !p.link_up {
            flags.push("disconnected");
        }
        if p.master_down {
            flags.push("master_down");
        }
        let ok = since(now, p.last_ok_ping);
        // Sentinel reports how long its oldest PING has gone unanswered;
        // the link does not tell, so: none while valid replies keep
        // coming within the PING period, else the silence.
        let ping_sent = if p.link_up && ok <= p.ping_period {
            0
        } else {
            ok
        };
        // Never answered: Sentinel counts from the link's creation, which
        // is when the peer was first known.
        let reply = if p.last_ping_reply == 0 {
            ok
        } else {
            since(now, p.last_ping_reply)
        };
        let mut out = Vec::with_capacity(15);
        kv(&mut out, "name", &p.runid);
        kv(&mut out, "ip", &p.addr.host);
        kv(&mut out, "port", p.addr.port);
        kv(&mut out, "runid", &p.runid);
        kv(&mut out, "flags", flags.join(","));
        kv(&mut out, "link-pending-commands", 0);
        kv(&mut out, "link-refcount", p.refcount);
        kv(&mut out, "last-ping-sent", ping_sent);
        kv(&mut out, "last-ok-ping-reply", ok);
        kv(&mut out, "last-ping-reply", reply);
        if p.sdown {
            kv(&mut out, "s-down-time", since(now, p.sdown_since));
        }
        kv(&mut out, "down-after-milliseconds", g.down_after);
        kv(&mut out, "last-hello-message", since(now, p.last_hello));
        kv(&mut out, "voted-leader", p.leader.as_deref().unwrap_or("?"));
        kv(&mut out, "voted-leader-epoch", p.leader_epoch);
        Frame::Map(out)
    });
    Frame::Array(peers.collect())
}

/// `SENTINEL CKQUORUM <name>` (`sentinelIsQuorumReachable`): usable
/// sentinels are ourselves and the peers not SDOWN; voters, every
/// sentinel known.
pub fn ckquorum(g: &GroupView) -> Frame {
    let peers = &g.master_details.sentinels;
    let usable = 1 + peers.iter().filter(|p| !p.sdown).count();
    let voters = peers.len() + 1;
    let mut problems = Vec::with_capacity(2);
    if usable < usize::try_from(g.quorum).unwrap_or(usize::MAX) {
        problems
            .push("Not enough available Sentinels to reach the specified quorum for this master");
    }
    if usable < voters / 2 + 1 {
        problems
            .push("Not enough available Sentinels to reach the majority and authorize a failover");
    }
    if problems.is_empty() {
        Frame::simple(format!(
            "OK {usable} usable Sentinels. Quorum and failover authorization can be reached"
        ))
    } else {
        Frame::error(format!(
            "NOQUORUM {usable} usable Sentinels. {}",
            problems.join(". ")
        ))
    }
}
