//! `COMMAND [COUNT|LIST|INFO|DOCS]`, as a sentinel answers (`PUBLISH`,
//! which only takes peers' hellos, is in `peers`).
//!
//! # Format
//!
//! ```text
//! COMMAND COUNT       -> :15
//! COMMAND LIST        -> the 15 commands a sentinel knows (the table's,
//!                        without Valkyrie's `VALKYRIE`: `commands::commands`)
//! COMMAND DOCS [..]   -> empty map (RESP2 *0)
//! COMMAND INFO name…  -> one null per name
//! ```

use super::call::Call;
use valkyrie_protocol::Frame;

use crate::sentinel::commands::commands;

/// A parsed `COMMAND` request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Subcommand<'a> {
    /// `COMMAND` alone: the details of every command, none here.
    All,
    /// `COUNT`.
    Count,
    /// `LIST`.
    List,
    /// `DOCS [..]`.
    Docs,
    /// `INFO name…`.
    Info { names: &'a [&'a [u8]] },
}

impl<'a> Subcommand<'a> {
    /// Parses `COMMAND [<sub> …]`; `sub` is the subcommand lowercased.
    pub(crate) fn parse(args: &'a [&'a [u8]], sub: Option<&str>) -> Result<Subcommand<'a>, Frame> {
        Ok(match sub {
            None => Subcommand::All,
            Some("count") => Subcommand::Count,
            Some("list") => Subcommand::List,
            Some("docs") => Subcommand::Docs,
            Some("info") => Subcommand::Info { names: &args[2..] },
            Some(_) => {
                return Err(super::call::unknown_subcommand("COMMAND", args[1]));
            }
        })
    }
}

/// Runs `COMMAND …`, parsed first ([`Subcommand`]).
pub async fn run(call: &mut Call<'_>) -> Frame {
    match Subcommand::parse(call.args, call.sub) {
        Ok(Subcommand::All) => Frame::Array(vec![]),
        Ok(Subcommand::Count) => Frame::Integer(commands().count() as i64),
        Ok(Subcommand::List) => Frame::Array(commands().map(|c| Frame::bulk(c.name)).collect()),
        Ok(Subcommand::Docs) => Frame::Map(vec![]),
        Ok(Subcommand::Info { names }) => {
            Frame::Array(names.iter().map(|_| Frame::NullArray).collect())
        }
        Err(reply) => reply,
    }
}
