//! `COMMAND [COUNT|LIST|INFO|DOCS]`, as a sentinel answers (`PUBLISH`,
//! which only takes peers' hellos, is in `peers`).
//!
//! # Format
//!
//! ```text
//! COMMAND COUNT        -> :15
//! COMMAND LIST         -> the 15 commands a sentinel knows (the table's,
//!                         without Valkyrie's `VALKYRIE`: `commands::commands`)
//! COMMAND              -> every command's details, as valkey-sentinel 8.0.1
//! COMMAND INFO [name…] -> those of each name (null for an unknown one), or
//!                         all
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
        Ok(Subcommand::List) => Frame::Array(commands().map(|c| Frame::bulk(c.name)).collect()),
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
                .filter_map(|n| find(&recorded.docs, n))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        Ok(Subcommand::Info { names: [] }) => {
            Frame::Array(recorded.infos.iter().map(|(_, f)| f.clone()).collect())
        }
        Ok(Subcommand::Info { names }) => Frame::Array(
            names
                .iter()
                .map(|n| find(&recorded.infos, n).cloned().unwrap_or(Frame::NullBulk))
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
