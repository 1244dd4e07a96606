//! `AUTH [user] password` and `ACL WHOAMI`.
//!
//! # Format
//!
//! ```text
//! AUTH <password>         -> +OK | -WRONGPASS … | -ERR AUTH <password> called without any password configured …
//! AUTH <user> <password>  -> +OK | -WRONGPASS …
//! ACL WHOAMI              -> $user
//! ```

use valkyrie_protocol::Frame;

use super::super::connection::Session;

pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const NO_PASSWORD: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";

/// Checks `user`/`password` and logs the session in.
pub fn login(session: &mut Session, user: &[u8], password: &[u8]) -> Result<(), Frame> {
    let user = String::from_utf8_lossy(user).into_owned();
    if session
        .shared
        .security
        .check(&user, &String::from_utf8_lossy(password))
    {
        session.user = Some(user);
        Ok(())
    } else {
        Err(Frame::error(WRONGPASS))
    }
}

pub fn run(args: &[&[u8]], session: &mut Session) -> Frame {
    match &args[1..] {
        [password] => {
            if !session.shared.security.default_has_password() {
                return Frame::error(NO_PASSWORD);
            }
            match login(session, b"default", password) {
                Ok(()) => Frame::simple("OK"),
                Err(e) => e,
            }
        }
        [user, password] => match login(session, user, password) {
            Ok(()) => Frame::simple("OK"),
            Err(e) => e,
        },
        _ => super::wrong_arity("auth"),
    }
}

pub fn acl(args: &[&[u8]], session: &Session) -> Frame {
    let Some(sub) = args.get(1) else {
        return super::wrong_arity("acl");
    };
    match (
        String::from_utf8_lossy(sub).to_ascii_lowercase().as_str(),
        &args[2..],
    ) {
        ("whoami", []) => Frame::bulk(session.user.clone().unwrap_or_else(|| "default".into())),
        ("whoami", _) => super::wrong_arity("acl|whoami"),
        _ => Frame::error(format!(
            "ERR unknown subcommand '{}'. Try ACL HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}
