//! `ACL <subcommand>`, as a Valkey 8.0.1 sentinel answers it. The users
//! and the permission rules are in `sentinel/acl/`; `SETUSER` and
//! `DELUSER` are saved in the state file (through the runtime) before the
//! reply, and survive a restart.
//!
//! # Format
//!
//! ```text
//! ACL WHOAMI                    -> $user
//! ACL USERS                     -> *N $name (sorted)
//! ACL LIST                      -> *N $"user <name> <rules>" (digests, never passwords)
//! ACL GETUSER <name>            -> map flags passwords commands keys channels selectors | $-1
//! ACL CAT [<category>]          -> *N categories | commands of the category | -ERR Unknown category '<c>'
//! ACL SETUSER <name> <rule>…    -> +OK | -ERR Error in ACL SETUSER modifier '<rule>': <why>
//! ACL DELUSER <name>…           -> :deleted | -ERR The 'default' user cannot be removed
//! ACL LOG [<count>|RESET]       -> *N maps (count reason context object username age-seconds
//!                                  client-info entry-id timestamp-created timestamp-last-updated)
//! ACL DRYRUN <user> <cmd> [..]  -> +OK | $"User u has no permissions to run the 'c' command"
//! ACL GENPASS [<bits>]          -> $hex
//! ACL LOAD | ACL SAVE           -> -ERR This instance is not configured to use an ACL file. …
//! ACL HELP                      -> *29 +lines
//! ```
//!
//! A subcommand is parsed once, before anything runs ([`Subcommand`]),
//! its arity read from the command table; what changes or shows users is
//! in `users`.

use valkyrie_protocol::Frame;

use super::super::acl::categories::{self, CATEGORIES};
use super::super::commands::{self, COMMANDS};
use super::call::{Call, Lower, long, text, wrong_arity};

mod users;

use users::{deluser, dryrun, genpass, getuser, setuser};

const NO_FILE: &str = "ERR This instance is not configured to use an ACL file. You may want to \
                       specify users via the ACL SETUSER command and then issue a CONFIG REWRITE \
                       (assuming you have a configuration file set) in order to store users in \
                       the configuration.";

const HELP: [&str; 26] = [
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];

fn syntax(sub: &[u8]) -> Frame {
    Frame::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        text(sub)
    ))
}

fn not_integer() -> Frame {
    Frame::error("ERR value is not an integer or out of range")
}

/// A parsed `ACL` subcommand, its arguments named by role.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Subcommand<'a> {
    /// `WHOAMI`.
    WhoAmI,
    /// `USERS`.
    Users,
    /// `LIST`.
    List,
    /// `GETUSER <name>`.
    GetUser { name: &'a [u8] },
    /// `CAT`.
    Categories,
    /// `CAT <category>`.
    Category { name: &'a [u8] },
    /// `SETUSER <name> <rule> …`.
    SetUser {
        name: &'a [u8],
        rules: &'a [&'a [u8]],
    },
    /// `DELUSER <name> …`.
    DelUser { names: &'a [&'a [u8]] },
    /// `LOG [<count>]`.
    Log { count: Option<&'a [u8]> },
    /// `LOG RESET`.
    LogReset,
    /// `DRYRUN <user> <command> [<arg> …]`.
    DryRun {
        user: &'a [u8],
        command: &'a [&'a [u8]],
    },
    /// `GENPASS [<bits>]`.
    GenPass { bits: Option<&'a [u8]> },
    /// `LOAD`, `SAVE`: there is no ACL file.
    NoFile,
    /// `HELP`.
    Help,
}

