//! The Sentinel port's command table: every command and subcommand a
//! Valkey 8.0.1 sentinel knows, one row each, with its arity, its ACL
//! categories, whether it may run before authentication (`AUTH`, `HELLO`)
//! and, for a command, the handler that runs it ([`Run`]).
//!
//! Everything about a command is read from here: dispatch
//! (`cmd::dispatch`), `COMMAND COUNT|LIST`, the request's metric label
//! ([`label`]) and the ACL (`acl/`). Adding a command is a row here, its
//! handler, and the handler's arm in `cmd::dispatch`.
//!
//! Recorded from a real `valkey-sentinel` 8.0.1 (`COMMAND INFO` for arity,
//! flags and categories). A command's id is its index in [`COMMANDS`]; a
//! user's permissions are a bitmap of ids. Valkey answers `COMMAND LIST`
//! and `ACL CAT <category>` in its hash table's order, seeded per process;
//! this table's order stands in for it.

use super::acl::categories::cat::{ADMIN, CONNECTION, DANGEROUS, FAST, PUBSUB, SLOW};

/// Which handler runs a command (its subcommands included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    /// `INFO`.
    Info,
    /// `HELLO`.
    Hello,
    /// `PUBLISH` (peers' hellos only).
    Publish,
    /// `SENTINEL …`.
    Sentinel,
    /// `(P)SUBSCRIBE`, `(P)UNSUBSCRIBE`.
    Pubsub,
    /// `COMMAND …`.
    Command,
    /// `CLIENT …`.
    Client,
    /// `ROLE`.
    Role,
    /// `PING`.
    Ping,
    /// `ACL …`.
    Acl,
    /// `SHUTDOWN`.
    Shutdown,
    /// `AUTH`.
    Auth,
}

/// One command or subcommand.
#[derive(Debug)]
pub struct Command {
    /// Full name: `ping`, `sentinel|set`.
    pub name: &'static str,
    /// Valkey's arity: exact when positive, a minimum when negative
    /// (counting the command name, and the subcommand name).
    pub arity: i32,
    /// Its categories.
    pub categories: u32,
    /// The container command's id, for a subcommand.
    pub parent: Option<usize>,
    /// May run before authentication and is never denied (`AUTH`, `HELLO`).
    pub no_auth: bool,
    /// The handler, for a command (a subcommand is run by its container's).
    pub run: Option<Run>,
}

impl Command {
    /// Whether `argc` arguments fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = i64::try_from(argc).unwrap_or(i64::MAX);
        let arity = i64::from(self.arity);
        if arity > 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// Whether it has subcommands.
    pub fn is_container(&self, id: usize) -> bool {
        COMMANDS.iter().any(|c| c.parent == Some(id))
    }
}

/// Every command and subcommand of a Valkey 8.0.1 sentinel.
/// A command.
const fn command(name: &'static str, arity: i32, categories: u32, run: Run) -> Command {
    Command {
        name,
        arity,
        categories,
        parent: None,
        no_auth: false,
        run: Some(run),
    }
}

/// A command that runs before authentication.
const fn open(name: &'static str, arity: i32, categories: u32, run: Run) -> Command {
    Command {
        no_auth: true,
        ..command(name, arity, categories, run)
    }
}

/// A subcommand of the command at `parent`.
const fn sub(name: &'static str, arity: i32, categories: u32, parent: usize) -> Command {
    Command {
        name,
        arity,
        categories,
        parent: Some(parent),
        no_auth: false,
        run: None,
    }
}

