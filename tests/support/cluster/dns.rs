//! Names resolved as a pod resolves them: an `A` query to the cluster's
//! DNS Service (CoreDNS behind kube-proxy), over TCP from inside the
//! node's netns (where [`Dialer`] can open only TCP connections).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::config::DNS_IP;
use super::netns::Dialer;

impl Dialer {
    /// The first IPv4 address of `name` (a fully qualified name) in the
    /// cluster's DNS.
    pub fn resolve(&self, name: &str) -> Result<Ipv4Addr, String> {
        let dns: SocketAddr = format!("{DNS_IP}:53").parse().unwrap();
        let mut s = self
            .connect(dns, Duration::from_secs(2))
            .map_err(|e| format!("DNS {dns}: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))
            .map_err(|e| e.to_string())?;
        let query = query(name, 0x5eed);
        let mut framed = (query.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&query);
        s.write_all(&framed).map_err(|e| e.to_string())?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).map_err(|e| e.to_string())?;
        let mut answer = vec![0u8; u16::from_be_bytes(len) as usize];
        s.read_exact(&mut answer).map_err(|e| e.to_string())?;
        first_a(&answer, 0x5eed).ok_or_else(|| format!("no A record for {name}"))
    }
}

/// A recursive query for the `A` records of `name`.
fn query(name: &str, id: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    // Flags: recursion desired; one question.
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    // The root; type A; class IN.
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// The first `A` record of the answer section of a reply to query `id`.
fn first_a(m: &[u8], id: u16) -> Option<Ipv4Addr> {
    let u16_at = |i: usize| Some(u16::from_be_bytes([*m.get(i)?, *m.get(i + 1)?]));
    if u16_at(0)? != id || m.get(3)? & 0x0f != 0 {
        return None;
    }
    let (questions, answers) = (u16_at(4)?, u16_at(6)?);
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(m, at)? + 4;
    }
    for _ in 0..answers {
        at = skip_name(m, at)?;
        let (kind, len) = (u16_at(at)?, u16_at(at + 8)? as usize);
        let data = m.get(at + 10..at + 10 + len)?;
        if kind == 1 && len == 4 {
            return Some(Ipv4Addr::new(data[0], data[1], data[2], data[3]));
        }
        at += 10 + len;
    }
    None
}

/// The offset just past the name at `at` (labels, or a pointer).
fn skip_name(m: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *m.get(at)?;
        match len {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => return Some(at + 2),
            l => at += 1 + l as usize,
        }
    }
}
