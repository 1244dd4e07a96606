//! The Sentinel port's command table: every command and subcommand a
//! Valkey 8.0.1 sentinel knows, one row each, with its arity, its ACL
//! categories, whether it may run before authentication (`AUTH`, `HELLO`)
//! and, for a command, the handler that runs it; and Valkyrie's one
//! extension, `VALKYRIE` (`docs/readiness.md`).
//!
//! Everything about a command is read from this one table
//! ([`command_table!`]): the rows ([`COMMANDS`]), which dispatch, `COMMAND
//! COUNT|LIST`, the request's metric label ([`label`]) and the ACL (`acl/`)
//! read; and the dispatch itself (`cmd::dispatch`), which the table
//! expands into a match from each command's name to its handler. Adding a
//! command is a row here and its handler file (with the file's `mod`
//! line); a subcommand is a row here and an arm in its container's
//! handler.
//!
//! The table is a macro so that it can name handlers without this file
//! importing them: the handlers read the rows (the ACL through the
//! session, `COMMAND` and `ACL` directly), and an import back would make a
//! loop. The handler paths are resolved where the dispatch expands it,
//! in `cmd/`, among the handler modules.
//!
//! Recorded from a real `valkey-sentinel` 8.0.1 (`COMMAND INFO` for arity,
//! flags and categories). A command's id is its index in [`COMMANDS`]; a
//! user's permissions are a bitmap of ids. Valkey answers `COMMAND LIST`
//! and `ACL CAT <category>` in its hash table's order, seeded per process;
//! this table's order stands in for it.
//!
//! An *extension* row (`extension(...)`, and its subcommands) is a command
//! a sentinel does not have. It runs, has a metric label and takes ACL
//! rules like any other, but the listings leave it out ([`commands`],
//! [`listed`]): `COMMAND COUNT|LIST` and `ACL CAT <category>` stay those
//! of a real sentinel, which clients and the differential tests compare.

use super::acl::categories::cat::{ADMIN, CONNECTION, DANGEROUS, FAST, PUBSUB, SLOW};