impl<'a> Subcommand<'a> {
    /// Parses `ACL <sub> <rest…>`: the subcommand's arity is the command
    /// table's, then the arguments' shape.
    pub(crate) fn parse(args: &'a [&'a [u8]]) -> Result<Subcommand<'a>, Frame> {
        let Some(sub) = args.get(1) else {
            return Err(wrong_arity("acl"));
        };
        let lower = Lower::new(sub);
        let name = lower.as_str();
        let Some(id) = commands::lookup(&format!("acl|{name}")).filter(|_| !name.contains('|'))
        else {
            return Err(super::call::unknown_subcommand("ACL", sub));
        };
        if !COMMANDS[id].arity_ok(args.len()) {
            return Err(wrong_arity(COMMANDS[id].name));
        }
        Ok(match (name, &args[2..]) {
            ("whoami", _) => Subcommand::WhoAmI,
            ("users", _) => Subcommand::Users,
            ("list", _) => Subcommand::List,
            ("getuser", [name]) => Subcommand::GetUser { name },
            ("cat", []) => Subcommand::Categories,
            ("cat", [name]) => Subcommand::Category { name },
            ("setuser", [name, rules @ ..]) => Subcommand::SetUser { name, rules },
            ("deluser", names) => Subcommand::DelUser { names },
            ("log", []) => Subcommand::Log { count: None },
            ("log", [arg]) if arg.eq_ignore_ascii_case(b"reset") => Subcommand::LogReset,
            ("log", [count]) => Subcommand::Log { count: Some(count) },
            ("dryrun", [user, command @ ..]) => Subcommand::DryRun { user, command },
            ("genpass", []) => Subcommand::GenPass { bits: None },
            ("genpass", [bits]) => Subcommand::GenPass { bits: Some(bits) },
            ("load" | "save", []) => Subcommand::NoFile,
            ("help", []) => Subcommand::Help,
            _ => return Err(syntax(sub)),
        })
    }
}

/// Runs `ACL <subcommand> …`, parsed first ([`Subcommand`]).
pub async fn run(call: &mut Call<'_>) -> Frame {
    let command = match Subcommand::parse(call.args) {
        Ok(command) => command,
        Err(reply) => return reply,
    };
    let (handle, session) = (call.handle, &mut *call.session);
    let security = session.shared.security.clone();
    match command {
        Subcommand::WhoAmI => Frame::bulk(session.user.clone().unwrap_or_else(|| "default".into())),
        Subcommand::Users => Frame::Array(
            security
                .acl()
                .users()
                .map(|u| Frame::bulk(u.name.clone()))
                .collect(),
        ),
        Subcommand::List => Frame::Array(
            security
                .acl()
                .users()
                .map(|u| Frame::bulk(format!("user {} {}", u.name, u.describe())))
                .collect(),
        ),
        Subcommand::GetUser { name } => getuser(&security.acl(), &text(name)),
        Subcommand::Categories => {
            Frame::Array(CATEGORIES.iter().map(|c| Frame::bulk(*c)).collect())
        }
        Subcommand::Category { name } => match categories::category(&text(name)) {
            // A sentinel's rows only: `VALKYRIE` takes `+@admin` but is
            // not listed (`commands::listed`).
            Some(bit) => Frame::Array(
                commands::listed()
                    .filter(|c| c.categories & bit != 0)
                    .map(|c| Frame::bulk(c.name))
                    .collect(),
            ),
            None => Frame::error(format!("ERR Unknown category '{}'", text(name))),
        },
        Subcommand::SetUser { name, rules } => setuser(session, handle, name, rules).await,
        Subcommand::DelUser { names } => deluser(session, handle, names).await,
        Subcommand::Log { count: None } => security.log().show(10),
        Subcommand::LogReset => {
            security.log().reset();
            Frame::simple("OK")
        }
        Subcommand::Log { count: Some(count) } => match long(count) {
            Some(n) => security
                .log()
                .show(usize::try_from(n.max(0)).unwrap_or(usize::MAX)),
            None => not_integer(),
        },
        Subcommand::DryRun { user, command } => dryrun(&security.acl(), user, command),
        Subcommand::GenPass { bits: None } => genpass(256),
        Subcommand::GenPass { bits: Some(bits) } => match long(bits) {
            Some(b) => genpass(b),
            None => not_integer(),
        },
        Subcommand::NoFile => Frame::error(NO_FILE),
        Subcommand::Help => {
            let mut lines = vec![Frame::simple(
                "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            )];
            lines.extend(HELP.iter().map(|l| Frame::simple(*l)));
            lines.push(Frame::simple("HELP"));
            lines.push(Frame::simple("    Print this help."));
            Frame::Array(lines)
        }
    }
}
