//! `COMMAND [COUNT|LIST|INFO|DOCS]`, as a sentinel answers (`PUBLISH`,
//! which only takes peers' hellos, is in `peers`).
//!
//! # Format
//!
//! ```text
//! COMMAND COUNT        -> :15
//! COMMAND LIST         -> the 15 commands a sentinel knows (the table's,
//!                         without Valkyrie's `VALKYRIE`: `commands::commands`),
//!                         each followed by its subcommands (`client|setinfo`)
//! COMMAND              -> every command's details, as valkey-sentinel 8.0.1
//! COMMAND INFO [name…] -> those of each name (null for an unknown one), or
//!                         all; a name may be a subcommand's (`client|setinfo`)
//! COMMAND DOCS [name…] -> a map of each known name to its docs, or all
//! ```
//!
//! The details and docs are valkey-sentinel 8.0.1's own answers, recorded
//! by `tools/record-command-docs.py` into `src/sentinel/commands/`
//! (`info.resp`, `docs.resp`, RESP3; a RESP2 client gets them flattened,
//! as from Sentinel). Lists of every command come in the recorded order;
//! Sentinel's follows its hash table, seeded per process.

use std::sync::OnceLock;

use super::call::Call;
use bytes::Bytes;
use valkyrie_protocol::Frame;

use crate::sentinel::commands::commands;

/// A parsed `COMMAND` request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Subcommand<'a> {
    /// `COMMAND` alone: the details of every command.
    All,
    /// `COUNT`.
    Count,
    /// `LIST`.
    List,
    /// `DOCS [name…]`.
    Docs { names: &'a [&'a [u8]] },
    /// `INFO [name…]`.
    Info { names: &'a [&'a [u8]] },
}

impl<'a> Subcommand<'a> {
    /// Parses `COMMAND [<sub> …]`; `sub` is the subcommand lowercased.
    pub(crate) fn parse(args: &'a [&'a [u8]], sub: Option<&str>) -> Result<Subcommand<'a>, Frame> {
        Ok(match sub {
            None => Subcommand::All,
            Some("count") => Subcommand::Count,
            Some("list") => Subcommand::List,
            Some("docs") => Subcommand::Docs { names: &args[2..] },
            Some("info") => Subcommand::Info { names: &args[2..] },
            Some(_) => {
                return Err(super::call::unknown_subcommand("COMMAND", args[1]));
            }
        })
    }
}

/// Runs `COMMAND …`, parsed first ([`Subcommand`]).
pub async fn run(call: &mut Call<'_>) -> Frame {
    let recorded = recorded();
    match Subcommand::parse(call.args, call.sub) {
        Ok(Subcommand::All) => {
            Frame::Array(recorded.infos.iter().map(|(_, f)| f.clone()).collect())
        }
        Ok(Subcommand::Count) => Frame::Integer(commands().count() as i64),
        Ok(Subcommand::List) => Frame::Array(
            commands()
                .flat_map(|c| {
                    let subs = find(&recorded.infos, c.name.as_bytes())
                        .map(subcommand_infos)
                        .unwrap_or_default();
                    std::iter::once(Frame::bulk(c.name)).chain(
                        subs.into_iter()
                            .filter_map(|s| info_name(&s))
                            .map(Frame::bulk),
                    )
                })
                .collect(),
        ),
        Ok(Subcommand::Docs { names: [] }) => Frame::Map(
            recorded
                .docs
                .iter()
                .map(|(_, (k, v))| (k.clone(), v.clone()))
                .collect(),
        ),
        Ok(Subcommand::Docs { names }) => Frame::Map(
            names
                .iter()
                .filter_map(|n| {
                    find(&recorded.docs, n)
                        .cloned()
                        .or_else(|| sub_docs(recorded, n))
                })
                .collect(),
        ),
        Ok(Subcommand::Info { names: [] }) => {
            Frame::Array(recorded.infos.iter().map(|(_, f)| f.clone()).collect())
        }
        Ok(Subcommand::Info { names }) => Frame::Array(
            names
                .iter()
                .map(|n| {
                    find(&recorded.infos, n)
                        .cloned()
                        .or_else(|| sub_info(recorded, n))
                        .unwrap_or(Frame::NullBulk)
                })
                .collect(),
        ),
        Err(reply) => reply,
    }
}

