//! The index protocol's lines: encoding of every message, nom parsers for
//! every line, and [`ServerDecoder`], which assembles multi-line snapshots
//! from a byte stream.
//!
//! # Format
//!
//! A line is tokens separated by spaces or tabs, ended by `\n` (a `\r`
//! before it is ignored). The first token is the message or command word;
//! then come positional tokens; then `key=value` attributes, whose unknown
//! keys a reader ignores. Names and hosts are percent-escaped: every byte
//! outside `!`..`~`, and `%` and `=`, is written `%XX`.

use bytes::{BufMut, BytesMut};
use nom::bytes::complete::{tag, take_till1, take_while1};
use nom::character::complete::{space0, space1};
use nom::combinator::{all_consuming, rest};
use nom::multi::separated_list0;
use nom::sequence::{delimited, separated_pair};
use nom::{IResult, Parser};

use super::{
    Greeting, GroupSnapshot, IndexError, MAX_REPLICAS, MAX_SERVER_LINE, Master, MasterState,
    Pattern, Replica, ReplicaState,
};

/// What a client sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientCommand {
    /// `HELLO <version>`: the highest version the client speaks.
    Hello(u32),
    /// `WATCH <pattern>…`: add groups to the watched set.
    Watch(Vec<Pattern>),
    /// `PING [token]`.
    Ping(Option<String>),
    /// `ACK <mark>` (version 2): everything up to the `MARK` with this
    /// token was read.
    Ack(u64),
    /// `QUIT`.
    Quit,
}

/// What a server sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerMessage {
    /// The first line.
    Greeting(Greeting),
    /// `HELLO <version>`: the version in use from now on.
    Hello(u32),
    /// `WATCHING <n>`: the connection now watches `n` patterns.
    Watching(usize),
    /// A full group snapshot (`SNAPSHOT` … `END`).
    Snapshot(GroupSnapshot),
    /// `GONE <group>`: the group is no longer monitored.
    Gone(String),
    /// `PONG [token]`.
    Pong(Option<String>),
    /// `HEARTBEAT`: nothing changed for a while; the connection is alive.
    Heartbeat,
    /// `MARK <token>` (version 2): ends a batch of pushes; the client
    /// answers `ACK <token>` once it has read it.
    Mark(u64),
    /// `BYE`: the server closes the connection after this line.
    Bye,
    /// `ERR <code> <text>`.
    Error {
        /// `syntax`, `unknown-command`, `version`, `limit`, `busy`, …
        code: String,
        /// Human-readable text.
        message: String,
    },
}

// ---------------------------------------------------------------- escaping

fn plain(b: u8) -> bool {
    // `=` is escaped so that a name can never be mistaken for an
    // attribute.
    (0x21..=0x7e).contains(&b) && b != b'%' && b != b'='
}

/// Appends `s` percent-escaped.
pub fn escape(s: &str, out: &mut BytesMut) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        if plain(b) {
            out.put_u8(b);
        } else {
            out.put_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

/// Feeds each byte of an escaped token to `f`, with whether it was
/// escaped.
pub(crate) fn unescape_with(token: &[u8], mut f: impl FnMut(u8, bool)) -> Result<(), IndexError> {
    let mut i = 0;
    while i < token.len() {
        if token[i] == b'%' {
            let hex = token
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| IndexError::Syntax("invalid %-escape".into()))?;
            f(hex, true);
            i += 3;
        } else {
            f(token[i], false);
            i += 1;
        }
    }
    Ok(())
}

/// Decodes an escaped token into text.
pub fn unescape(token: &[u8]) -> Result<String, IndexError> {
    let mut out = Vec::with_capacity(token.len());
    unescape_with(token, |b, _| out.push(b))?;
    String::from_utf8(out).map_err(|_| IndexError::Syntax("name is not UTF-8".into()))
}

// ---------------------------------------------------------------- encoding

fn put_u64(out: &mut BytesMut, n: u64) {
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
}

impl Greeting {
    /// Appends the greeting line.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_slice(b"VALKYRIE-INDEX ");
        put_u64(out, u64::from(self.version));
        out.put_slice(b" server=");
        escape(&self.server, out);
        out.put_slice(b" run=");
        escape(&self.run, out);
        out.put_slice(b" heartbeat=");
        put_u64(out, self.heartbeat_ms);
        out.put_u8(b'\n');
    }
}

