//! Sentinel event payloads, formatted exactly as Valkey's `sentinelEvent`
//! does (reference §3), so subscribers parse them unchanged.
//!
//! An instance is written `<type> <name> <ip> <port>`, followed by
//! ` @ <master-name> <master-ip> <master-port>` when it is not a master; a
//! replica's name is `ip:port`.

use std::fmt;

use super::Addr;

/// Sentinel's log level of an event (Valkey's `LL_*`), lowest first. A
/// `WARNING` event that names an instance runs the notification script of
/// its group ([`Channel::notifies`]); the others never do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// `LL_DEBUG` (`±script-child`: logged, never published).
    Debug,
    /// `LL_VERBOSE` (`+role-change`).
    Verbose,
    /// `LL_NOTICE` (`+slave`, `+sentinel`, `+reboot`, …).
    Notice,
    /// `LL_WARNING` (`±sdown`, `+switch-master`, `+tilt`, …).
    Warning,
}

/// Declares [`Channel`], its wire text and its [`Level`] in one table.
macro_rules! channels {
    ($($(#[$doc:meta])* $name:ident => $text:literal at $level:ident,)*) => {
        /// A Sentinel event channel (or Valkyrie's own, `valkyrie:…`). The
        /// wire text and the level of each are in one table
        /// ([`Channel::as_str`], [`Channel::level`]), so a misspelt
        /// channel does not compile and a new one must say its level.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Channel {
            $($(#[$doc])* $name,)*
        }

        impl Channel {
            /// Every channel, in declaration order.
            pub const ALL: &'static [Channel] = &[$(Channel::$name,)*];

            /// The channel's name on the wire, e.g. `+switch-master`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Channel::$name => $text,)*
                }
            }

            /// The level Sentinel 8.0.1 logs the event at.
            pub const fn level(self) -> Level {
                match self {
                    $(Channel::$name => Level::$level,)*
                }
            }
        }
    };
}

channels! {
    /// An instance is subjectively down.
    Sdown => "+sdown" at Warning,
    /// An instance is no longer subjectively down.
    SdownCleared => "-sdown" at Warning,
    /// A master is objectively down.
    Odown => "+odown" at Warning,
    /// A master is no longer objectively down.
    OdownCleared => "-odown" at Warning,
    /// The group's current epoch was raised.
    NewEpoch => "+new-epoch" at Warning,
    /// A failover starts.
    TryFailover => "+try-failover" at Warning,
    /// This daemon leads the failover of an epoch.
    ElectedLeader => "+elected-leader" at Warning,
    /// A vote was given for a leader.
    VoteForLeader => "+vote-for-leader" at Warning,
    /// Looking for a replica to promote.
    FailoverStateSelectSlave => "+failover-state-select-slave" at Warning,
    /// No replica can be promoted.
    FailoverAbortNoGoodSlave => "-failover-abort-no-good-slave" at Warning,
    /// The replica to promote was chosen.
    SelectedSlave => "+selected-slave" at Warning,
    /// `REPLICAOF NO ONE` is being sent to the chosen replica.
    FailoverStateSendSlaveofNoone => "+failover-state-send-slaveof-noone" at Notice,
    /// Waiting for the chosen replica to report itself a master.
    FailoverStateWaitPromotion => "+failover-state-wait-promotion" at Notice,
    /// The chosen replica did not become a master in time.
    FailoverAbortSlaveTimeout => "-failover-abort-slave-timeout" at Warning,
    /// The chosen replica is now a master.
    PromotedSlave => "+promoted-slave" at Warning,
    /// The other replicas are being pointed at the new master.
    FailoverStateReconfSlaves => "+failover-state-reconf-slaves" at Warning,
    /// `REPLICAOF` was sent to a replica.
    SlaveReconfSent => "+slave-reconf-sent" at Notice,
    /// A replica did not start following the new master in time.
    SlaveReconfSentTimeout => "-slave-reconf-sent-timeout" at Notice,
    /// A replica is syncing with the new master.
    SlaveReconfInprog => "+slave-reconf-inprog" at Notice,
    /// A replica follows the new master.
    SlaveReconfDone => "+slave-reconf-done" at Notice,
    /// The failover ended after its timeout.
    FailoverEndForTimeout => "+failover-end-for-timeout" at Warning,
    /// The failover ended.
    FailoverEnd => "+failover-end" at Warning,
    /// The group's master changed.
    SwitchMaster => "+switch-master" at Warning,
    /// A new replica was discovered.
    Slave => "+slave" at Notice,
    /// A replica was told to follow the right master.
    FixSlaveConfig => "+fix-slave-config" at Notice,
    /// A stray master was told to become a replica.
    ConvertToSlave => "+convert-to-slave" at Notice,
    /// An instance reported a role other than the advertised one.
    RoleChange => "+role-change" at Verbose,
    /// An instance restarted.
    Reboot => "+reboot" at Notice,
    /// A group is now monitored.
    Monitor => "+monitor" at Warning,
    /// A group is no longer monitored.
    MonitorRemoved => "-monitor" at Warning,
    /// A group's setting changed (`SENTINEL SET`).
    Set => "+set" at Warning,
    /// A group was reset (`SENTINEL RESET`).
    ResetMaster => "+reset-master" at Warning,
    /// Failovers are paused (TILT, the mass-failure pause).
    Tilt => "+tilt" at Warning,
    /// Failovers are allowed again.
    TiltCleared => "-tilt" at Warning,
    /// A peer sentinel was discovered.
    Sentinel => "+sentinel" at Notice,
    /// A known peer now announces another address.
    SentinelAddressSwitch => "+sentinel-address-switch" at Notice,
    /// A new peer announced the address an old one held: the old one is
    /// forgotten.
    SentinelInvalidAddr => "+sentinel-invalid-addr" at Notice,
    /// A configuration with a higher config epoch was adopted from a peer.
    ConfigUpdateFrom => "+config-update-from" at Warning,
    /// The election for a failover was not won in time.
    FailoverAbortNotElected => "-failover-abort-not-elected" at Warning,
    /// Valkyrie's own: why a failover or switchover was held back,
    /// vetoed, given up or refused (a JSON payload built by the shell).
    /// Not Sentinel's: pattern subscribers get it only through a pattern
    /// that itself starts with `valkyrie:`.
    FailoverReason => "valkyrie:failover-reason" at Notice,
    /// A script was given up: `<path> <signal> <exit-code>` (`99 0` when
    /// it could not be started for lack of resources and waits for
    /// another try; `0 2` when it could not be run at all).
    ScriptError => "-script-error" at Warning,
    /// A script ran past `script-max-runtime` and is killed:
    /// `<path> <pid>`.
    ScriptTimeout => "-script-timeout" at Warning,
}

impl Channel {
    /// Whether the event runs the notification script of its group:
    /// Sentinel runs it for a `WARNING` event that names an instance
    /// (`sentinelEvent` with a non-null instance, sc:633-706). `±tilt` and
    /// `-script-*` are daemon-wide, so they never do; nor does any event
    /// below `WARNING`.
    pub const fn notifies(self) -> bool {
        matches!(self.level(), Level::Warning)
            && !matches!(
                self,
                Channel::Tilt
                    | Channel::TiltCleared
                    | Channel::ScriptError
                    | Channel::ScriptTimeout
            )
    }

    /// The channel whose wire text is `text`, if any.
    pub fn from_wire(text: &[u8]) -> Option<Channel> {
        Channel::ALL
            .iter()
            .copied()
            .find(|c| c.as_str().as_bytes() == text)
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event to publish on its channel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// The channel, e.g. [`Channel::SwitchMaster`].
    pub channel: Channel,
    /// The message.
    pub payload: String,
    /// The group it concerns (`None` for daemon-wide events such as
    /// `+tilt`). Not part of the wire format: payloads such as
    /// `+new-epoch` do not name their group, and the shell's logs and
    /// metrics need it.
    pub group: Option<String>,
}

/// `master <name> <ip> <port>`.
pub fn master(name: &str, addr: &Addr) -> String {
    format!("master {name} {} {}", addr.host, addr.port)
}

/// `slave <ip>:<port> <ip> <port> @ <name> <mip> <mport>`.
pub fn replica(addr: &Addr, name: &str, master: &Addr) -> String {
    format!(
        "slave {addr} {} {} @ {name} {} {}",
        addr.host, addr.port, master.host, master.port
    )
}

/// A peer sentinel in instance form: `sentinel <runid> <ip> <port> @
/// <name> <master-ip> <master-port>`.
pub fn sentinel(runid: &str, addr: &Addr, name: &str, master: &Addr) -> String {
    format!(
        "sentinel {runid} {} {} @ {name} {} {}",
        addr.host, addr.port, master.host, master.port
    )
}

/// `+switch-master` payload: `<name> <oldip> <oldport> <newip> <newport>`.
pub fn switch_master(name: &str, old: &Addr, new: &Addr) -> String {
    format!("{name} {} {} {} {}", old.host, old.port, new.host, new.port)
}

impl Event {
    /// An event.
    pub fn new(channel: Channel, payload: String) -> Event {
        Event {
            channel,
            payload,
            group: None,
        }
    }

    /// The instance the payload names (`master <name> <ip> <port>` or
    /// `slave <ip>:<port> <ip> <port> @ …`), if it names one.
    pub fn instance(&self) -> Option<Addr> {
        let mut words = self.payload.split(' ');
        let kind = words.next()?;
        if !matches!(kind, "master" | "slave" | "sentinel") {
            return None;
        }
        let _name = words.next()?;
        let host = words.next()?;
        let port = words.next()?.parse().ok()?;
        Some(Addr::new(host, port))
    }

    /// Whether the payload names a master (rather than a replica).
    pub fn about_master(&self) -> bool {
        self.payload.starts_with("master ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_match_valkey() {
        let m = Addr::new("127.0.0.1", 16379);
        let r = Addr::new("127.0.0.1", 16380);
        assert_eq!(master("mymaster", &m), "master mymaster 127.0.0.1 16379");
        assert_eq!(
            replica(&r, "mymaster", &m),
            "slave 127.0.0.1:16380 127.0.0.1 16380 @ mymaster 127.0.0.1 16379"
        );
        assert_eq!(
            switch_master("mymaster", &m, &r),
            "mymaster 127.0.0.1 16379 127.0.0.1 16380"
        );
    }

    #[test]
    fn channel_names_are_unique_and_read_back() {
        let mut seen = std::collections::BTreeSet::new();
        for c in Channel::ALL {
            let text = c.as_str();
            assert!(
                text.starts_with(['+', '-']) || text.starts_with("valkyrie:"),
                "{text}"
            );
            assert!(seen.insert(text), "{text} twice");
            assert_eq!(Channel::from_wire(text.as_bytes()), Some(*c));
        }
        assert_eq!(Channel::from_wire(b"+nope"), None);
        assert_eq!(Channel::SwitchMaster.to_string(), "+switch-master");
    }

    #[test]
    fn instance_is_read_back_from_payloads() {
        let m = Addr::new("127.0.0.1", 16379);
        let r = Addr::new("10.0.0.2", 16380);
        let e = Event::new(Channel::Sdown, master("mymaster", &m));
        assert_eq!(e.instance(), Some(m.clone()));
        assert!(e.about_master());
        let e = Event::new(
            Channel::Sdown,
            format!("{} #quorum 1/1", replica(&r, "g", &m)),
        );
        assert_eq!(e.instance(), Some(r));
        assert!(!e.about_master());
        assert_eq!(Event::new(Channel::NewEpoch, "3".into()).instance(), None);
        assert_eq!(
            Event::new(Channel::Tilt, "#tilt mode entered".into()).instance(),
            None
        );
    }
}
