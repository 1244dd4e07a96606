//! `COMMAND [COUNT|LIST|INFO|DOCS]`, as a sentinel answers (`PUBLISH`,
//! which only takes peers' hellos, is in `peers`).
//!
//! # Format
//!
//! ```text
//! COMMAND COUNT       -> :15
//! COMMAND LIST        -> the 15 commands a sentinel knows (the table's)
//! COMMAND DOCS [..]   -> empty map (RESP2 *0)
//! COMMAND INFO name…  -> one null per name
//! ```

use super::call::Call;
use valkyrie_protocol::Frame;

use crate::sentinel::commands::commands;

pub async fn run(call: &mut Call<'_>) -> Frame {
    let args = call.args;
    let Some(sub) = args.get(1) else {
        return Frame::Array(vec![]);
    };
    match String::from_utf8_lossy(sub).to_ascii_lowercase().as_str() {
        "count" => Frame::Integer(commands().count() as i64),
        "list" => Frame::Array(commands().map(|c| Frame::bulk(c.name)).collect()),
        "docs" => Frame::Map(vec![]),
        "info" => Frame::Array(args[2..].iter().map(|_| Frame::NullArray).collect()),
        _ => Frame::error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}