impl GroupSnapshot {
    /// Appends the snapshot's lines, `SNAPSHOT` to `END`.
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(96 + 80 * self.replicas.len());
        out.put_slice(b"SNAPSHOT ");
        escape(&self.group, out);
        out.put_slice(b" epoch=");
        put_u64(out, self.epoch);
        out.put_slice(b" version=");
        put_u64(out, self.version);
        out.put_slice(b"\nMASTER ");
        escape(&self.master.host, out);
        out.put_u8(b' ');
        put_u64(out, u64::from(self.master.port));
        out.put_slice(b" state=");
        out.put_slice(self.master.state.as_str().as_bytes());
        out.put_slice(b" failover=");
        match &self.master.failover {
            Some(f) => escape(f, out),
            None => out.put_slice(b"none"),
        }
        out.put_u8(b'\n');
        for r in &self.replicas {
            out.put_slice(b"REPLICA ");
            escape(&r.host, out);
            out.put_u8(b' ');
            put_u64(out, u64::from(r.port));
            out.put_slice(b" state=");
            out.put_slice(r.state.as_str().as_bytes());
            out.put_slice(b" offset=");
            put_u64(out, r.offset);
            out.put_slice(b" priority=");
            put_u64(out, u64::from(r.priority));
            out.put_u8(b'\n');
        }
        out.put_slice(b"END ");
        escape(&self.group, out);
        out.put_u8(b'\n');
    }
}

impl ServerMessage {
    /// Appends the message's line(s).
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            ServerMessage::Greeting(g) => g.encode(out),
            ServerMessage::Snapshot(s) => s.encode(out),
            ServerMessage::Hello(v) => {
                out.put_slice(b"HELLO ");
                put_u64(out, u64::from(*v));
                out.put_u8(b'\n');
            }
            ServerMessage::Watching(n) => {
                out.put_slice(b"WATCHING ");
                put_u64(out, *n as u64);
                out.put_u8(b'\n');
            }
            ServerMessage::Gone(g) => {
                out.put_slice(b"GONE ");
                escape(g, out);
                out.put_u8(b'\n');
            }
            ServerMessage::Pong(token) => {
                out.put_slice(b"PONG");
                if let Some(t) = token {
                    out.put_u8(b' ');
                    escape(t, out);
                }
                out.put_u8(b'\n');
            }
            ServerMessage::Heartbeat => out.put_slice(b"HEARTBEAT\n"),
            ServerMessage::Mark(token) => {
                out.put_slice(b"MARK ");
                put_mark(out, *token);
                out.put_u8(b'\n');
            }
            ServerMessage::Bye => out.put_slice(b"BYE\n"),
            ServerMessage::Error { code, message } => {
                out.put_slice(b"ERR ");
                escape(code, out);
                out.put_u8(b' ');
                // The text is free-form but must stay on one line.
                for &b in message.as_bytes() {
                    out.put_u8(if b == b'\n' || b == b'\r' { b' ' } else { b });
                }
                out.put_u8(b'\n');
            }
        }
    }
}

impl ClientCommand {
    /// Appends the command line.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            ClientCommand::Hello(v) => {
                out.put_slice(b"HELLO ");
                put_u64(out, u64::from(*v));
            }
            ClientCommand::Watch(patterns) => {
                out.put_slice(b"WATCH");
                for p in patterns {
                    out.put_u8(b' ');
                    out.put_slice(p.as_str().as_bytes());
                }
            }
            ClientCommand::Ping(token) => {
                out.put_slice(b"PING");
                if let Some(t) = token {
                    out.put_u8(b' ');
                    escape(t, out);
                }
            }
            ClientCommand::Ack(token) => {
                out.put_slice(b"ACK ");
                put_mark(out, *token);
            }
            ClientCommand::Quit => out.put_slice(b"QUIT"),
        }
        out.put_u8(b'\n');
    }
}

// ---------------------------------------------------------------- parsing

fn token(i: &[u8]) -> IResult<&[u8], &[u8]> {
    take_while1(|b: u8| b > b' ' && b != 0x7f)(i)
}

