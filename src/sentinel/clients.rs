//! The registry of connected Sentinel-port clients, for `CLIENT LIST`,
//! `CLIENT INFO` and `CLIENT KILL`.
//!
//! Each connection owns its [`Session`](super::connection::Session) and
//! copies what others may ask about into its [`Client`] entry once per
//! command (one uncontended lock); `CLIENT KILL` wakes the target's
//! connection loop, which closes it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

/// What `CLIENT LIST` shows of a connection and may change under it.
#[derive(Debug, Clone, Default)]
pub struct ClientState {
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// Authenticated user.
    pub user: Option<String>,
    /// 2 or 3.
    pub resp: u8,
    /// Subscribed channels.
    pub sub: usize,
    /// Subscribed patterns.
    pub psub: usize,
    /// The last command, `container|sub` for subcommands.
    pub cmd: String,
    /// When the last command ran.
    pub last: Option<Instant>,
    /// `CLIENT SETINFO lib-name`.
    pub lib_name: Option<Vec<u8>>,
    /// `CLIENT SETINFO lib-ver`.
    pub lib_ver: Option<Vec<u8>>,
    /// Bytes read.
    pub net_in: u64,
    /// Bytes written.
    pub net_out: u64,
    /// Commands run.
    pub cmds: u64,
    /// Unparsed input bytes.
    pub qbuf: usize,
    /// Input buffer capacity.
    pub rbs: usize,
    /// Output bytes waiting for the socket.
    pub omem: usize,
    /// `CLIENT NO-EVICT on`.
    pub no_evict: bool,
    /// `CLIENT TRACKING on`.
    pub tracking: bool,
}

/// One connection.
#[derive(Debug)]
pub struct Client {
    /// `CLIENT ID`.
    pub id: u64,
    /// Peer address.
    pub addr: SocketAddr,
    /// Local address.
    pub laddr: SocketAddr,
    /// The socket's descriptor.
    pub fd: i32,
    /// When it connected.
    pub created: Instant,
    /// What may change.
    pub state: Mutex<ClientState>,
    /// Woken by `CLIENT KILL`.
    pub kill: Notify,
}

impl Client {
    /// Its state (a poisoned lock still holds usable data).
    pub fn state(&self) -> std::sync::MutexGuard<'_, ClientState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Subscribed to anything: `CLIENT KILL TYPE pubsub` matches it.
    pub fn is_pubsub(&self) -> bool {
        let s = self.state();
        s.sub + s.psub > 0
    }

    /// Valkey's `CLIENT LIST` line (without the newline), as of now.
    pub fn line(&self, now: Instant) -> String {
        let s = self.state();
        let age = now.saturating_duration_since(self.created).as_secs();
        let idle = s
            .last
            .map_or(age, |l| now.saturating_duration_since(l).as_secs());
        let mut flags = String::new();
        if s.sub + s.psub > 0 {
            flags.push('P');
        }
        if s.tracking {
            flags.push('t');
        }
        if s.no_evict {
            flags.push('e');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let text = |v: &Option<Vec<u8>>| v.as_deref().map(field).unwrap_or_default();
        let events = if s.omem > 0 { "rw" } else { "r" };
        let tot_mem = s.rbs + s.omem + 1024;
        format!(
            "id={} addr={} laddr={} fd={} name={} age={age} idle={idle} flags={flags} db=0 \
             sub={} psub={} ssub=0 multi=-1 watch=0 qbuf={} qbuf-free={} argv-mem=0 \
             multi-mem=0 rbs={} rbp={} obl=0 oll=0 omem={} tot-mem={tot_mem} events={events} \
             cmd={} user={} redir={} resp={} lib-name={} lib-ver={} tot-net-in={} \
             tot-net-out={} tot-cmds={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            text(&s.name),
            s.sub,
            s.psub,
            s.qbuf,
            s.rbs.saturating_sub(s.qbuf),
            s.rbs,
            s.rbs,
            s.omem,
            if s.cmd.is_empty() {
                "NULL".into()
            } else {
                field(s.cmd.as_bytes())
            },
            field(s.user.as_deref().unwrap_or("default").as_bytes()),
            if s.tracking { 0 } else { -1 },
            s.resp,
            text(&s.lib_name),
            text(&s.lib_ver),
            s.net_in,
            s.net_out,
            s.cmds,
        )
    }
}

/// A `CLIENT LIST` field value: bytes outside `!`..`~` are written
/// `\xHH`, so no value can end the line or start another `key=value`
/// field. Names and library attributes are refused on input when they hold
/// such bytes (as Valkey), so this changes nothing for them; it guards the
/// values that are not checked on input (an unknown command's name in
/// `cmd=`, a user name).
pub fn field(v: &[u8]) -> String {
    let mut out = String::with_capacity(v.len());
    for &b in v {
        if (b'!'..=b'~').contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// All connected clients.
#[derive(Debug, Default)]
pub struct Registry {
    clients: Mutex<BTreeMap<u64, Arc<Client>>>,
}

impl Registry {
    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Client>>> {
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a client; it is removed when the returned guard drops.
    pub fn enter(self: &Arc<Self>, client: Arc<Client>) -> Registered {
        self.map().insert(client.id, client.clone());
        Registered {
            registry: self.clone(),
            id: client.id,
        }
    }

    /// Every client, by id.
    pub fn all(&self) -> Vec<Arc<Client>> {
        self.map().values().cloned().collect()
    }

    /// How many are connected.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }
}

/// Keeps a client registered while it lives.
#[derive(Debug)]
pub struct Registered {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.map().remove(&self.id);
    }
}
