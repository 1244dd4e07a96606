//! The state that survives a daemon crash: what `Output::Persist`
//! carries and the state file stores.

use std::collections::BTreeMap;

use super::Addr;
use super::peering::KnownPeer;

/// The state that must survive a daemon crash.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct State {
    /// Per group.
    pub groups: BTreeMap<String, GroupState>,
    /// The global current epoch (Sentinel's `current-epoch`): every
    /// failover epoch of every group is taken from it.
    pub current_epoch: u64,
}

/// One group's persisted state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupState {
    /// The failover epoch (attempts).
    pub epoch: u64,
    /// The epoch the advertised master was adopted in.
    pub config_epoch: u64,
    /// The advertised master.
    pub master: Addr,
    /// Old masters that must be demoted before anything else.
    pub demoted: Vec<Addr>,
    /// The advertised master restarted without its data and has not been
    /// replaced yet (the replication id of its empty history): nothing may
    /// be pointed at it.
    pub master_lost: Option<String>,
    /// A failover in progress.
    pub failover: Option<PersistedFailover>,
    /// Our own vote: whom we voted for ...
    pub leader: Option<String>,
    /// ... in which epoch (no second vote in it, ever).
    pub leader_epoch: u64,
    /// Every peer sentinel known for this group.
    pub known_peers: Vec<KnownPeer>,
    /// A peer was known once: every promotion goes through an election,
    /// even when the peer table is empty again (`SENTINEL RESET`).
    pub peered: bool,
    /// Paused by an operator (`VALKYRIE PAUSE`): no promotion starts.
    pub paused: bool,
    /// The other instances the group has known (replicas listed by a
    /// master, configured, or followed): their history in the group is
    /// what lets a peer's configuration name one of them as master after a
    /// restart, when the old master that listed them is gone.
    pub replicas: Vec<Addr>,
}

impl GroupState {
    /// A group at `epoch` (failover and config epoch alike) whose master
    /// is `master`, nothing else known: no failover, vote, peer, replica
    /// or demoted node.
    pub fn new(master: Addr, epoch: u64) -> GroupState {
        GroupState {
            epoch,
            config_epoch: epoch,
            master,
            demoted: Vec::new(),
            master_lost: None,
            failover: None,
            leader: None,
            leader_epoch: 0,
            known_peers: Vec::new(),
            peered: false,
            paused: false,
            replicas: Vec::new(),
        }
    }
}

/// A failover in progress, as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PersistedFailover {
    /// Its epoch.
    pub epoch: u64,
    /// The master being replaced.
    pub old_master: Addr,
    /// The replica chosen for this epoch; never changed within the epoch.
    pub promoted: Addr,
    /// Whether the promotion was already confirmed.
    pub confirmed: bool,
    /// The replica's offset when it was chosen: a promotion is confirmed
    /// only if it still has at least this much (it did not resync from an
    /// empty master in between).
    pub min_offset: u64,
}