/// Every command and subcommand of a Valkey 8.0.1 sentinel.
pub const COMMANDS: &[Command] = &[
    command("info", -1, SLOW | DANGEROUS, Run::Info),
    open("hello", -1, FAST | CONNECTION, Run::Hello),
    command("publish", 3, PUBSUB | FAST, Run::Publish),
    command("sentinel", -2, ADMIN | SLOW | DANGEROUS, Run::Sentinel),
    sub("sentinel|sentinels", 3, ADMIN | SLOW | DANGEROUS, 3),
    sub(
        "sentinel|get-primary-addr-by-name",
        3,
        ADMIN | SLOW | DANGEROUS,
        3,
    ),
    sub("sentinel|ckquorum", 3, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|info-cache", -3, ADMIN | SLOW | DANGEROUS, 3),
    sub(
        "sentinel|get-master-addr-by-name",
        3,
        ADMIN | SLOW | DANGEROUS,
        3,
    ),
    sub("sentinel|failover", 3, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|flushconfig", 2, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|primaries", 2, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|myid", 2, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|slaves", 3, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|primary", 3, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|help", 2, SLOW, 3),
    sub("sentinel|debug", -2, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|master", 3, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|config", -4, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|simulate-failure", -3, ADMIN | SLOW | DANGEROUS, 3),
    sub(
        "sentinel|is-master-down-by-addr",
        6,
        ADMIN | SLOW | DANGEROUS,
        3,
    ),
    sub(
        "sentinel|is-primary-down-by-addr",
        6,
        ADMIN | SLOW | DANGEROUS,
        3,
    ),
    sub("sentinel|remove", 3, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|reset", 3, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|masters", 2, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|monitor", 6, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|pending-scripts", 2, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|set", -5, ADMIN | SLOW | DANGEROUS, 3),
    sub("sentinel|replicas", 3, ADMIN | SLOW | DANGEROUS, 3),
    command("punsubscribe", -1, PUBSUB | SLOW, Run::Pubsub),
    command("unsubscribe", -1, PUBSUB | SLOW, Run::Pubsub),
    command("psubscribe", -2, PUBSUB | SLOW, Run::Pubsub),
    command("command", -1, SLOW | CONNECTION, Run::Command),
    sub("command|info", -2, SLOW | CONNECTION, 32),
    sub("command|docs", -2, SLOW | CONNECTION, 32),
    sub("command|help", 2, SLOW | CONNECTION, 32),
    sub("command|getkeys", -3, SLOW | CONNECTION, 32),
    sub("command|count", 2, SLOW | CONNECTION, 32),
    sub("command|list", -2, SLOW | CONNECTION, 32),
    sub("command|getkeysandflags", -3, SLOW | CONNECTION, 32),
    command("client", -2, SLOW, Run::Client),
    sub("client|getname", 2, SLOW | CONNECTION, 40),
    sub("client|reply", 3, SLOW | CONNECTION, 40),
    sub(
        "client|unblock",
        -3,
        ADMIN | SLOW | DANGEROUS | CONNECTION,
        40,
    ),
    sub("client|setinfo", 4, SLOW | CONNECTION, 40),
    sub("client|caching", 3, SLOW | CONNECTION, 40),
    sub("client|list", -2, ADMIN | SLOW | DANGEROUS | CONNECTION, 40),
    sub("client|id", 2, SLOW | CONNECTION, 40),
    sub("client|info", 2, SLOW | CONNECTION, 40),
    sub("client|trackinginfo", 2, SLOW | CONNECTION, 40),
    sub(
        "client|pause",
        -3,
        ADMIN | SLOW | DANGEROUS | CONNECTION,
        40,
    ),
    sub("client|help", 2, SLOW | CONNECTION, 40),
    sub("client|tracking", -3, SLOW | CONNECTION, 40),
    sub(
        "client|unpause",
        2,
        ADMIN | SLOW | DANGEROUS | CONNECTION,
        40,
    ),
    sub("client|getredir", 2, SLOW | CONNECTION, 40),
    sub("client|setname", 3, SLOW | CONNECTION, 40),
    sub("client|kill", -3, ADMIN | SLOW | DANGEROUS | CONNECTION, 40),
    sub(
        "client|no-evict",
        3,
        ADMIN | SLOW | DANGEROUS | CONNECTION,
        40,
    ),
    command("role", 1, ADMIN | FAST | DANGEROUS, Run::Role),
    command("ping", -1, FAST | CONNECTION, Run::Ping),
    command("acl", -2, SLOW, Run::Acl),
    sub("acl|getuser", 3, ADMIN | SLOW | DANGEROUS, 60),
    sub("acl|save", 2, ADMIN | SLOW | DANGEROUS, 60),
    sub("acl|help", 2, SLOW, 60),
    sub("acl|whoami", 2, SLOW, 60),
    sub("acl|users", 2, ADMIN | SLOW | DANGEROUS, 60),
    sub("acl|deluser", -3, ADMIN | SLOW | DANGEROUS, 60),
    sub("acl|cat", -2, SLOW, 60),
    sub("acl|setuser", -3, ADMIN | SLOW | DANGEROUS, 60),
    sub("acl|load", 2, ADMIN | SLOW | DANGEROUS, 60),
    sub("acl|genpass", -2, SLOW, 60),
    sub("acl|log", -2, ADMIN | SLOW | DANGEROUS, 60),
    sub("acl|dryrun", -4, ADMIN | SLOW | DANGEROUS, 60),
    sub("acl|list", 2, ADMIN | SLOW | DANGEROUS, 60),
    command("subscribe", -2, PUBSUB | SLOW, Run::Pubsub),
    command("shutdown", -1, ADMIN | SLOW | DANGEROUS, Run::Shutdown),
    open("auth", -2, FAST | CONNECTION, Run::Auth),
];

/// Commands the connection itself answers, outside the table (as Valkey's
/// sentinel does): they have a metric label too.
const CONNECTION_COMMANDS: [&str; 2] = ["quit", "reset"];

/// The commands (not subcommands), in table order: `COMMAND LIST`.
pub fn commands() -> impl Iterator<Item = &'static Command> {
    COMMANDS.iter().filter(|c| c.parent.is_none())
}

/// The handler of the command `name` (lowercase), if it is one.
pub fn run_of(name: &str) -> Option<Run> {
    commands().find(|c| c.name == name).and_then(|c| c.run)
}

/// The bounded metric label of a command name (`args[0]`, any case): the
/// command's name, or `unknown`, so a client sending random names cannot
/// grow the series.
pub fn label(name: &[u8]) -> &'static str {
    commands()
        .map(|c| c.name)
        .chain(CONNECTION_COMMANDS)
        .find(|known| known.as_bytes().eq_ignore_ascii_case(name))
        .unwrap_or("unknown")
}

/// The id of a command or subcommand by full name (case-insensitive).
pub fn lookup(name: &str) -> Option<usize> {
    COMMANDS
        .iter()
        .position(|c| c.name.eq_ignore_ascii_case(name))
}

/// The ids of a container's subcommands.
pub fn subcommands(id: usize) -> impl Iterator<Item = usize> {
    COMMANDS
        .iter()
        .enumerate()
        .filter(move |(_, c)| c.parent == Some(id))
        .map(|(i, _)| i)
}

/// What a request runs, as Valkey's `lookupCommand` resolves it: the
/// subcommand for a container given one, else the command. `None` when the
/// command or subcommand is unknown or the arity does not fit: the command
/// handler then answers with its own error, before any permission check,
/// as Valkey does.
pub fn resolve(args: &[&[u8]]) -> Option<usize> {
    let first = args.first()?;
    let name = std::str::from_utf8(first).ok()?;
    let id = lookup(name)?;
    if name.contains('|') {
        return None;
    }
    let cmd = &COMMANDS[id];
    let id = match args.get(1) {
        Some(sub) if cmd.is_container(id) => {
            let sub = std::str::from_utf8(sub).ok()?;
            if sub.contains('|') {
                return None;
            }
            // `<container>|<sub>`, compared in place (no allocation).
            let prefix = cmd.name.len() + 1;
            COMMANDS.iter().position(|c| {
                c.parent == Some(id)
                    && c.name
                        .get(prefix..)
                        .is_some_and(|s| s.eq_ignore_ascii_case(sub))
            })?
        }
        _ => id,
    };
    COMMANDS[id].arity_ok(args.len()).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_valkey() {
        assert_eq!(resolve(&[b"PING"]), lookup("ping"));
        assert_eq!(
            resolve(&[b"sentinel", b"SET", b"m", b"quorum", b"2"]),
            lookup("sentinel|set")
        );
        // Arity errors and unknown subcommands are the handler's.
        assert_eq!(resolve(&[b"sentinel"]), None);
        assert_eq!(resolve(&[b"sentinel", b"set", b"m"]), None);
        assert_eq!(resolve(&[b"sentinel", b"nosuch"]), None);
        assert_eq!(resolve(&[b"sentinel|set"]), None);
        // A container with arity -1 runs by itself.
        assert_eq!(resolve(&[b"command"]), lookup("command"));
        assert_eq!(COMMANDS.len(), 77);
    }

    #[test]
    fn labels_are_bounded() {
        assert_eq!(label(b"PING"), "ping");
        assert_eq!(label(b"Sentinel"), "sentinel");
        assert_eq!(label(b"QUIT"), "quit");
        assert_eq!(label(b"flushall"), "unknown");
        assert_eq!(label(b"\xff\x00garbage"), "unknown");
        assert_eq!(label(b""), "unknown");
        // A subcommand's full name is not a command.
        assert_eq!(label(b"sentinel|set"), "unknown");
    }

    #[test]
    fn every_command_has_a_handler_and_no_subcommand_has_one() {
        for c in COMMANDS {
            assert_eq!(c.run.is_some(), c.parent.is_none(), "{}", c.name);
        }
        assert_eq!(commands().count(), 15);
    }
}
