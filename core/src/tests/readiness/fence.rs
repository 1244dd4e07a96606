//! The write fence in the verdict: a veto inside the witness rule, and
//! otherwise a view (relaxed, refused, not in force), never a hold.

use super::*;
use crate::{FenceMode, FenceSetting, WriteFence};

fn fenced(mode: FenceMode) -> H {
    let mut s = spec("mymaster", M);
    s.fence = WriteFence { mode, lag_secs: 1 };
    H::with(vec![s], None)
}

fn fence_of(replicas: u64) -> Command {
    Command::SetWriteFence(FenceSetting {
        replicas,
        lag_secs: 1,
        ping_secs: group::write_fence::FENCE_PING_SECS,
    })
}

#[test]
fn the_fence_vetoes_while_fewer_replicas_went_silent_than_it_requires() {
    const R3: u16 = 6382;
    let mut h = fenced(FenceMode::Auto);
    h.info(M, master_info("m1", 100, &[R1, R2, R3]));
    for (p, run) in [(R1, "r1"), (R2, "r2"), (R3, "r3")] {
        h.info(p, replica_info(run, M, true, 100, 100));
    }
    let t = h.token_of(M, &fence_of(2));
    h.reply(t, M, Reply::Ok);
    assert_eq!(verdict(&h).fence, FenceView::InForce { replicas: 2 });
    // Only R1 is reachable, and it lost the master: the other two may
    // still be with it.
    for p in [M, R2, R3] {
        h.down(p, LinkFailure::ConnectTimeout);
    }
    let end = h.now + 5 * D;
    while h.now < end {
        h.now += 100;
        h.ping(R1);
        h.info(R1, replica_info("r1", M, false, 100, 100));
    }
    let r = verdict(&h);
    assert_eq!(r.fence, FenceView::InForce { replicas: 2 });
    assert_eq!(
        r.holds,
        vec![Reason::WitnessVeto(VetoCause::FenceHolds {
            silent: 1,
            needed: 2
        })]
    );
    assert_eq!(
        r.describe(h.now),
        "vetoed: the write fence requires 2 replicas and only 1 stopped hearing from the \
         master: it may still take writes through the others"
    );
}

#[test]
fn the_fence_is_shown_relaxed_refused_or_not_in_force() {
    let mut h = fenced(FenceMode::Auto);
    h.healthy();
    assert_eq!(verdict(&h).fence, FenceView::NotInForce, "sent, unanswered");
    let t = h.token_of(M, &fence_of(2));
    h.reply(t, M, Reply::Ok);
    assert_eq!(verdict(&h).fence, FenceView::InForce { replicas: 2 });
    // R2 left: one replica required of the two known.
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1]));
    let t = h.token_of(M, &fence_of(1));
    h.reply(t, M, Reply::Ok);
    let relaxed = FenceView::Relaxed {
        in_force: 1,
        full: 2,
    };
    assert_eq!(verdict(&h).fence, relaxed);
    assert_eq!(relaxed.label(), "relaxed");
    assert!(verdict(&h).ready, "a risk, not a hold");

    let mut h = fenced(FenceMode::Strict);
    h.healthy();
    let t = h.token_of(M, &fence_of(2));
    h.reply(t, M, Reply::Failed("NOPERM".into()));
    assert_eq!(verdict(&h).fence, FenceView::Refused);
    assert!(verdict(&h).ready);
}