/// The table: `command|open|extension(name, arity, categories) =>
/// handler`, `open` for a command that runs before authentication,
/// `extension` for one a sentinel does not have, then the command's
/// subcommands in braces as `name, arity, categories`. It hands the rows
/// to `$emit`, a macro in scope where it is called: [`rows`] here, the
/// dispatch in `cmd/`.
macro_rules! command_table {
    ($emit:ident) => {
        $emit! {
        command("info", -1, SLOW | DANGEROUS) => info::run;
        open("hello", -1, FAST | CONNECTION) => hello::run;
        command("publish", 3, PUBSUB | FAST) => peers::publish;
        command("sentinel", -2, ADMIN | SLOW | DANGEROUS) => sentinel::run {
            "sentinels", 3, ADMIN | SLOW | DANGEROUS;
            "get-primary-addr-by-name", 3, ADMIN | SLOW | DANGEROUS;
            "ckquorum", 3, ADMIN | SLOW | DANGEROUS;
            "info-cache", -3, ADMIN | SLOW | DANGEROUS;
            "get-master-addr-by-name", 3, ADMIN | SLOW | DANGEROUS;
            "failover", 3, ADMIN | SLOW | DANGEROUS;
            "flushconfig", 2, ADMIN | SLOW | DANGEROUS;
            "primaries", 2, ADMIN | SLOW | DANGEROUS;
            "myid", 2, ADMIN | SLOW | DANGEROUS;
            "slaves", 3, ADMIN | SLOW | DANGEROUS;
            "primary", 3, ADMIN | SLOW | DANGEROUS;
            "help", 2, SLOW;
            "debug", -2, ADMIN | SLOW | DANGEROUS;
            "master", 3, ADMIN | SLOW | DANGEROUS;
            "config", -4, ADMIN | SLOW | DANGEROUS;
            "simulate-failure", -3, ADMIN | SLOW | DANGEROUS;
            "is-master-down-by-addr", 6, ADMIN | SLOW | DANGEROUS;
            "is-primary-down-by-addr", 6, ADMIN | SLOW | DANGEROUS;
            "remove", 3, ADMIN | SLOW | DANGEROUS;
            "reset", 3, ADMIN | SLOW | DANGEROUS;
            "masters", 2, ADMIN | SLOW | DANGEROUS;
            "monitor", 6, ADMIN | SLOW | DANGEROUS;
            "pending-scripts", 2, ADMIN | SLOW | DANGEROUS;
            "set", -5, ADMIN | SLOW | DANGEROUS;
            "replicas", 3, ADMIN | SLOW | DANGEROUS;
        };
        command("punsubscribe", -1, PUBSUB | SLOW) => pubsub::run;
        command("unsubscribe", -1, PUBSUB | SLOW) => pubsub::run;
        command("psubscribe", -2, PUBSUB | SLOW) => pubsub::run;
        command("command", -1, SLOW | CONNECTION) => command::run {
            "info", -2, SLOW | CONNECTION;
            "docs", -2, SLOW | CONNECTION;
            "help", 2, SLOW | CONNECTION;
            "getkeys", -3, SLOW | CONNECTION;
            "count", 2, SLOW | CONNECTION;
            "list", -2, SLOW | CONNECTION;
            "getkeysandflags", -3, SLOW | CONNECTION;
        };
        command("client", -2, SLOW) => client::run {
            "getname", 2, SLOW | CONNECTION;
            "reply", 3, SLOW | CONNECTION;
            "unblock", -3, ADMIN | SLOW | DANGEROUS | CONNECTION;
            "setinfo", 4, SLOW | CONNECTION;
            "caching", 3, SLOW | CONNECTION;
            "list", -2, ADMIN | SLOW | DANGEROUS | CONNECTION;
            "id", 2, SLOW | CONNECTION;
            "info", 2, SLOW | CONNECTION;
            "trackinginfo", 2, SLOW | CONNECTION;
            "pause", -3, ADMIN | SLOW | DANGEROUS | CONNECTION;
            "help", 2, SLOW | CONNECTION;
            "tracking", -3, SLOW | CONNECTION;
            "unpause", 2, ADMIN | SLOW | DANGEROUS | CONNECTION;
            "getredir", 2, SLOW | CONNECTION;
            "setname", 3, SLOW | CONNECTION;
            "kill", -3, ADMIN | SLOW | DANGEROUS | CONNECTION;
            "no-evict", 3, ADMIN | SLOW | DANGEROUS | CONNECTION;
        };
        command("role", 1, ADMIN | FAST | DANGEROUS) => role::run;
        command("ping", -1, FAST | CONNECTION) => ping::run;
        command("acl", -2, SLOW) => acl::run {
            "getuser", 3, ADMIN | SLOW | DANGEROUS;
            "save", 2, ADMIN | SLOW | DANGEROUS;
            "help", 2, SLOW;
            "whoami", 2, SLOW;
            "users", 2, ADMIN | SLOW | DANGEROUS;
            "deluser", -3, ADMIN | SLOW | DANGEROUS;
            "cat", -2, SLOW;
            "setuser", -3, ADMIN | SLOW | DANGEROUS;
            "load", 2, ADMIN | SLOW | DANGEROUS;
            "genpass", -2, SLOW;
            "log", -2, ADMIN | SLOW | DANGEROUS;
            "dryrun", -4, ADMIN | SLOW | DANGEROUS;
            "list", 2, ADMIN | SLOW | DANGEROUS;
        };
        command("subscribe", -2, PUBSUB | SLOW) => pubsub::run;
        command("shutdown", -1, ADMIN | SLOW | DANGEROUS) => shutdown::run;
        open("auth", -2, FAST | CONNECTION) => auth::run;
        extension("valkyrie", -2, SLOW) => valkyrie::run {
            "readiness", -2, ADMIN | SLOW | DANGEROUS;
            "pause", -3, ADMIN | SLOW | DANGEROUS;
            "resume", -3, ADMIN | SLOW | DANGEROUS;
            "help", 2, SLOW;
        };
        }
    };
}
pub(crate) use command_table;

