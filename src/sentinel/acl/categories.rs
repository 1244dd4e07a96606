//! The command table the ACL works on: every command and subcommand a
//! Valkey 8.0.1 sentinel knows, with its arity, its ACL categories and
//! whether it may run before authentication (`AUTH`, `HELLO`).
//!
//! Recorded from a real `valkey-sentinel` 8.0.1 (`COMMAND LIST` for the
//! order, `COMMAND INFO` for arity, flags and categories); the order is the
//! one `ACL CAT <category>` and `COMMAND LIST` answer in. A command's id is
//! its index in [`COMMANDS`]; a user's permissions are a bitmap of ids.

/// ACL category bits, in Valkey's order (`ACL CAT`).
#[allow(missing_docs)]
pub mod cat {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const READ: u32 = 1 << 1;
    pub const WRITE: u32 = 1 << 2;
    pub const SET: u32 = 1 << 3;
    pub const SORTEDSET: u32 = 1 << 4;
    pub const LIST: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const STRING: u32 = 1 << 7;
    pub const BITMAP: u32 = 1 << 8;
    pub const HYPERLOGLOG: u32 = 1 << 9;
    pub const GEO: u32 = 1 << 10;
    pub const STREAM: u32 = 1 << 11;
    pub const PUBSUB: u32 = 1 << 12;
    pub const ADMIN: u32 = 1 << 13;
    pub const FAST: u32 = 1 << 14;
    pub const SLOW: u32 = 1 << 15;
    pub const BLOCKING: u32 = 1 << 16;
    pub const DANGEROUS: u32 = 1 << 17;
    pub const CONNECTION: u32 = 1 << 18;
    pub const TRANSACTION: u32 = 1 << 19;
    pub const SCRIPTING: u32 = 1 << 20;
}

/// The category names, in the order of their bits.
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of a category name (case-insensitive), as Valkey's
/// `ACLGetCommandCategoryFlagByName`.
pub fn category(name: &str) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
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
pub const COMMANDS: &[Command] = &[
    Command {
        name: "info",
        arity: -1,
        categories: cat::SLOW | cat::DANGEROUS,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "hello",
        arity: -1,
        categories: cat::FAST | cat::CONNECTION,
        parent: None,
        no_auth: true,
    },
    Command {
        name: "publish",
        arity: 3,
        categories: cat::PUBSUB | cat::FAST,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "sentinel",
        arity: -2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "sentinel|sentinels",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|get-primary-addr-by-name",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|ckquorum",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|info-cache",
        arity: -3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|get-master-addr-by-name",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|failover",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|flushconfig",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|primaries",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|myid",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|slaves",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|primary",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|help",
        arity: 2,
        categories: cat::SLOW,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|debug",
        arity: -2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|master",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|config",
        arity: -4,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|simulate-failure",
        arity: -3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|is-master-down-by-addr",
        arity: 6,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|is-primary-down-by-addr",
        arity: 6,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|remove",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|reset",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|masters",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|monitor",
        arity: 6,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|pending-scripts",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|set",
        arity: -5,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "sentinel|replicas",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(3),
        no_auth: false,
    },
    Command {
        name: "punsubscribe",
        arity: -1,
        categories: cat::PUBSUB | cat::SLOW,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "unsubscribe",
        arity: -1,
        categories: cat::PUBSUB | cat::SLOW,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "psubscribe",
        arity: -2,
        categories: cat::PUBSUB | cat::SLOW,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "command",
        arity: -1,
        categories: cat::SLOW | cat::CONNECTION,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "command|info",
        arity: -2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(32),
        no_auth: false,
    },
    Command {
        name: "command|docs",
        arity: -2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(32),
        no_auth: false,
    },
    Command {
        name: "command|help",
        arity: 2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(32),
        no_auth: false,
    },
    Command {
        name: "command|getkeys",
        arity: -3,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(32),
        no_auth: false,
    },
    Command {
        name: "command|count",
        arity: 2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(32),
        no_auth: false,
    },
    Command {
        name: "command|list",
        arity: -2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(32),
        no_auth: false,
    },
    Command {
        name: "command|getkeysandflags",
        arity: -3,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(32),
        no_auth: false,
    },
    Command {
        name: "client",
        arity: -2,
        categories: cat::SLOW,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "client|getname",
        arity: 2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|reply",
        arity: 3,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|unblock",
        arity: -3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|setinfo",
        arity: 4,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|caching",
        arity: 3,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|list",
        arity: -2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|id",
        arity: 2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|info",
        arity: 2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|trackinginfo",
        arity: 2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|pause",
        arity: -3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|help",
        arity: 2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|tracking",
        arity: -3,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|unpause",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|getredir",
        arity: 2,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|setname",
        arity: 3,
        categories: cat::SLOW | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|kill",
        arity: -3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "client|no-evict",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS | cat::CONNECTION,
        parent: Some(40),
        no_auth: false,
    },
    Command {
        name: "role",
        arity: 1,
        categories: cat::ADMIN | cat::FAST | cat::DANGEROUS,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "ping",
        arity: -1,
        categories: cat::FAST | cat::CONNECTION,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "acl",
        arity: -2,
        categories: cat::SLOW,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "acl|getuser",
        arity: 3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|save",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|help",
        arity: 2,
        categories: cat::SLOW,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|whoami",
        arity: 2,
        categories: cat::SLOW,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|users",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|deluser",
        arity: -3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|cat",
        arity: -2,
        categories: cat::SLOW,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|setuser",
        arity: -3,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|load",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|genpass",
        arity: -2,
        categories: cat::SLOW,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|log",
        arity: -2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|dryrun",
        arity: -4,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "acl|list",
        arity: 2,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: Some(60),
        no_auth: false,
    },
    Command {
        name: "subscribe",
        arity: -2,
        categories: cat::PUBSUB | cat::SLOW,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "shutdown",
        arity: -1,
        categories: cat::ADMIN | cat::SLOW | cat::DANGEROUS,
        parent: None,
        no_auth: false,
    },
    Command {
        name: "auth",
        arity: -2,
        categories: cat::FAST | cat::CONNECTION,
        parent: None,
        no_auth: true,
    },
];

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
}
