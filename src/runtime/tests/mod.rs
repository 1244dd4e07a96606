//! The shell's own rules: which state writes go together.

use crate::core::{Addr, GroupState};

mod promotion;
mod rewrite;

/// A group's state at `epoch`, its master on `port`, nothing else known.
fn state(port: u16, epoch: u64) -> GroupState {
    GroupState::new(Addr::new("127.0.0.1", port), epoch)
}

/// Which state writes go together in one write: each group's first
/// `Persist`, unless an output of its own comes first, up to the first
/// daemon-wide output.
#[test]
fn persists_of_different_groups_are_written_together_never_ahead_of_their_own_group() {
    use super::execute::hoistable_persists;
    use crate::core::{Command, Output};
    let persist = |g: &str| Output::Persist {
        group: g.into(),
        state: state(6379, 0),
    };
    let send = |g: &str| Output::Send {
        group: g.into(),
        to: Addr::new("127.0.0.1", 6380),
        token: 1,
        command: Command::ReplicaOfNoOne,
    };
    // A tick that starts three failovers: one write for the three.
    let tick = [
        persist("a"),
        send("a"),
        persist("b"),
        send("b"),
        persist("c"),
        send("c"),
    ];
    assert_eq!(hoistable_persists(&tick), [0, 2, 4]);
    // A group's second write, or one after its own command, stays put.
    let own = [
        persist("a"),
        send("a"),
        persist("a"),
        send("b"),
        persist("b"),
    ];
    assert_eq!(hoistable_persists(&own), [0]);
    // Nothing goes ahead of a daemon-wide output.
    let wide = [persist("a"), Output::Peers, persist("b")];
    assert_eq!(hoistable_persists(&wide), [0]);
}
