//! The peer link task: one command connection to one peer sentinel.
//!
//! Commands go out one at a time, each with the spec's reply timeout.
//! While one is in flight the job queue keeps being drained into
//! [`Pending`], which holds at most the newest question and the newest
//! hello per group: a slow peer delays answers, it does not make the
//! queue grow.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use valkyrie_protocol::Frame;

use crate::config::Secret;
use crate::core::{Addr, DownAnswer, Input};
use crate::link::client::{ClientError, Conn, client_name, connect};
use crate::link::{HelloJob, InputSender, hello};

/// Connection attempts start at least this far apart (Sentinel's pace).
pub const ATTEMPT_GAP: Duration = Duration::from_secs(1);

/// Runs a peer link until `jobs` is closed.
pub async fn run(spec: PeerSpec, mut jobs: mpsc::UnboundedReceiver<PeerJob>, inputs: InputSender) {
    // Delays of 1 to 1.2 s: links that failed together spread out.
    let mut delays = crate::backoff::Backoff::new(ATTEMPT_GAP, ATTEMPT_GAP, 20);
    loop {
        let started = Instant::now();
        let connected = with_jobs(
            connect(&spec.addr, spec.reply_timeout, spec.tls.as_ref()),
            &mut jobs,
            None,
        )
        .await;
        match connected {
            None => return,
            Some(Ok(mut conn)) => match session(&spec, &mut conn, &mut jobs, &inputs).await {
                End::Stop => return,
                End::Lost(e) => {
                    tracing::debug!(peer = %spec.runid, addr = %spec.addr, "peer link lost: {e}");
                }
            },
            Some(Err(failure)) => {
                tracing::debug!(peer = %spec.runid, addr = %spec.addr, "peer link: connect failed: {failure:?}");
            }
        }
        let down = Input::PeerLinkDown {
            runid: spec.runid.clone(),
        };
        if !matches!(
            with_jobs(inputs.send(down), &mut jobs, None).await,
            Some(Ok(()))
        ) {
            return;
        }
        let at = Instant::now().max(started + delays.next_delay().max(ATTEMPT_GAP));
        if with_jobs(tokio::time::sleep_until(at), &mut jobs, None)
            .await
            .is_none()
        {
            return;
        }
    }
}

/// A question to ask the peer.
#[derive(Debug)]
pub(super) struct Ask {
    pub(super) master: Addr,
    pub(super) epoch: u64,
    pub(super) candidate: Option<String>,
}

/// Jobs waiting for the connection: the newest question and the newest
/// hello of each group (groups are few; their number bounds these).
#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) asks: BTreeMap<String, Ask>,
    pub(super) hellos: BTreeMap<String, HelloJob>,
}

impl Pending {
    pub(super) fn add(&mut self, job: PeerJob) {
        match job {
            PeerJob::Hello(h) => {
                self.hellos.insert(h.group().to_string(), h);
            }
            PeerJob::Ask {
                group,
                master,
                epoch,
                candidate,
            } => {
                let ask = Ask {
                    master,
                    epoch,
                    candidate,
                };
                self.asks.insert(group, ask);
            }
        }
    }
}

/// Runs `fut` while taking jobs: into `pending` when given, else dropped
/// (nothing can be sent while disconnected). `None`: the jobs channel is
/// closed, the link must stop.
pub(super) async fn with_jobs<T>(
    fut: impl Future<Output = T>,
    jobs: &mut mpsc::UnboundedReceiver<PeerJob>,
    mut pending: Option<&mut Pending>,
) -> Option<T> {
    tokio::pin!(fut);
    loop {
        tokio::select! {
            biased;
            out = &mut fut => return Some(out),
            job = jobs.recv() => match (job, pending.as_deref_mut()) {
                (None, _) => return None,
                (Some(job), Some(p)) => p.add(job),
                (Some(_), None) => {}
            },
        }
    }
}

enum End {
    /// The jobs channel or the runtime is gone.
    Stop,
    /// The connection broke or a reply did not come in time.
    Lost(ClientError),
}