/// Splits one line (terminator removed) into tokens.
pub fn tokens(line: &[u8]) -> Result<Vec<&[u8]>, IndexError> {
    if let Some(&b) = line
        .iter()
        .find(|&&b| (b < b' ' && b != b'\t') || b == 0x7f)
    {
        return Err(IndexError::InvalidByte(b));
    }
    all_consuming(delimited(space0, separated_list0(space1, token), space0))
        .parse(line)
        .map(|(_, t)| t)
        .map_err(|_| IndexError::Syntax("malformed line".into()))
}

/// Splits `key=value`.
fn attribute(tok: &[u8]) -> Option<(&[u8], &[u8])> {
    let r: IResult<&[u8], (&[u8], &[u8])> =
        separated_pair(take_till1(|b| b == b'='), tag(&b"="[..]), rest).parse(tok);
    r.ok().map(|(_, kv)| kv)
}

fn number<T: TryFrom<u64>>(tok: &[u8], what: &str) -> Result<T, IndexError> {
    all_consuming(nom::character::complete::u64::<&[u8], nom::error::Error<&[u8]>>)
        .parse(tok)
        .ok()
        .and_then(|(_, n)| T::try_from(n).ok())
        .ok_or_else(|| IndexError::Syntax(format!("invalid {what}")))
}

/// Writes a mark token: 16 lowercase hex digits.
fn put_mark(out: &mut BytesMut, token: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..16).rev() {
        out.put_u8(HEX[((token >> (shift * 4)) & 15) as usize]);
    }
}

/// Reads a mark token: exactly 16 hex digits.
fn mark(tok: &[u8]) -> Result<u64, IndexError> {
    let hex = tok.len() == 16 && tok.iter().all(u8::is_ascii_hexdigit);
    let text = std::str::from_utf8(tok).ok().filter(|_| hex);
    text.and_then(|t| u64::from_str_radix(t, 16).ok())
        .ok_or_else(|| IndexError::Syntax("a mark is 16 hex digits".into()))
}

fn word(tok: &[u8]) -> String {
    String::from_utf8_lossy(tok).into_owned()
}

/// Positional tokens and attributes after the keyword.
struct Fields<'a> {
    positional: Vec<&'a [u8]>,
    attributes: Vec<(&'a [u8], &'a [u8])>,
}

impl<'a> Fields<'a> {
    fn split(toks: &[&'a [u8]]) -> Fields<'a> {
        let mut positional = Vec::new();
        let mut attributes = Vec::new();
        for t in toks {
            match attribute(t) {
                Some(kv) if attributes.len() < 64 => attributes.push(kv),
                Some(_) => {}
                None if attributes.is_empty() => positional.push(*t),
                None => {}
            }
        }
        Fields {
            positional,
            attributes,
        }
    }

    fn get(&self, key: &str) -> Option<&'a [u8]> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, v)| *v)
    }

    fn need(&self, key: &str, line: &str) -> Result<&'a [u8], IndexError> {
        self.get(key)
            .ok_or_else(|| IndexError::Syntax(format!("{line} without {key}=")))
    }
}

fn keyword_is(tok: &[u8], word: &str) -> bool {
    tok.eq_ignore_ascii_case(word.as_bytes())
}

/// Parses one client command line (terminator removed). An empty line is
/// `Ok(None)`.
pub fn parse_command(line: &[u8]) -> Result<Option<ClientCommand>, IndexError> {
    let toks = tokens(line)?;
    let Some((&cmd, args)) = toks.split_first() else {
        return Ok(None);
    };
    let arity = |ok: bool, usage: &str| {
        if ok {
            Ok(())
        } else {
            Err(IndexError::Syntax(format!("usage: {usage}")))
        }
    };
    let command = if keyword_is(cmd, "HELLO") {
        arity(args.len() == 1, "HELLO <version>")?;
        let v: u32 = number(args[0], "version")?;
        if v == 0 {
            return Err(IndexError::Version(v));
        }
        ClientCommand::Hello(v)
    } else if keyword_is(cmd, "WATCH") {
        arity(!args.is_empty(), "WATCH <group-or-glob>…")?;
        if args.len() > super::MAX_PATTERNS {
            return Err(IndexError::TooManyPatterns {
                limit: super::MAX_PATTERNS,
            });
        }
        ClientCommand::Watch(
            args.iter()
                .map(|a| Pattern::parse(a))
                .collect::<Result<_, _>>()?,
        )
    } else if keyword_is(cmd, "PING") {
        arity(args.len() <= 1, "PING [token]")?;
        ClientCommand::Ping(args.first().map(|t| unescape(t)).transpose()?)
    } else if keyword_is(cmd, "ACK") {
        arity(args.len() == 1, "ACK <mark>")?;
        ClientCommand::Ack(mark(args[0])?)
    } else if keyword_is(cmd, "QUIT") {
        arity(args.is_empty(), "QUIT")?;
        ClientCommand::Quit
    } else {
        return Err(IndexError::UnknownCommand(word(cmd)));
    };
    Ok(Some(command))
}

