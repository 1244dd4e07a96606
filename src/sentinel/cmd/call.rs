//! What every handler takes and the helpers they share: the request
//! ([`Call`]), names lowercased without allocating ([`Lower`]), argument
//! parsing as Valkey does it, and Valkey's error texts.

use super::super::connection::session::Session;
use crate::runtime::Handle;
use valkyrie_protocol::Frame;

/// One request, as every handler takes it: `async fn(&mut Call) ->
/// Frame` (the (un)subscribe family answers with several frames).
#[derive(Debug)]
pub struct Call<'a> {
    /// The arguments, the command's name first.
    pub args: &'a [&'a [u8]],
    /// The command's name, lowercased.
    pub name: &'a str,
    /// The subcommand, lowercased, for commands that have them.
    pub sub: Option<&'a str>,
    /// The connection's state.
    pub session: &'a mut Session,
    /// The runtime.
    pub handle: &'a Handle,
}

/// A command or subcommand name in lower case, without an allocation for
/// the short names commands have (this runs for every request).
#[derive(Debug)]
pub struct Lower {
    short: [u8; 32],
    len: usize,
    long: Option<String>,
}

impl Lower {
    /// `arg`, lowercased.
    pub fn new(arg: &[u8]) -> Lower {
        let mut short = [0u8; 32];
        if arg.len() <= short.len() && arg.is_ascii() {
            for (d, s) in short.iter_mut().zip(arg) {
                *d = s.to_ascii_lowercase();
            }
            return Lower {
                short,
                len: arg.len(),
                long: None,
            };
        }
        Lower {
            short,
            len: 0,
            long: Some(String::from_utf8_lossy(arg).to_ascii_lowercase()),
        }
    }

    /// The lowercased text.
    pub fn as_str(&self) -> &str {
        match &self.long {
            Some(s) => s,
            // ASCII by construction, so always valid.
            None => std::str::from_utf8(&self.short[..self.len]).unwrap_or_default(),
        }
    }
}

/// An argument as text (invalid UTF-8 replaced), for replies and names.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Valkey's `getLongLongFromObject`: a whole signed decimal, nothing else.
pub fn long(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.starts_with('+') {
        return None;
    }
    s.parse().ok()
}

/// A two-way switch argument (`on`/`off`, `yes`/`no`), case-insensitive.
pub fn switch(arg: &[u8], yes: &str, no: &str) -> Option<bool> {
    if arg.eq_ignore_ascii_case(yes.as_bytes()) {
        Some(true)
    } else if arg.eq_ignore_ascii_case(no.as_bytes()) {
        Some(false)
    } else {
        None
    }
}

/// Valkey's reply to an unknown subcommand of `command` (upper case, as
/// its help names it).
pub fn unknown_subcommand(command: &str, sub: &[u8]) -> Frame {
    Frame::error(format!(
        "ERR unknown subcommand '{}'. Try {command} HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// Valkey's reply to arguments it cannot read.
pub const SYNTAX: &str = "ERR syntax error";

/// Whether `arg` is `word`, in any case.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// What a handler answers: one reply, or one per channel for
/// `(P)(UN)SUBSCRIBE`.
pub trait Replies {
    /// The replies, in order.
    fn replies(self) -> Vec<Frame>;
}

impl Replies for Frame {
    fn replies(self) -> Vec<Frame> {
        vec![self]
    }
}

impl Replies for Vec<Frame> {
    fn replies(self) -> Vec<Frame> {
        self
    }
}

/// Valkey's text: `ERR unknown command 'X', with args beginning with: 'a' 'b' `.
pub fn unknown_command(args: &[&[u8]]) -> Frame {
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(args[0])
    );
    for a in &args[1..] {
        text.push_str(&format!("'{}' ", String::from_utf8_lossy(a)));
    }
    Frame::error(text)
}

/// Valkey's text: `ERR wrong number of arguments for 'x' command`.
pub fn wrong_arity(name: &str) -> Frame {
    Frame::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// One `key value` pair of an instance description, both bulk strings.
pub fn kv(out: &mut Vec<(Frame, Frame)>, k: &str, v: impl ToString) {
    out.push((Frame::bulk(k.to_string()), Frame::bulk(v.to_string())));
}

/// crate::core::Milliseconds from `t` to `now` (0 if `t` is later).
pub fn since(now: crate::core::Millis, t: crate::core::Millis) -> crate::core::Millis {
    now.saturating_sub(t)
}