async fn session(
    spec: &PeerSpec,
    conn: &mut Conn,
    jobs: &mut mpsc::UnboundedReceiver<PeerJob>,
    inputs: &InputSender,
) -> End {
    let timeout = spec.reply_timeout;
    let mut pending = Pending::default();
    if let Some(pass) = &spec.auth_pass {
        let user = spec.auth_user.as_deref();
        match with_jobs(conn.auth(user, pass, timeout), jobs, Some(&mut pending)).await {
            None => return End::Stop,
            Some(Err(e)) => return End::Lost(e),
            Some(Ok(Some(e))) => {
                tracing::warn!(peer = %spec.runid, addr = %spec.addr, "AUTH refused by peer: {e}");
            }
            Some(Ok(None)) => {}
        }
    }
    let name = client_name(&spec.myid, "cmd");
    match with_jobs(conn.set_name(&name, timeout), jobs, Some(&mut pending)).await {
        None => return End::Stop,
        Some(Err(e)) => return End::Lost(e),
        Some(Ok(_)) => {}
    }
    let mut next_ping = Instant::now();
    loop {
        let input = if Instant::now() >= next_ping {
            next_ping = Instant::now() + spec.ping_period;
            let call = conn.call(&["PING"], timeout);
            match with_jobs(call, jobs, Some(&mut pending)).await {
                None => return End::Stop,
                Some(Err(e)) => return End::Lost(e),
                Some(Ok(frame)) => Some(Input::PeerPing {
                    runid: spec.runid.clone(),
                    valid: ping_valid(&frame),
                }),
            }
        } else if let Some((group, ask)) = pending.asks.pop_first() {
            let args = ask_args(&ask);
            let call = conn.call(&args, timeout);
            match with_jobs(call, jobs, Some(&mut pending)).await {
                None => return End::Stop,
                Some(Err(e)) => return End::Lost(e),
                Some(Ok(frame)) => match down_answer(&frame) {
                    Some(answer) => Some(Input::DownReply {
                        group,
                        runid: spec.runid.clone(),
                        answer,
                    }),
                    None => {
                        tracing::debug!(peer = %spec.runid, %group, "is-master-down-by-addr: unusable reply {frame:?}");
                        None
                    }
                },
            }
        } else if let Some((group, h)) = pending.hellos.pop_first() {
            let call = hello::publish(conn, &h, timeout);
            match with_jobs(call, jobs, Some(&mut pending)).await {
                None => return End::Stop,
                Some(Err(e)) => return End::Lost(e),
                Some(Ok(Frame::Integer(_))) => None,
                Some(Ok(other)) => {
                    tracing::debug!(peer = %spec.runid, %group, "hello not accepted: {other:?}");
                    None
                }
            }
        } else {
            tokio::select! {
                _ = tokio::time::sleep_until(next_ping) => {}
                job = jobs.recv() => match job {
                    None => return End::Stop,
                    Some(job) => pending.add(job),
                },
                e = conn.closed() => return End::Lost(e),
            }
            None
        };
        if let Some(input) = input {
            match with_jobs(inputs.send(input), jobs, Some(&mut pending)).await {
                Some(Ok(())) => {}
                None | Some(Err(_)) => return End::Stop,
            }
        }
    }
}

/// `SENTINEL is-master-down-by-addr <ip> <port> <epoch> <candidate|*>`,
/// in the spelling every Sentinel version accepts.
fn ask_args(ask: &Ask) -> [String; 6] {
    [
        "SENTINEL".into(),
        "is-master-down-by-addr".into(),
        ask.master.host.clone(),
        ask.master.port.to_string(),
        ask.epoch.to_string(),
        ask.candidate.clone().unwrap_or_else(|| "*".into()),
    ]
}

/// Whether a PING reply shows the peer available: `+PONG`, or an error
/// starting with `LOADING` or `MASTERDOWN` (Sentinel's rule). Any other
/// reply only shows the link is alive.
pub(crate) fn ping_valid(frame: &Frame) -> bool {
    match frame {
        Frame::Simple(s) => s.starts_with(b"PONG"),
        Frame::Error(e) | Frame::BulkError(e) => {
            e.starts_with(b"LOADING") || e.starts_with(b"MASTERDOWN")
        }
        _ => false,
    }
}

/// A well-formed `is-master-down-by-addr` reply: exactly
/// `[0|1, run id or "*", epoch >= 0]`. Anything else is no information.
pub(crate) fn down_answer(frame: &Frame) -> Option<DownAnswer> {
    let Frame::Array(items) = frame else {
        return None;
    };
    let [
        Frame::Integer(down),
        Frame::Bulk(leader),
        Frame::Integer(epoch),
    ] = items.as_slice()
    else {
        return None;
    };
    let down = match down {
        0 => false,
        1 => true,
        _ => return None,
    };
    let leader_epoch = u64::try_from(*epoch).ok()?;
    let leader = std::str::from_utf8(leader).ok()?;
    Some(DownAnswer {
        down,
        leader: (leader != "*").then(|| leader.to_string()),
        leader_epoch,
    })
}

/// How one peer link behaves.
#[derive(Clone, Debug)]
pub struct PeerSpec {
    /// The peer's run id.
    pub runid: String,
    /// Its address.
    pub addr: Addr,
    /// Our run id (for `CLIENT SETNAME`).
    pub myid: String,
    /// `AUTH <user> <pass>` (user set) or `AUTH <pass>`: `sentinel-user`
    /// and `sentinel-pass`, or else our `requirepass`, as Sentinel.
    pub auth_user: Option<String>,
    /// See `auth_user`.
    pub auth_pass: Option<Secret>,
    /// PING period: `min(down-after, 1 s)` over the groups sharing it.
    pub ping_period: Duration,
    /// How long a reply may take.
    pub reply_timeout: Duration,
    /// `tls-replication yes`: the link speaks TLS.
    pub tls: Option<crate::tls::Outbound>,
}

/// What the runtime asks a peer link to do.
#[derive(Clone, Debug)]
pub enum PeerJob {
    /// Publish a hello to the peer (`PUBLISH __sentinel__:hello …`).
    Hello(HelloJob),
    /// `SENTINEL is-master-down-by-addr <ip> <port> <epoch> <candidate|*>`.
    Ask {
        /// The group (to route the answer).
        group: String,
        /// The master's address as we know it.
        master: Addr,
        /// Our current epoch.
        epoch: u64,
        /// Our run id when asking for a vote.
        candidate: Option<String>,
    },
}
