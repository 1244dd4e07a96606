//! Sentinel event payloads, formatted exactly as Valkey's `sentinelEvent`
//! does (reference §3), so subscribers parse them unchanged.
//!
//! An instance is written `<type> <name> <ip> <port>`, followed by
//! ` @ <master-name> <master-ip> <master-port>` when it is not a master; a
//! replica's name is `ip:port`.

use super::Addr;

/// One event to publish on the channel of the same name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// The channel, e.g. `+switch-master`.
    pub channel: &'static str,
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

/// `+switch-master` payload: `<name> <oldip> <oldport> <newip> <newport>`.
pub fn switch_master(name: &str, old: &Addr, new: &Addr) -> String {
    format!("{name} {} {} {} {}", old.host, old.port, new.host, new.port)
}

impl Event {
    /// An event.
    pub fn new(channel: &'static str, payload: String) -> Event {
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
    fn instance_is_read_back_from_payloads() {
        let m = Addr::new("127.0.0.1", 16379);
        let r = Addr::new("10.0.0.2", 16380);
        let e = Event::new("+sdown", master("mymaster", &m));
        assert_eq!(e.instance(), Some(m.clone()));
        assert!(e.about_master());
        let e = Event::new("+sdown", format!("{} #quorum 1/1", replica(&r, "g", &m)));
        assert_eq!(e.instance(), Some(r));
        assert!(!e.about_master());
        assert_eq!(Event::new("+new-epoch", "3".into()).instance(), None);
        assert_eq!(
            Event::new("+tilt", "#tilt mode entered".into()).instance(),
            None
        );
    }
}