fn host_port(f: &Fields<'_>, line: &str) -> Result<(String, u16), IndexError> {
    match f.positional.as_slice() {
        [h, p] => Ok((unescape(h)?, number(p, "port")?)),
        _ => Err(IndexError::Syntax(format!("usage: {line} <host> <port> …"))),
    }
}

fn master_line(f: &Fields<'_>) -> Result<Master, IndexError> {
    let (host, port) = host_port(f, "MASTER")?;
    let state = match f.need("state", "MASTER")? {
        b"up" => MasterState::Up,
        b"sdown" => MasterState::Sdown,
        b"odown" => MasterState::Odown,
        other => return Err(IndexError::Syntax(format!("master state {}", word(other)))),
    };
    let failover = match f.get("failover") {
        None | Some(b"none") => None,
        Some(v) => Some(unescape(v)?),
    };
    Ok(Master {
        host,
        port,
        state,
        failover,
    })
}

fn replica_line(f: &Fields<'_>) -> Result<Replica, IndexError> {
    let (host, port) = host_port(f, "REPLICA")?;
    let state = match f.need("state", "REPLICA")? {
        b"up" => ReplicaState::Up,
        b"disconnected" => ReplicaState::Disconnected,
        b"down" => ReplicaState::Down,
        other => {
            return Err(IndexError::Syntax(format!("replica state {}", word(other))));
        }
    };
    Ok(Replica {
        host,
        port,
        state,
        offset: number(f.need("offset", "REPLICA")?, "offset")?,
        priority: number(f.need("priority", "REPLICA")?, "priority")?,
    })
}

/// A snapshot being assembled.
#[derive(Debug)]
struct Partial {
    group: String,
    epoch: u64,
    version: u64,
    master: Option<Master>,
    replicas: Vec<Replica>,
}

/// Decodes a server's byte stream into [`ServerMessage`]s. Keeps its place
/// between calls, so a stream trickled byte by byte is scanned once.
#[derive(Debug, Default)]
pub struct ServerDecoder {
    scanned: usize,
    partial: Option<Partial>,
}

