//! The counts ODOWN and an election need: who votes, the quorum, the
//! votes an election needs, and whether one can be won at all. The
//! election ([`election`](super::election)) and the readiness verdict
//! ([`readiness`](crate::readiness)) both count with these.

use crate::{Group, Peer};

impl Group {
    /// The peers that vote: the verified ones ([`Peer::verified`]).
    pub fn voters(&self) -> impl Iterator<Item = &Peer> {
        self.peers.values().filter(|p| p.verified)
    }

    /// Votes needed: a majority of every sentinel ever known (verified),
    /// and `quorum`.
    pub fn vote_threshold(&self) -> usize {
        let voters = self.voters().count() + 1;
        (voters / 2 + 1).max(self.quorum())
    }

    /// Whether `count` sentinels (ourselves included) saying "down" make
    /// ODOWN: `quorum` of them.
    pub(crate) fn quorum_reached(&self, count: usize) -> bool {
        count >= self.quorum()
    }

    /// `quorum`, as a count of sentinels.
    pub(crate) fn quorum(&self) -> usize {
        usize::try_from(self.spec.quorum).unwrap_or(usize::MAX)
    }

    /// No election can be won: the votes needed are more than the
    /// sentinels we know (ourselves included), after a `SENTINEL RESET`
    /// or with a misconfigured quorum.
    pub(crate) fn election_unwinnable(&self) -> bool {
        self.vote_threshold() > self.voters().count() + 1
    }
}
