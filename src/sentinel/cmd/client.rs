//! `CLIENT SETNAME|GETNAME|SETINFO|ID …`: what connecting clients send.
//!
//! # Format
//!
//! ```text
//! CLIENT SETNAME <name>          -> +OK
//! CLIENT GETNAME                 -> $name | null
//! CLIENT SETINFO <attr> <value>  -> +OK
//! CLIENT ID                      -> :id
//! CLIENT <other>                 -> -ERR unknown subcommand '<other>'. Try CLIENT HELP.
//! ```

use valkyrie_protocol::Frame;

use super::super::connection::Session;

pub fn run(args: &[Vec<u8>], session: &mut Session) -> Frame {
    let Some(sub) = args.get(1) else {
        return super::wrong_arity("client");
    };
    let lower = String::from_utf8_lossy(sub).to_ascii_lowercase();
    match (lower.as_str(), &args[2..]) {
        ("setname", [name]) => {
            if name.iter().any(|b| *b <= b' ' || *b > b'~') {
                return Frame::error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            session.name = (!name.is_empty()).then(|| name.clone());
            Frame::simple("OK")
        }
        ("getname", []) => match &session.name {
            Some(n) => Frame::bulk(n.clone()),
            None => Frame::NullBulk,
        },
        ("setinfo", [_, _]) => Frame::simple("OK"),
        ("id", []) => Frame::Integer(session.id as i64),
        ("setname" | "getname" | "setinfo" | "id", _) => {
            super::wrong_arity(&format!("client|{lower}"))
        }
        _ => Frame::error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}