impl ServerDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> ServerDecoder {
        ServerDecoder::default()
    }

    /// The next complete message in `buf` (its bytes are consumed), or
    /// `None` until more bytes arrive. Lines of kinds this version does not
    /// know are skipped, as the specification requires.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<ServerMessage>, IndexError> {
        loop {
            let Some(nl) = memchr::memchr(b'\n', &buf[self.scanned..]) else {
                self.scanned = buf.len();
                if buf.len() > MAX_SERVER_LINE {
                    return Err(IndexError::LineTooLong {
                        limit: MAX_SERVER_LINE,
                    });
                }
                return Ok(None);
            };
            let end = self.scanned + nl;
            self.scanned = 0;
            let line = buf.split_to(end + 1);
            let line = line[..end].strip_suffix(b"\r").unwrap_or(&line[..end]);
            if line.len() > MAX_SERVER_LINE {
                return Err(IndexError::LineTooLong {
                    limit: MAX_SERVER_LINE,
                });
            }
            if let Some(m) = self.line(line)? {
                return Ok(Some(m));
            }
        }
    }

    fn line(&mut self, line: &[u8]) -> Result<Option<ServerMessage>, IndexError> {
        let toks = tokens(line)?;
        let Some((&kind, rest)) = toks.split_first() else {
            return Ok(None);
        };
        let f = Fields::split(rest);
        if let Some(p) = &mut self.partial {
            if kind == b"MASTER" {
                p.master = Some(master_line(&f)?);
            } else if kind == b"REPLICA" {
                if p.replicas.len() >= MAX_REPLICAS {
                    return Err(IndexError::TooManyReplicas {
                        limit: MAX_REPLICAS,
                    });
                }
                p.replicas.push(replica_line(&f)?);
            } else if kind == b"END" {
                let name = match f.positional.as_slice() {
                    [n] => unescape(n)?,
                    _ => return Err(IndexError::Syntax("usage: END <group>".into())),
                };
                let Some(p) = self.partial.take() else {
                    return Ok(None);
                };
                if name != p.group {
                    return Err(IndexError::Syntax(format!(
                        "END {name} inside snapshot of {}",
                        p.group
                    )));
                }
                let master = p
                    .master
                    .ok_or_else(|| IndexError::Syntax("snapshot without MASTER".into()))?;
                return Ok(Some(ServerMessage::Snapshot(GroupSnapshot {
                    group: p.group,
                    epoch: p.epoch,
                    version: p.version,
                    master,
                    replicas: p.replicas,
                })));
            } else if is_known(kind) {
                return Err(IndexError::Syntax(format!(
                    "{} inside a snapshot",
                    word(kind)
                )));
            }
            return Ok(None);
        }
        let one = |what: &str| match f.positional.as_slice() {
            [x] => Ok(*x),
            _ => Err(IndexError::Syntax(format!("usage: {what}"))),
        };
        let message = match kind {
            b"SNAPSHOT" => {
                self.partial = Some(Partial {
                    group: unescape(one("SNAPSHOT <group> …")?)?,
                    epoch: number(f.need("epoch", "SNAPSHOT")?, "epoch")?,
                    version: number(f.need("version", "SNAPSHOT")?, "version")?,
                    master: None,
                    replicas: Vec::new(),
                });
                return Ok(None);
            }
            b"VALKYRIE-INDEX" => ServerMessage::Greeting(Greeting {
                version: number(one("VALKYRIE-INDEX <version> …")?, "version")?,
                server: unescape(f.need("server", "VALKYRIE-INDEX")?)?,
                run: unescape(f.need("run", "VALKYRIE-INDEX")?)?,
                heartbeat_ms: number(f.need("heartbeat", "VALKYRIE-INDEX")?, "heartbeat")?,
            }),
            b"HELLO" => ServerMessage::Hello(number(one("HELLO <version>")?, "version")?),
            b"WATCHING" => ServerMessage::Watching(number(one("WATCHING <n>")?, "count")?),
            b"GONE" => ServerMessage::Gone(unescape(one("GONE <group>")?)?),
            b"PONG" => ServerMessage::Pong(rest.first().map(|t| unescape(t)).transpose()?),
            b"HEARTBEAT" => ServerMessage::Heartbeat,
            b"MARK" => ServerMessage::Mark(mark(one("MARK <token>")?)?),
            b"BYE" => ServerMessage::Bye,
            b"ERR" => {
                let code = rest.first().map(|c| word(c)).unwrap_or_default();
                let text = error_text(line);
                ServerMessage::Error {
                    code,
                    message: text,
                }
            }
            b"MASTER" | b"REPLICA" | b"END" => {
                return Err(IndexError::Syntax(format!(
                    "{} outside a snapshot",
                    word(kind)
                )));
            }
            _ => return Ok(None),
        };
        Ok(Some(message))
    }
}

fn is_known(kind: &[u8]) -> bool {
    matches!(
        kind,
        b"SNAPSHOT"
            | b"VALKYRIE-INDEX"
            | b"HELLO"
            | b"WATCHING"
            | b"GONE"
            | b"PONG"
            | b"HEARTBEAT"
            | b"MARK"
            | b"BYE"
            | b"ERR"
    )
}

/// The free text of an `ERR <code> <text>` line.
fn error_text(line: &[u8]) -> String {
    (space0, tag(&b"ERR"[..]), space1, token, space0)
        .parse(line)
        .map(|(text, _)| word(text))
        .unwrap_or_default()
}
