//! Protected mode: what a client may do on a Sentinel port that asks for
//! no password.
//!
//! An open Sentinel port is not a read-only directory: `SENTINEL SET`
//! changes what Valkyrie sends to the data nodes, `SENTINEL FAILOVER` and
//! `MONITOR` move masters, a hello can move peers' epochs, a vote request
//! can take this daemon's vote. So with `protected-mode yes` (the default)
//! and a password-less default user, a client from outside the loopback
//! may run only what reads; every command that changes state gets
//! `-DENIED`. Sentinel clients only read, so they keep working. Set a
//! password (`requirepass`, or ACL users) to open the rest to clients
//! that log in, or `protected-mode no` to open it to everyone.

/// The reply to a refused command.
pub const DENIED: &str = "DENIED Valkyrie is in protected mode: the Sentinel port has no password, \
     so clients outside the loopback may only read. Set requirepass (and sentinel-pass on every \
     peer), or protected-mode no to accept changes from anyone who can reach this port \
     (docs/security.md, \"Protected mode\")";

/// Whether a command (`name`, its lowercased subcommand `sub`, and all
/// its arguments) changes state: Valkyrie's configuration, a group, the
/// ACL, a peer table, an epoch or a vote, or the process itself.
pub fn changes_state(name: &str, sub: Option<&str>, args: &[&[u8]]) -> bool {
    match (name, sub) {
        ("publish" | "shutdown", _) => true,
        ("acl", Some(s)) => matches!(s, "setuser" | "deluser" | "load" | "save"),
        ("client", Some(s)) => s == "kill",
        ("sentinel", Some(s)) => match s {
            "set" | "monitor" | "remove" | "failover" | "reset" | "flushconfig"
            | "simulate-failure" | "debug" => true,
            "config" => args.get(2).is_some_and(|a| a.eq_ignore_ascii_case(b"set")),
            // A vote request (a run id, not `*`) can take our vote and move
            // our epoch; the bare question only reads.
            "is-master-down-by-addr" | "is-primary-down-by-addr" => {
                args.get(5).is_some_and(|r| *r != b"*")
            }
            _ => false,
        },
        _ => false,
    }
}
