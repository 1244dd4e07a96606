//! What `ACL` changes and shows of users: `GETUSER`, `SETUSER` and
//! `DELUSER` (saved through the runtime before the reply), `DRYRUN`,
//! `GENPASS`.

use std::sync::Arc;

use valkyrie_protocol::Frame;

use super::super::super::commands::{self, COMMANDS};
use super::super::super::connection::session::Session;
use super::super::call::{text, wrong_arity};
use crate::runtime::Handle;

pub(super) fn getuser(acl: &super::super::super::acl::Acl, name: &str) -> Frame {
    let Some(u) = acl.user(name) else {
        return Frame::NullBulk;
    };
    let selector = |s: &super::super::super::acl::rules::Selector| {
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

pub(super) async fn setuser(
    session: &mut Session,
    handle: &Handle,
    user: &[u8],
    ops: &[&[u8]],
) -> Frame {
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
    let channels =
        |acl: &super::super::super::acl::Acl| acl.user(&name).map(|u| u.root().channels_text());
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

pub(super) async fn deluser(session: &mut Session, handle: &Handle, users: &[&[u8]]) -> Frame {
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

pub(super) fn dryrun(acl: &super::super::super::acl::Acl, user: &[u8], cmd: &[&[u8]]) -> Frame {
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

pub(super) fn genpass(bits: i64) -> Frame {
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
