//! Each channel's Sentinel level, and which events run the notification
//! script (`docs/plans/scripts.md` §1).

use crate::events::{Channel, Level};

#[test]
fn each_channel_has_its_level_and_says_whether_it_notifies() {
    // One row per channel, Sentinel 8.0.1's level and whether a
    // notification script runs. The match is exhaustive: a new
    // channel does not compile until it is classified here.
    for &c in Channel::ALL {
        let (level, notifies) = match c {
            Channel::Sdown => (Level::Warning, true),
            Channel::SdownCleared => (Level::Warning, true),
            Channel::Odown => (Level::Warning, true),
            Channel::OdownCleared => (Level::Warning, true),
            Channel::NewEpoch => (Level::Warning, true),
            Channel::TryFailover => (Level::Warning, true),
            Channel::ElectedLeader => (Level::Warning, true),
            Channel::VoteForLeader => (Level::Warning, true),
            Channel::FailoverStateSelectSlave => (Level::Warning, true),
            Channel::FailoverAbortNoGoodSlave => (Level::Warning, true),
            Channel::SelectedSlave => (Level::Warning, true),
            Channel::FailoverStateSendSlaveofNoone => (Level::Notice, false),
            Channel::FailoverStateWaitPromotion => (Level::Notice, false),
            Channel::FailoverAbortSlaveTimeout => (Level::Warning, true),
            Channel::PromotedSlave => (Level::Warning, true),
            Channel::FailoverStateReconfSlaves => (Level::Warning, true),
            Channel::SlaveReconfSent => (Level::Notice, false),
            Channel::SlaveReconfSentTimeout => (Level::Notice, false),
            Channel::SlaveReconfInprog => (Level::Notice, false),
            Channel::SlaveReconfDone => (Level::Notice, false),
            Channel::FailoverEndForTimeout => (Level::Warning, true),
            Channel::FailoverEnd => (Level::Warning, true),
            Channel::SwitchMaster => (Level::Warning, true),
            Channel::Slave => (Level::Notice, false),
            Channel::FixSlaveConfig => (Level::Notice, false),
            Channel::ConvertToSlave => (Level::Notice, false),
            Channel::RoleChange => (Level::Verbose, false),
            Channel::Reboot => (Level::Notice, false),
            Channel::Monitor => (Level::Warning, true),
            Channel::MonitorRemoved => (Level::Warning, true),
            Channel::Set => (Level::Warning, true),
            Channel::ResetMaster => (Level::Warning, true),
            Channel::Tilt => (Level::Warning, false),
            Channel::TiltCleared => (Level::Warning, false),
            Channel::Sentinel => (Level::Notice, false),
            Channel::SentinelAddressSwitch => (Level::Notice, false),
            Channel::SentinelInvalidAddr => (Level::Notice, false),
            Channel::ConfigUpdateFrom => (Level::Warning, true),
            Channel::FailoverAbortNotElected => (Level::Warning, true),
            Channel::FailoverReason => (Level::Notice, false),
            Channel::ScriptError => (Level::Warning, false),
            Channel::ScriptTimeout => (Level::Warning, false),
        };
        assert_eq!(c.level(), level, "{c}");
        assert_eq!(c.notifies(), notifies, "{c}");
    }
    // The same, by wire text: the plan's "Run it" list (§1).
    let run: std::collections::BTreeSet<&str> = Channel::ALL
        .iter()
        .filter(|c| c.notifies())
        .map(|c| c.as_str())
        .collect();
    let expected = [
        "+monitor",
        "-monitor",
        "+set",
        "+reset-master",
        "+sdown",
        "-sdown",
        "+odown",
        "-odown",
        "+new-epoch",
        "+try-failover",
        "+vote-for-leader",
        "+elected-leader",
        "-failover-abort-not-elected",
        "+failover-state-select-slave",
        "-failover-abort-no-good-slave",
        "+selected-slave",
        "-failover-abort-slave-timeout",
        "+promoted-slave",
        "+failover-state-reconf-slaves",
        "+failover-end-for-timeout",
        "+failover-end",
        "+switch-master",
        "+config-update-from",
    ];
    assert_eq!(run, expected.into_iter().collect());
    assert!(Level::Debug < Level::Verbose && Level::Notice < Level::Warning);
}