/// What valkey-sentinel 8.0.1 answered, by lowercase command name.
pub(super) struct Recorded {
    /// `COMMAND`'s entries.
    pub(super) infos: Vec<(String, Frame)>,
    /// `COMMAND DOCS`'s pairs.
    pub(super) docs: Vec<(String, (Frame, Frame))>,
}

/// The entry of `name` (any case).
fn find<'a, T>(list: &'a [(String, T)], name: &[u8]) -> Option<&'a T> {
    list.iter()
        .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|(_, t)| t)
}

/// The subcommands' entries of a command's `COMMAND INFO` entry (its
/// tenth field).
fn subcommand_infos(info: &Frame) -> Vec<Frame> {
    match info {
        Frame::Array(fields) => match fields.get(9) {
            Some(Frame::Array(subs)) => subs.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The name an entry of `COMMAND INFO` starts with.
fn info_name(info: &Frame) -> Option<String> {
    match info {
        Frame::Array(fields) => fields
            .first()?
            .as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// `container|sub`, split; `None` for a plain name.
fn split_sub(name: &[u8]) -> Option<&[u8]> {
    let bar = name.iter().position(|b| *b == b'|')?;
    Some(&name[..bar])
}

/// The `COMMAND INFO` entry of subcommand `name` (`client|setinfo`).
fn sub_info(recorded: &Recorded, name: &[u8]) -> Option<Frame> {
    let container = find(&recorded.infos, split_sub(name)?)?;
    subcommand_infos(container)
        .into_iter()
        .find(|s| info_name(s).is_some_and(|n| n.as_bytes().eq_ignore_ascii_case(name)))
}

/// The `COMMAND DOCS` pair of subcommand `name`: from its container's
/// `subcommands` map.
fn sub_docs(recorded: &Recorded, name: &[u8]) -> Option<(Frame, Frame)> {
    let (_, docs) = find(&recorded.docs, split_sub(name)?)?;
    let Frame::Map(fields) = docs else {
        return None;
    };
    let (_, subs) = fields
        .iter()
        .find(|(k, _)| k.as_bytes().is_some_and(|b| &b[..] == b"subcommands"))?;
    let Frame::Map(subs) = subs else {
        return None;
    };
    subs.iter()
        .find(|(k, _)| k.as_bytes().is_some_and(|b| b.eq_ignore_ascii_case(name)))
        .cloned()
}

/// The recorded answers, decoded once.
pub(super) fn recorded() -> &'static Recorded {
    static RECORDED: OnceLock<Recorded> = OnceLock::new();
    RECORDED.get_or_init(|| {
        let name = |f: &Frame| {
            f.as_bytes()
                .map(|b| String::from_utf8_lossy(b).to_ascii_lowercase())
                .unwrap_or_default()
        };
        let infos = match decode(include_bytes!("../commands/info.resp")) {
            Some(Frame::Array(items)) => items
                .into_iter()
                .map(|f| {
                    let n = match &f {
                        Frame::Array(fields) => fields.first().map(name).unwrap_or_default(),
                        _ => String::new(),
                    };
                    (n, f)
                })
                .collect(),
            _ => Vec::new(),
        };
        let docs = match decode(include_bytes!("../commands/docs.resp")) {
            Some(Frame::Map(pairs)) => pairs.into_iter().map(|(k, v)| (name(&k), (k, v))).collect(),
            _ => Vec::new(),
        };
        Recorded { infos, docs }
    })
}

/// One frame of recorded RESP3 (a unit test checks that both decode).
fn decode(bytes: &'static [u8]) -> Option<Frame> {
    let mut decoder = valkyrie_protocol::FrameDecoder::new();
    match decoder.decode_bytes(&Bytes::from_static(bytes)) {
        Ok(Some((frame, _))) => Some(frame),
        _ => None,
    }
}
