//! One task per monitored Valkey instance: keeps a connection, PINGs with a
//! period of at most a tenth of `down-after` (and at most `ping-period`),
//! asks for INFO (first thing after every connect, so a restarted process
//! is seen at once, then every `info-period`), and executes the commands
//! the core asks for. Everything it learns goes back to the runtime as
//! core [`Input`]s. A `SENTINEL DEBUG` change of those periods applies at
//! once ([`LinkSpec::timers`]).
//!
//! Failures are classified for the core: refused, connect timeout, reset,
//! *silent* — a fresh connection succeeds but nothing answers, which is a
//! hung process rather than a network problem — and *stalled*: an
//! established connection that answered before goes quiet. A stall proves
//! nothing by itself (a cut path looks the same as a hung process), so the
//! link drops the connection and the next fresh connect classifies it.

pub mod client;
pub mod hello;
pub mod pubsub;
mod resolved;
mod spec;
mod texts;

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use valkyrie_protocol::Frame;

use crate::core::{Addr, Command, InfoReport, Input, LinkFailure, Reply};
use client::{ClientError, Conn, client_name, connect, text};
pub use hello::HelloJob;
pub use resolved::Resolved;
pub use spec::{
    FAST_RETRY_WINDOW, INPUT_QUEUE, InputSender, Job, LinkSpec, RECONNECT_FAST_MAX, RECONNECT_MAX,
    RECONNECT_MIN,
};
pub use texts::InfoTexts;

/// Runs a link until `jobs` is closed. Its pub/sub link runs beside it,
/// and ends with it.
pub async fn run(spec: LinkSpec, mut jobs: mpsc::UnboundedReceiver<Job>, inputs: InputSender) {
    let _pubsub = AbortOnDrop(tokio::spawn(pubsub::run(spec.clone(), inputs.clone())));
    let mut backoff = Backoff::new(seed_for(&spec.addr));
    loop {
        let connected = connect(&spec.addr, spec.reply_timeout(), spec.tls.as_ref()).await;
        let failure = match connected {
            Ok(mut conn) => {
                if let Some(ip) = conn.peer_ip() {
                    spec.resolved.put(&spec.addr.host, ip);
                }
                match session(&spec, &mut conn, &mut jobs, &inputs).await {
                    SessionEnd::Stop => return,
                    SessionEnd::Failed { failure, answered } => {
                        if answered {
                            backoff.answered(Instant::now());
                        }
                        failure
                    }
                }
            }
            Err(failure) => failure,
        };
        if send(&inputs, link_down(&spec, failure)).await.is_err() {
            return;
        }
        let wait = backoff.next(Instant::now());
        if wait_or_jobs(wait, &mut jobs, &spec, &inputs).await.is_err() {
            return;
        }
    }
}

/// Aborts a task when dropped: the pub/sub link ends with the command
/// link, however that ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reconnect delays: fast (10 ms doubling to 100 ms) for
/// [`FAST_RETRY_WINDOW`] after a connection that answered broke, then
/// doubling to [`RECONNECT_MAX`]; each delay jittered by ±20% so links
/// that failed together do not reconnect in step. Connections that were
/// accepted but answered nothing (a hung process) count as failed
/// attempts: they back off like refusals. The delays themselves are
/// [`crate::backoff::Backoff`]'s; this adds the fast window.
#[derive(Debug)]
pub struct Backoff {
    delays: crate::backoff::Backoff,
    answered_at: Option<Instant>,
}

impl Backoff {
    /// A backoff for an instance never reached yet.
    pub fn new(seed: u64) -> Backoff {
        let mut delays = crate::backoff::Backoff::with_seed(RECONNECT_MIN, RECONNECT_MAX, 20, seed);
        delays.set_next(RECONNECT_FAST_MAX);
        Backoff {
            delays,
            answered_at: None,
        }
    }

    /// A connection answered and then broke at `now`: retry fast again.
    pub fn answered(&mut self, now: Instant) {
        self.answered_at = Some(now);
        self.delays.reset();
    }

    /// The delay before the next attempt, after one failed at `now`.
    pub fn next(&mut self, now: Instant) -> Duration {
        let fast = self
            .answered_at
            .is_some_and(|t| now.saturating_duration_since(t) < FAST_RETRY_WINDOW);
        let cap = if fast {
            RECONNECT_FAST_MAX
        } else {
            RECONNECT_MAX
        };
        self.delays.next_capped(cap)
    }
}

