//! `SENTINEL <subcommand> …`.
//!
//! # Format
//!
//! ```text
//! SENTINEL get-master-addr-by-name <name>  -> *2 $ip $port | RESP2 *-1, RESP3 _
//! SENTINEL get-primary-addr-by-name <name> (alias)
//! SENTINEL failover <name>                 -> +OK | -INPROG … | -NOGOODSLAVE …
//! ```

use tokio::sync::oneshot;
use valkyrie_protocol::Frame;

use super::super::connection::Session;
use crate::runtime::{AdminRequest, Handle};

pub async fn run(args: &[Vec<u8>], _session: &mut Session, handle: &Handle) -> Frame {
    let Some(sub) = args.get(1) else {
        return super::wrong_arity("sentinel");
    };
    let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
    match (sub.as_str(), &args[2..]) {
        ("get-master-addr-by-name" | "get-primary-addr-by-name", [name]) => {
            let name = String::from_utf8_lossy(name);
            let topology = handle.topology.borrow().clone();
            match topology.groups.get(name.as_ref()) {
                Some(g) => Frame::Array(vec![
                    Frame::bulk(g.master.host.clone()),
                    Frame::bulk(g.master.port.to_string()),
                ]),
                // RESP2 `*-1`, RESP3 `_`.
                None => Frame::NullArray,
            }
        }
        ("failover", [name]) => {
            let (tx, rx) = oneshot::channel();
            let request = AdminRequest::Failover {
                group: String::from_utf8_lossy(name).into_owned(),
                reply: tx,
            };
            if handle.admin.send(request).await.is_err() {
                return Frame::error("ERR shutting down");
            }
            match rx.await {
                Ok(Ok(())) => Frame::simple("OK"),
                Ok(Err(e)) => Frame::error(e.to_string()),
                Err(_) => Frame::error("ERR shutting down"),
            }
        }
        ("get-master-addr-by-name" | "get-primary-addr-by-name" | "failover", _) => {
            super::wrong_arity(&format!("sentinel|{sub}"))
        }
        _ => Frame::error(format!(
            "ERR unknown subcommand '{}'. Try SENTINEL HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}
