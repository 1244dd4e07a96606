//! Sentinel's peer protocol on the wire: the hello a sentinel publishes
//! (`ip,port,runid,current_epoch,name,master_ip,master_port,config_epoch`)
//! and the arguments of a vote request (`SENTINEL is-master-down-by-addr
//! <ip> <port> <epoch> <runid>`), parsed and checked before anything of
//! them is stored, persisted or re-emitted.
//!
//! Every field is hostile until checked: hosts are 1 to [`MAX_HOST_LEN`]
//! printable ASCII characters without spaces (an IP address unless host
//! names are allowed), run ids are 40 hex digits, epochs are plain
//! decimals of at most [`MAX_EPOCH`], and a hello's config epoch may not
//! exceed its sender's current epoch. Errors quote at most a few dozen
//! characters of what was sent. Fuzzed (`fuzz/fuzz_targets/peer.rs`).

/// The largest epoch: Sentinel replies epochs as signed 64-bit integers.
pub const MAX_EPOCH: u64 = i64::MAX as u64;

/// How far ahead of our current epoch an epoch from a peer may be: one
/// crafted request must not be able to push the epoch to its end (Sentinel
/// 8.0.1 accepts `-1` as 2^64-1 and can then never fail over again).
pub const MAX_EPOCH_JUMP: u64 = 1 << 32;

/// The longest host name or address taken from the network or a file
/// (Valkey's `NET_HOST_STR_LEN` less its terminator).
pub const MAX_HOST_LEN: usize = 255;

/// At most this many characters of a refused field are quoted back.
const SHOWN: usize = 48;

fn shown(s: &str) -> String {
    s.chars().take(SHOWN).collect()
}

/// Why a host was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Empty, longer than [`MAX_HOST_LEN`], or holding a byte outside
    /// printable ASCII (a space, a newline, an escape…): it would be
    /// re-emitted raw in event payloads and replies.
    #[error("host {0:?} is not 1 to 255 printable ASCII characters")]
    NotPrintable(String),
    /// Not an IP address, and host names are not allowed
    /// (`resolve-hostnames no`).
    #[error("host {0:?} is not an IP address (and resolve-hostnames is off)")]
    NotAnIp(String),
}

/// Checks a host from anywhere outside the decision core: printable ASCII
/// with no space, at most [`MAX_HOST_LEN`] bytes, and an IP address unless
/// `names` (Sentinel's `resolve-hostnames`).
pub fn check_host(host: &str, names: bool) -> Result<(), HostError> {
    if host.is_empty() || host.len() > MAX_HOST_LEN || !host.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(HostError::NotPrintable(shown(host)));
    }
    if !names && host.parse::<std::net::IpAddr>().is_err() {
        return Err(HostError::NotAnIp(shown(host)));
    }
    Ok(())
}

/// Why an epoch from a peer was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EpochError {
    /// Not plain decimal digits (a sign, a space, an exponent…).
    #[error("epoch {0:?} is not a plain decimal number")]
    NotDecimal(String),
    /// Larger than `i64::MAX` (Sentinel replies epochs as signed).
    #[error("epoch {0:?} is out of range")]
    OutOfRange(String),
    /// More than [`MAX_EPOCH_JUMP`] ahead of ours.
    #[error("epoch {epoch} is too far ahead of the current epoch {current}")]
    TooFarAhead {
        /// The epoch offered.
        epoch: u64,
        /// Ours.
        current: u64,
    },
}

/// Parses an epoch from a peer: plain ASCII digits, at most `i64::MAX`.
/// Sentinel 8.0.1 accepts `-1` (as 2^64-1) here; we refuse it.
pub fn parse_epoch(text: &[u8]) -> Result<u64, EpochError> {
    let quoted = || shown(&String::from_utf8_lossy(&text[..text.len().min(SHOWN)]));
    if text.is_empty() || text.len() > 20 || !text.iter().all(u8::is_ascii_digit) {
        return Err(EpochError::NotDecimal(quoted()));
    }
    let mut n: u64 = 0;
    for d in text {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or_else(|| EpochError::OutOfRange(quoted()))?;
    }
    if n > MAX_EPOCH {
        return Err(EpochError::OutOfRange(quoted()));
    }
    Ok(n)
}

/// Refuses an epoch more than [`MAX_EPOCH_JUMP`] ahead of `current`.
pub fn within_reach(epoch: u64, current: u64) -> Result<u64, EpochError> {
    if epoch > current.saturating_add(MAX_EPOCH_JUMP) {
        return Err(EpochError::TooFarAhead { epoch, current });
    }
    Ok(epoch)
}