enum SessionEnd {
    Stop,
    /// The connection failed; `answered`: it had replied at least once.
    Failed {
        failure: LinkFailure,
        answered: bool,
    },
}

impl SessionEnd {
    fn failed(e: &ClientError, fresh: Fresh) -> SessionEnd {
        SessionEnd::Failed {
            failure: failure_of(e, fresh),
            answered: fresh == Fresh::No,
        }
    }
}

async fn session(
    spec: &LinkSpec,
    conn: &mut Conn,
    jobs: &mut mpsc::UnboundedReceiver<Job>,
    inputs: &InputSender,
) -> SessionEnd {
    let timeout = spec.reply_timeout();
    conn.rename(spec.renamed.clone());
    // A fresh connection that does not answer its first command is a hung
    // process: "silent after connect". Once it has answered, a timeout is
    // only a stall (see `failure_of`).
    if let Some(pass) = &spec.auth_pass {
        match conn.auth(spec.auth_user.as_deref(), pass, timeout).await {
            Ok(Some(e)) => {
                tracing::warn!(group = %spec.group, instance = %spec.addr, "AUTH refused: {e}");
            }
            Ok(None) => {}
            Err(e) => return SessionEnd::failed(&e, Fresh::Yes),
        }
    }
    let fresh = if spec.auth_pass.is_some() {
        Fresh::No
    } else {
        Fresh::Yes
    };
    match info(spec, conn).await {
        Ok(Some(input)) => {
            if send(inputs, input).await.is_err() {
                return SessionEnd::Stop;
            }
        }
        Ok(None) => {}
        Err(e) => return SessionEnd::failed(&e, fresh),
    }
    // Named after the first command answered, so that one still tells a
    // hung process from a stalled connection. The reply does not matter
    // (`CLIENT` may be renamed away).
    match conn
        .set_name(&client_name(&spec.myid, "cmd"), timeout)
        .await
    {
        Ok(Frame::Error(e) | Frame::BulkError(e)) => {
            tracing::debug!(group = %spec.group, instance = %spec.addr, "CLIENT SETNAME refused: {}", String::from_utf8_lossy(&e));
        }
        Ok(_) => {}
        Err(e) => return SessionEnd::failed(&e, Fresh::No),
    }
    let mut ping = tokio::time::interval(spec.ping_period());
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // One timer for the next INFO, moved when the group's urgency flips,
    // rather than a 100 ms interval that found nothing to do nine times
    // in ten: at 1,000 instances that was 10,000 wake-ups a second.
    let mut urgent = spec.urgent.clone();
    let mut timers = spec.timers.clone();
    timers.borrow_and_update();
    let mut last_info = Instant::now();
    let next_info =
        tokio::time::sleep_until(last_info + spec.info_period(*urgent.borrow_and_update()));
    tokio::pin!(next_info);
    let rtt = crate::metrics::ping_rtt(&spec.group, &spec.addr);
    loop {
        // In this order: the core's commands run before periodic work, so
        // the kills queued with a promotion land before an INFO that could
        // confirm it (see `Group::promote`).
        let wake = tokio::select! {
            biased;
            e = conn.closed() => Wake::Closed(e),
            job = jobs.recv() => Wake::Job(job),
            _ = ping.tick() => Wake::Ping,
            () = &mut next_info => Wake::Info,
            // Sender gone (the group was removed): the branch stays idle
            // and the jobs channel ends the session.
            Ok(()) = urgent.changed() => Wake::Urgent,
            // `SENTINEL DEBUG` changed the periods.
            Ok(()) = timers.changed() => Wake::Timers,
        };
        match wake {
            // The process died or the connection broke: report it now, not
            // at the next PING, so a quick restart is caught before its
            // replicas resync from it.
            Wake::Closed(e) => return SessionEnd::failed(&e, Fresh::No),
            Wake::Ping => match timed(&rtt, conn.call(&["PING"], timeout)).await {
                Ok(Frame::Simple(_)) | Ok(Frame::Bulk(_)) => {
                    let input = Input::PingOk {
                        group: spec.group.clone(),
                        addr: spec.addr.clone(),
                    };
                    if send(inputs, input).await.is_err() {
                        return SessionEnd::Stop;
                    }
                }
                // As Sentinel, `-LOADING` and `-MASTERDOWN` are replies of
                // an instance at work: neither proof of life nor refusal.
                Ok(Frame::Error(e) | Frame::BulkError(e))
                    if e.starts_with(b"LOADING") || e.starts_with(b"MASTERDOWN") => {}
                // Any other error (`-NOAUTH`, `-MISCONF`, `-BUSY`, a
                // renamed PING) is a refusal: INFO replies no longer keep
                // the instance up.
                Ok(Frame::Error(_) | Frame::BulkError(_)) => {
                    let input = Input::PingRefused {
                        group: spec.group.clone(),
                        addr: spec.addr.clone(),
                    };
                    if send(inputs, input).await.is_err() {
                        return SessionEnd::Stop;
                    }
                }
                Ok(_) => {}
                Err(e) => return SessionEnd::failed(&e, Fresh::No),
            },
            // Trouble began (INFO is due at once if the last one is older
            // than the urgent period) or ended.
            Wake::Urgent => {
                let period = spec.info_period(*urgent.borrow_and_update());
                next_info.as_mut().reset(last_info + period);
            }
            Wake::Timers => {
                timers.borrow_and_update();
                let period = spec.ping_period();
                if period != ping.period() {
                    ping = tokio::time::interval_at(Instant::now() + period, period);
                    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
                }
                let period = spec.info_period(*urgent.borrow());
                next_info.as_mut().reset(last_info + period);
            }
            Wake::Info => {
                match info(spec, conn).await {
                    Ok(Some(input)) => {
                        last_info = Instant::now();
                        if send(inputs, input).await.is_err() {
                            return SessionEnd::Stop;
                        }
                    }
                    Ok(None) => last_info = Instant::now(),
                    Err(e) => return SessionEnd::failed(&e, Fresh::No),
                }
                let period = spec.info_period(*urgent.borrow_and_update());
                next_info.as_mut().reset(last_info + period);
            }
            Wake::Job(None) => return SessionEnd::Stop,
            Wake::Job(Some(Job::Hello(h))) => match hello::publish(conn, &h, timeout).await {
                Ok(Frame::Integer(_)) => {}
                Ok(other) => {
                    tracing::debug!(group = %spec.group, instance = %spec.addr, "hello not published: {other:?}");
                }
                // The reply is lost or the connection broke: like any
                // command, the connection cannot be trusted any more.
                Err(e) => return SessionEnd::failed(&e, Fresh::No),
            },
            Wake::Job(Some(Job::Command { token, command })) => {
                let job = (token, command);
                let reply = execute(conn, &job.1, timeout).await;
                let broken = match &reply {
                    Err(e @ (ClientError::Broken(_) | ClientError::Timeout)) => {
                        Some(failure_of(e, Fresh::No))
                    }
                    _ => None,
                };
                let reply = match reply {
                    Ok(r) => r,
                    Err(e) => Reply::Failed(e.to_string()),
                };
                let input = Input::Reply {
                    group: spec.group.clone(),
                    addr: spec.addr.clone(),
                    token: job.0,
                    reply,
                };
                if send(inputs, input).await.is_err() {
                    return SessionEnd::Stop;
                }
                if let Some(failure) = broken {
                    return SessionEnd::Failed {
                        failure,
                        answered: true,
                    };
                }
            }
        }
    }
}

