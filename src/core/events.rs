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
        Event { channel, payload }
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
}