/// Whether `s` is a run id: 40 hexadecimal digits.
pub fn is_runid(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Why a hello was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// Not 8 comma-separated fields.
    #[error("not 8 comma-separated fields")]
    Fields,
    /// A port is not a number from 1 to 65535.
    #[error("bad port {0:?}")]
    Port(String),
    /// An address is not printable ASCII, too long, or not an IP address
    /// while host names are not allowed.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The run id is not 40 hex digits.
    #[error("bad run id {0:?}")]
    RunId(String),
    /// The master's name is empty or not printable ASCII.
    #[error("bad master name {0:?}")]
    Name(String),
    /// An epoch is not a plain decimal of at most `i64::MAX`.
    #[error(transparent)]
    Epoch(#[from] EpochError),
    /// The config epoch is above the sender's own current epoch: no
    /// sentinel can have adopted a configuration from an epoch it has not
    /// reached.
    #[error("config epoch {config} is above the sender's current epoch {current}")]
    ConfigAhead {
        /// The config epoch offered.
        config: u64,
        /// The sender's current epoch.
        current: u64,
    },
}

/// A hello's fields, checked; the strings borrow the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloFields<'a> {
    /// The sender's announced host.
    pub ip: &'a str,
    /// The sender's announced port.
    pub port: u16,
    /// The sender's run id (40 hex digits, any case).
    pub runid: &'a str,
    /// The sender's current epoch.
    pub current_epoch: u64,
    /// The master's name.
    pub name: &'a str,
    /// The master's host the sender advertises.
    pub master_ip: &'a str,
    /// Its port.
    pub master_port: u16,
    /// The epoch of that configuration (at most `current_epoch`).
    pub config_epoch: u64,
}

fn port_of(p: &str) -> Result<u16, HelloError> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(HelloError::Port(shown(p))),
    }
}

impl<'a> HelloFields<'a> {
    /// Parses `ip,port,runid,current_epoch,name,master_ip,master_port,config_epoch`;
    /// both hosts must pass [`check_host`] with `names`.
    pub fn parse(payload: &'a str, names: bool) -> Result<HelloFields<'a>, HelloError> {
        let mut fields = payload.splitn(9, ',');
        let mut next = || fields.next().ok_or(HelloError::Fields);
        let (ip, port, runid, current, name) = (next()?, next()?, next()?, next()?, next()?);
        let (mip, mport, config) = (next()?, next()?, next()?);
        if fields.next().is_some() {
            return Err(HelloError::Fields);
        }
        check_host(ip, names)?;
        check_host(mip, names)?;
        if !is_runid(runid) {
            return Err(HelloError::RunId(shown(runid)));
        }
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(HelloError::Name(shown(name)));
        }
        let current_epoch = parse_epoch(current.as_bytes())?;
        let config_epoch = parse_epoch(config.as_bytes())?;
        if config_epoch > current_epoch {
            return Err(HelloError::ConfigAhead {
                config: config_epoch,
                current: current_epoch,
            });
        }
        Ok(HelloFields {
            ip,
            port: port_of(port)?,
            runid,
            current_epoch,
            name,
            master_ip: mip,
            master_port: port_of(mport)?,
            config_epoch,
        })
    }
}

/// `SENTINEL is-master-down-by-addr <ip> <port> <epoch> <runid>`'s
/// arguments, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteRequest<'a> {
    /// About a master at `host:port`, in `epoch`, asking our vote for
    /// `candidate` (`None`: `*`, or anything that is not a run id, which
    /// asks for nothing that could be granted).
    About {
        /// The master's host, as sent (looked up, never stored).
        host: &'a str,
        /// Its port.
        port: u16,
        /// The asker's epoch.
        epoch: u64,
        /// Whom to vote for: a 40-hex run id, or `None`.
        candidate: Option<&'a str>,
    },
    /// An address no master can have (a port outside 0..=65535, a host
    /// that is not text): "not down, no vote", as Sentinel answers.
    Nowhere,
}

/// Why a vote request was refused: Sentinel's reply for a port or epoch
/// that is not an integer (`-ERR value is not an integer or out of
/// range`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ERR value is not an integer or out of range")]
pub struct NotAnInteger;

/// A number as Valkey's `string2ll` reads it.
fn strict_long(b: &[u8]) -> Option<i64> {
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    let canonical = match digits {
        [] => false,
        [b'0'] => digits.len() == b.len(),
        [first, ..] => *first != b'0' && digits.iter().all(u8::is_ascii_digit),
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

impl<'a> VoteRequest<'a> {
    /// Parses the four arguments. The port must be an integer (else
    /// [`NotAnInteger`], as Sentinel); the epoch a plain decimal of at most
    /// [`MAX_EPOCH`] (Sentinel takes any signed number, and `-1` would
    /// become its current epoch as 2^64-1).
    pub fn parse(args: [&'a [u8]; 4]) -> Result<VoteRequest<'a>, NotAnInteger> {
        let [ip, port, epoch, runid] = args;
        let port = strict_long(port).ok_or(NotAnInteger)?;
        let epoch = strict_long(epoch)
            .and_then(|_| parse_epoch(epoch).ok())
            .ok_or(NotAnInteger)?;
        let (Ok(host), Ok(port)) = (std::str::from_utf8(ip), u16::try_from(port)) else {
            return Ok(VoteRequest::Nowhere);
        };
        let candidate = std::str::from_utf8(runid).ok().filter(|r| is_runid(r));
        Ok(VoteRequest::About {
            host,
            port,
            epoch,
            candidate,
        })
    }
}