/// Runs a PING and records its round trip when a reply came (a timeout
/// or a broken link is a link failure, not a latency).
async fn timed<T, E>(
    rtt: &metrics::Histogram,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let sent = Instant::now();
    let reply = call.await;
    if reply.is_ok() {
        rtt.record(sent.elapsed().as_secs_f64());
    }
    reply
}

enum Wake {
    Ping,
    Info,
    Urgent,
    Timers,
    Job(Option<Job>),
    Closed(ClientError),
}

/// While disconnected, jobs cannot be executed: they fail at once so the
/// core is not left waiting.
async fn wait_or_jobs(
    wait: Duration,
    jobs: &mut mpsc::UnboundedReceiver<Job>,
    spec: &LinkSpec,
    inputs: &InputSender,
) -> Result<(), ()> {
    let deadline = tokio::time::sleep(wait);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => return Ok(()),
            job = jobs.recv() => {
                let Some(job) = job else { return Err(()) };
                // A hello while disconnected is simply not published.
                let Job::Command { token, .. } = job else { continue };
                let input = Input::Reply {
                    group: spec.group.clone(),
                    addr: spec.addr.clone(),
                    token,
                    reply: Reply::Failed("not connected".into()),
                };
                send(inputs, input).await?;
            }
        }
    }
}

/// Whether a connection has not answered anything yet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fresh {
    Yes,
    No,
}

