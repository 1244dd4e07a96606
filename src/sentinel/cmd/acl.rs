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

use super::call::Call;
use std::sync::Arc;

use valkyrie_protocol::Frame;

use super::super::acl::categories::{self, CATEGORIES};
use super::super::commands::{self, COMMANDS};
use super::super::connection::session::Session;
use super::call::{Lower, long, text, wrong_arity};
use crate::runtime::Handle;

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

/// Runs `ACL <subcommand> …`.
pub async fn run(call: &mut Call<'_>) -> Frame {
    let (args, handle, session) = (call.args, call.handle, &mut *call.session);
    let Some(sub) = args.get(1) else {
        return wrong_arity("acl");
    };
    let lower = Lower::new(sub);
    let name = lower.as_str();
    let Some(id) = commands::lookup(&format!("acl|{name}")).filter(|_| !name.contains('|')) else {
        return Frame::error(format!(
            "ERR unknown subcommand '{}'. Try ACL HELP.",
            text(sub)
        ));
    };
    if !COMMANDS[id].arity_ok(args.len()) {
        return wrong_arity(COMMANDS[id].name);
    }
    let security = session.shared.security.clone();
    let rest = &args[2..];
    match (name, rest) {
        ("whoami", _) => Frame::bulk(session.user.clone().unwrap_or_else(|| "default".into())),
        ("users", _) => Frame::Array(
            security
                .acl()
                .users()
                .map(|u| Frame::bulk(u.name.clone()))
                .collect(),
        ),
        ("list", _) => Frame::Array(
            security
                .acl()
                .users()
                .map(|u| Frame::bulk(format!("user {} {}", u.name, u.describe())))
                .collect(),
        ),
        ("getuser", [user]) => getuser(&security.acl(), &text(user)),
        ("cat", []) => Frame::Array(CATEGORIES.iter().map(|c| Frame::bulk(*c)).collect()),
        ("cat", [cat]) => match categories::category(&text(cat)) {
            Some(bit) => Frame::Array(
                COMMANDS
                    .iter()
                    .filter(|c| c.categories & bit != 0)
                    .map(|c| Frame::bulk(c.name))
                    .collect(),
            ),
            None => Frame::error(format!("ERR Unknown category '{}'", text(cat))),
        },
        ("setuser", [user, ops @ ..]) => setuser(session, handle, user, ops).await,
        ("deluser", users) => deluser(session, handle, users).await,
        ("log", []) => security.log().show(10),
        ("log", [arg]) if arg.eq_ignore_ascii_case(b"reset") => {
            security.log().reset();
            Frame::simple("OK")
        }
        ("log", [arg]) => match long(arg) {
            Some(n) => security
                .log()
                .show(usize::try_from(n.max(0)).unwrap_or(usize::MAX)),
            None => not_integer(),
        },
        ("dryrun", [user, cmd @ ..]) => dryrun(&security.acl(), user, cmd),
        ("genpass", []) => genpass(256),
        ("genpass", [bits]) => match long(bits) {
            Some(b) => genpass(b),
            None => not_integer(),
        },
        ("load" | "save", []) => Frame::error(NO_FILE),
        ("help", []) => {
            let mut lines = vec![Frame::simple(
                "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            )];
            lines.extend(HELP.iter().map(|l| Frame::simple(*l)));
            lines.push(Frame::simple("HELP"));
            lines.push(Frame::simple("    Print this help."));
            Frame::Array(lines)
        }
        _ => syntax(sub),
    }
}

fn getuser(acl: &super::super::acl::Acl, name: &str) -> Frame {
    let Some(u) = acl.user(name) else {
        return Frame::NullBulk;
    };
    let selector = |s: &super::super::acl::rules::Selector| {
        vec![
            (Frame::bulk("commands"), Frame::bulk(s.command_rules())),
            (Frame::bulk("keys"), Frame::bulk(s.keys_text())),
            (Frame::bulk("channels"), Frame::bulk(s.channels_text())),
        ]
    };
    let mut map = vec![
        (
            Frame::bulk("flags"),
            Frame::Set(u.flags().into_iter().map(Frame::bulk).collect()),
        ),
        (
            Frame::bulk("passwords"),
            Frame::Array(u.password_hashes().into_iter().map(Frame::bulk).collect()),
        ),
    ];
    map.extend(selector(u.root()));
    map.push((
        Frame::bulk("selectors"),
        Frame::Array(
            u.extra_selectors()
                .iter()
                .map(|s| Frame::Map(selector(s)))
                .collect(),
        ),
    ));
    Frame::Map(map)
}

/// Saves the users in the state file, through the runtime. A change that
/// cannot be saved is refused with Sentinel's reply, and not made.
async fn save(handle: &Handle, users: Vec<crate::config::UserRule>) -> Result<(), Frame> {
    handle
        .acl_set(users)
        .await
        .map_err(|refusal| Frame::error(refusal.to_string()))
}

async fn setuser(session: &mut Session, handle: &Handle, user: &[u8], ops: &[&[u8]]) -> Frame {
    let name = text(user);
    if name.contains([' ', '\0']) {
        return Frame::error("ERR Usernames can't contain spaces or null characters");
    }
    let security = session.shared.security.clone();
    let _writing = security.write.lock().await;
    let ops: Vec<String> = ops.iter().map(|o| text(o)).collect();
    // Changed on a copy, adopted once saved: a change the state file
    // cannot hold is not made.
    let mut next = security.acl().clone();
    if let Err(e) = next.setuser(&name, &ops) {
        return Frame::error(format!("ERR {e}"));
    }
    if let Err(f) = save(handle, next.lines()).await {
        return f;
    }
    let channels = |acl: &super::super::acl::Acl| acl.user(&name).map(|u| u.root().channels_text());
    let narrowed = {
        let now = channels(&next);
        now != channels(&security.acl()) && now.as_deref() != Some("&*")
    };
    *security.acl_mut() = next;
    if narrowed {
        // Valkey disconnects subscribers whose channels the change took
        // away. The registry keeps counts, not channel names, so every
        // subscribed connection of this user is closed: it reconnects and
        // subscribes again under the new rules.
        for client in session.shared.registry.all() {
            let state = client.state();
            if state.user.as_deref() == Some(name.as_str()) && state.sub + state.psub > 0 {
                if client.id == session.id {
                    session.close_after_reply = true;
                } else {
                    Arc::clone(&client).kill.notify_one();
                }
            }
        }
    }
    Frame::simple("OK")
}

async fn deluser(session: &mut Session, handle: &Handle, users: &[&[u8]]) -> Frame {
    let names: Vec<String> = users.iter().map(|u| text(u)).collect();
    if names.iter().any(|n| n == "default") {
        return Frame::error("ERR The 'default' user cannot be removed");
    }
    let security = session.shared.security.clone();
    let _writing = security.write.lock().await;
    let mut next = security.acl().clone();
    let deleted = next.deluser(&names);
    if deleted > 0 {
        if let Err(f) = save(handle, next.lines()).await {
            return f;
        }
        *security.acl_mut() = next;
    }
    // Connections authenticated as a deleted user are closed, as Valkey
    // does; this one after its reply.
    for client in session.shared.registry.all() {
        let user = client.state().user.clone();
        if user.is_some_and(|u| names.contains(&u)) {
            if client.id == session.id {
                session.close_after_reply = true;
            } else {
                Arc::clone(&client).kill.notify_one();
            }
        }
    }
    if session.user.as_ref().is_some_and(|u| names.contains(u)) {
        session.close_after_reply = true;
    }
    Frame::Integer(i64::try_from(deleted).unwrap_or(i64::MAX))
}

fn dryrun(acl: &super::super::acl::Acl, user: &[u8], cmd: &[&[u8]]) -> Frame {
    let Some(u) = acl.user(&text(user)) else {
        return Frame::error(format!("ERR User '{}' not found", text(user)));
    };
    let not_found = || Frame::error(format!("ERR Command '{}' not found", text(cmd[0])));
    let Some(base) = std::str::from_utf8(cmd[0])
        .ok()
        .filter(|n| !n.contains('|'))
        .and_then(commands::lookup)
    else {
        return not_found();
    };
    let id = match cmd.get(1) {
        Some(sub) if COMMANDS[base].is_container() => {
            match commands::lookup(&format!("{}|{}", COMMANDS[base].name, text(sub))) {
                Some(id) if !sub.contains(&b'|') => id,
                _ => return not_found(),
            }
        }
        _ => base,
    };
    if !COMMANDS[id].arity_ok(cmd.len()) {
        return wrong_arity(COMMANDS[id].name);
    }
    match acl.dryrun(u, id, cmd) {
        None => Frame::simple("OK"),
        Some(text) => Frame::bulk(text),
    }
}

fn genpass(bits: i64) -> Frame {
    if !(1..=4096).contains(&bits) {
        return Frame::error(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to 4096",
        );
    }
    let chars = usize::try_from((bits + 3) / 4).unwrap_or(64);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    if getrandom::fill(&mut bytes).is_err() {
        return Frame::error("ERR no random source");
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Frame::bulk(hex[..chars].to_string())
}
