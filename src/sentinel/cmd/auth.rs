//! `AUTH [user] password`.
//!
//! # Format
//!
//! ```text
//! AUTH <password>         -> +OK | -WRONGPASS … | -ERR AUTH <password> called without any password configured …
//! AUTH <user> <password>  -> +OK | -WRONGPASS …
//! ```

use super::call::Call;
use valkyrie_protocol::Frame;

use super::super::connection::session::Session;

pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const NO_PASSWORD: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";

/// Checks `user`/`password` and logs the session in. A failure is
/// counted and logged, and slows the connection down (`connection.rs`).
pub fn login(session: &mut Session, user: &[u8], password: &[u8]) -> Result<(), Frame> {
    let user = String::from_utf8_lossy(user).into_owned();
    let client = session.client.clone();
    if session
        .shared
        .security
        .check(&user, password, || client.line(tokio::time::Instant::now()))
    {
        session.user = Some(user);
        Ok(())
    } else {
        session.auth_failed = true;
        Err(Frame::error(WRONGPASS))
    }
}

pub async fn run(call: &mut Call<'_>) -> Frame {
    let (args, session) = (call.args, &mut *call.session);
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
        [] => super::call::wrong_arity("auth"),
        _ => Frame::error("ERR syntax error"),
    }
}