/// The rows of [`command_table!`], as [`Command`]s in table order.
macro_rules! rows {
    ($(
        $kind:ident ($name:literal, $arity:expr, $categories:expr) => $handler:path
        $({ $($sub:literal, $sub_arity:expr, $sub_categories:expr;)* })?;
    )*) => {
        &[$(
            $kind($name, $arity, $categories),
            $($(
                sub(
                    concat!($name, "|", $sub),
                    $sub_arity,
                    $sub_categories,
                    $kind($name, $arity, $categories),
                ),
            )*)?
        )*]
    };
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
    /// The container command's name, for a subcommand.
    pub parent: Option<&'static str>,
    /// May run before authentication and is never denied (`AUTH`, `HELLO`).
    pub no_auth: bool,
    /// Valkyrie's own (or a subcommand of it): left out of the listings.
    pub extension: bool,
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
    pub fn is_container(&self) -> bool {
        COMMANDS.iter().any(|c| c.parent == Some(self.name))
    }
}

/// A command.
const fn command(name: &'static str, arity: i32, categories: u32) -> Command {
    Command {
        name,
        arity,
        categories,
        parent: None,
        no_auth: false,
        extension: false,
    }
}

/// A command that runs before authentication.
const fn open(name: &'static str, arity: i32, categories: u32) -> Command {
    Command {
        no_auth: true,
        ..command(name, arity, categories)
    }
}

/// A command a sentinel does not have: Valkyrie's own.
const fn extension(name: &'static str, arity: i32, categories: u32) -> Command {
    Command {
        extension: true,
        ..command(name, arity, categories)
    }
}

/// A subcommand of the command `parent` (an extension's are extensions
/// too).
const fn sub(name: &'static str, arity: i32, categories: u32, parent: Command) -> Command {
    Command {
        name,
        arity,
        categories,
        parent: Some(parent.name),
        no_auth: false,
        extension: parent.extension,
    }
}

/// Every command and subcommand of a Valkey 8.0.1 sentinel, then
/// Valkyrie's extension.
pub const COMMANDS: &[Command] = command_table!(rows);

/// Commands the connection itself answers, outside the table (as Valkey's
/// sentinel does): they have a metric label too.
const CONNECTION_COMMANDS: [&str; 2] = ["quit", "reset"];

/// The rows a sentinel has (extensions left out), in table order: what
/// `ACL CAT <category>` lists.
pub fn listed() -> impl Iterator<Item = &'static Command> {
    COMMANDS.iter().filter(|c| !c.extension)
}

/// The commands a sentinel has (not subcommands, not extensions), in
/// table order: `COMMAND COUNT|LIST`.
pub fn commands() -> impl Iterator<Item = &'static Command> {
    listed().filter(|c| c.parent.is_none())
}

/// The bounded metric label of a command name (`args[0]`, any case): the
/// command's name, extensions included, or `unknown`, so a client sending
/// random names cannot grow the series.
pub fn label(name: &[u8]) -> &'static str {
    COMMANDS
        .iter()
        .filter(|c| c.parent.is_none())
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
    let name = COMMANDS[id].name;
    COMMANDS
        .iter()
        .enumerate()
        .filter(move |(_, c)| c.parent == Some(name))
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
        Some(sub) if cmd.is_container() => {
            let sub = std::str::from_utf8(sub).ok()?;
            if sub.contains('|') {
                return None;
            }
            // `<container>|<sub>`, compared in place (no allocation).
            let prefix = cmd.name.len() + 1;
            COMMANDS.iter().position(|c| {
                c.parent == Some(cmd.name)
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
mod tests;