/// A timeout on a fresh connection means the process accepted the connect
/// and answered nothing: hung. A timeout on a connection that answered
/// before means only that it went quiet — a hung process or a cut path,
/// which the next fresh connect tells apart. Anything else means the
/// connection broke.
fn failure_of(e: &ClientError, fresh: Fresh) -> LinkFailure {
    match (e, fresh) {
        (ClientError::Timeout, Fresh::Yes) => LinkFailure::Silent,
        (ClientError::Timeout, Fresh::No) => LinkFailure::Stalled,
        _ => LinkFailure::Reset,
    }
}

async fn info(spec: &LinkSpec, conn: &mut Conn) -> Result<Option<Input>, ClientError> {
    let reply = conn
        .call(
            &["INFO", "server", "replication", "keyspace"],
            spec.reply_timeout(),
        )
        .await?;
    let text = match text(&reply) {
        Ok(t) => t,
        Err(e) => {
            tracing::debug!(group = %spec.group, instance = %spec.addr, "INFO refused: {e}");
            return Ok(None);
        }
    };
    spec.texts.put(&spec.group, &spec.addr, &text);
    match InfoReport::parse(&text) {
        Ok(info) => Ok(Some(Input::Report {
            group: spec.group.clone(),
            addr: spec.addr.clone(),
            info,
        })),
        Err(e) => {
            tracing::warn!(group = %spec.group, instance = %spec.addr, "{e}");
            Ok(None)
        }
    }
}

async fn execute(
    conn: &mut Conn,
    command: &Command,
    timeout: Duration,
) -> Result<Reply, ClientError> {
    let args: Vec<String> = match command {
        Command::ReplicaOfNoOne => vec!["REPLICAOF".into(), "NO".into(), "ONE".into()],
        Command::ReplicaOf(a) => vec!["REPLICAOF".into(), a.host.clone(), a.port.to_string()],
        Command::KillNormalClients => vec![
            "CLIENT".into(),
            "KILL".into(),
            "TYPE".into(),
            "normal".into(),
        ],
        Command::KillPubsubClients => vec![
            "CLIENT".into(),
            "KILL".into(),
            "TYPE".into(),
            "pubsub".into(),
        ],
        Command::AskInfo => vec![
            "INFO".into(),
            "server".into(),
            "replication".into(),
            "keyspace".into(),
        ],
        Command::PauseWrites { ms } => vec![
            "CLIENT".into(),
            "PAUSE".into(),
            ms.to_string(),
            "WRITE".into(),
        ],
        Command::Unpause => vec!["CLIENT".into(), "UNPAUSE".into()],
        // One CONFIG SET: the three apply together or not at all.
        Command::SetWriteFence(f) => vec![
            "CONFIG".into(),
            "SET".into(),
            "min-replicas-to-write".into(),
            f.replicas.to_string(),
            "min-replicas-max-lag".into(),
            f.lag_secs.to_string(),
            "repl-ping-replica-period".into(),
            f.ping_secs.to_string(),
        ],
    };
    let frame = conn.call(&args, timeout).await?;
    let reply = match (&frame, command) {
        (Frame::Error(e), _) | (Frame::BulkError(e), _) => {
            Reply::Failed(String::from_utf8_lossy(e).into_owned())
        }
        (frame, Command::AskInfo) => match text(frame).map(|t| InfoReport::parse(&t)) {
            Ok(Ok(info)) => Reply::Report(info),
            Ok(Err(e)) => Reply::Failed(e.to_string()),
            Err(e) => Reply::Failed(e),
        },
        _ => Reply::Ok,
    };
    // Like Sentinel, make a role change survive a restart of the node when
    // it has a config file; without one the error is expected.
    if matches!(command, Command::ReplicaOf(_) | Command::ReplicaOfNoOne) && reply == Reply::Ok {
        let _ = conn.call(&["CONFIG", "REWRITE"], timeout).await;
    }
    Ok(reply)
}

fn link_down(spec: &LinkSpec, failure: LinkFailure) -> Input {
    Input::LinkDown {
        group: spec.group.clone(),
        addr: spec.addr.clone(),
        failure,
    }
}

/// Hands an input to the runtime. The channel is bounded: a runtime that
/// falls behind slows its links down instead of queueing without limit.
async fn send(inputs: &InputSender, input: Input) -> Result<(), ()> {
    inputs.send(input).await.map_err(|_| ())
}

fn seed_for(addr: &Addr) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in addr.host.bytes().chain(addr.port.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h | 1
}

#[cfg(test)]
pub(crate) mod tests;
