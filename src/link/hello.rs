//! Hellos: the payload our links publish on `__sentinel__:hello`, to data
//! nodes (the instance links) and to peer sentinels (the peer links).

use std::time::Duration;

use valkyrie_protocol::Frame;

use super::client::{ClientError, Conn};

/// The channel Sentinels announce themselves on.
pub const HELLO_CHANNEL: &str = "__sentinel__:hello";

/// A hello to publish: the link completes its first field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloJob {
    /// Everything after the first field:
    /// `port,runid,current_epoch,name,master_ip,master_port,config_epoch`.
    pub rest: String,
    /// `announce-ip`, if set; otherwise the first field is the local
    /// address of the connection that carries the hello.
    pub announce_ip: Option<String>,
}

impl HelloJob {
    /// The payload, with `local_ip` (the connection's local address) as
    /// the first field unless `announce-ip` is set.
    pub fn payload(&self, local_ip: &str) -> String {
        let ip = self.announce_ip.as_deref().unwrap_or(local_ip);
        format!("{ip},{}", self.rest)
    }

    /// The group (master name) the hello is about: its fifth field.
    pub fn group(&self) -> &str {
        self.rest.split(',').nth(3).unwrap_or("")
    }
}

/// `PUBLISH __sentinel__:hello <payload>` on `conn`, the payload's first
/// field being that connection's local address. Returns the reply (an
/// integer expected; callers only log anything else).
pub async fn publish(
    conn: &mut Conn,
    hello: &HelloJob,
    timeout: Duration,
) -> Result<Frame, ClientError> {
    let Some(local_ip) = conn.local_ip() else {
        return Err(ClientError::Broken("no local address".into()));
    };
    let payload = hello.payload(&local_ip);
    conn.call(&["PUBLISH", HELLO_CHANNEL, &payload], timeout)
        .await
}
