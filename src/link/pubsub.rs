//! The pub/sub link: a second connection per monitored instance,
//! subscribed to `__sentinel__:hello`, as Sentinel keeps one.
//!
//! On connect: `AUTH` like the command link, `CLIENT SETNAME
//! sentinel-<first 8 of our id>-pubsub`, `SUBSCRIBE __sentinel__:hello`.
//! Every message whose payload does not contain our run id goes to the
//! runtime as [`Input::Hello`] (our own hellos are dropped, as Sentinel's
//! substring test drops them). A link that breaks is reconnected, and so
//! is one that carries nothing at all for three `publish-period`s (6 s by
//! default; our own hellos arrive every period) once it is
//! `min-link-reconnect-period` old, as Sentinel's rule
//! ([`LinkSpec::pubsub_idle`]). Its failures are never reported: only the
//! command link decides whether the instance is up.

use std::time::Duration;

use tokio::time::Instant;
use valkyrie_protocol::{Frame, Limits};

use super::client::{ClientError, Conn, client_name, connect};
use super::hello::HELLO_CHANNEL;
use super::spec::{InputSender, LinkSpec};
use crate::core::{HelloVia, Input};

/// Longest hello payload accepted; longer messages are ignored (a hello
/// is about 130 bytes).
pub const MAX_HELLO: usize = 1024;

/// Attempts to connect start at least this far apart.
pub const ATTEMPT_GAP: Duration = Duration::from_secs(1);

/// First delay after a link that was subscribed broke.
const RETRY_MIN: Duration = Duration::from_millis(100);

/// The decoder's limits: only short messages are expected; anything
/// larger than these breaks the connection, which is then reconnected.
const LIMITS: Limits = Limits {
    max_depth: 4,
    max_bulk: 64 * 1024,
    max_aggregate: 16,
    max_line: 64 * 1024,
    max_frame: 256 * 1024,
    max_prealloc: 16 * 1024,
};

/// Keeps the pub/sub link of `spec`'s instance until the runtime stops
/// taking inputs (or the task is aborted, which the command link does
/// when it ends).
pub async fn run(spec: LinkSpec, inputs: InputSender) {
    let mut backoff = crate::backoff::Backoff::new(RETRY_MIN, ATTEMPT_GAP, 20);
    // Warn about a refusal once, not at every attempt.
    let mut warn = true;
    loop {
        let started = Instant::now();
        match connect(&spec.addr, spec.reply_timeout(), spec.tls.as_ref()).await {
            Ok(mut conn) => match session(&spec, &mut conn, &inputs, warn).await {
                End::Stop => return,
                End::Lost { subscribed, why } => {
                    tracing::debug!(group = %spec.group, instance = %spec.addr, "pub/sub link lost: {why}");
                    if subscribed {
                        backoff.reset();
                    }
                    warn = subscribed;
                }
            },
            Err(failure) => {
                tracing::debug!(group = %spec.group, instance = %spec.addr, "pub/sub link: connect failed: {failure:?}");
            }
        }
        let at = (started + ATTEMPT_GAP).max(Instant::now() + backoff.next_delay());
        tokio::time::sleep_until(at).await;
    }
}

/// How a session ended.
enum End {
    /// The runtime is gone.
    Stop,
    /// The connection is lost; `subscribed`: it got as far as the
    /// subscription.
    Lost { subscribed: bool, why: String },
}

fn lost(subscribed: bool, e: &ClientError) -> End {
    End::Lost {
        subscribed,
        why: e.to_string(),
    }
}

async fn session(spec: &LinkSpec, conn: &mut Conn, inputs: &InputSender, warn: bool) -> End {
    let timeout = spec.reply_timeout();
    conn.set_limits(LIMITS);
    conn.rename(spec.renamed.clone());
    if let Some(pass) = &spec.auth_pass {
        match conn.auth(spec.auth_user.as_deref(), pass, timeout).await {
            Ok(Some(e)) if warn => {
                tracing::warn!(group = %spec.group, instance = %spec.addr, "pub/sub link: AUTH refused: {e}");
            }
            Ok(_) => {}
            Err(e) => return lost(false, &e),
        }
    }
    if let Err(e) = conn
        .set_name(&client_name(&spec.myid, "pubsub"), timeout)
        .await
    {
        return lost(false, &e);
    }
    match conn.call(&["SUBSCRIBE", HELLO_CHANNEL], timeout).await {
        Ok(Frame::Array(items) | Frame::Push(items))
            if items.first().and_then(Frame::as_bytes).map(|b| b.as_ref())
                == Some(b"subscribe") => {}
        Ok(other) => {
            let why = format!("SUBSCRIBE refused: {other:?}");
            if warn {
                tracing::warn!(group = %spec.group, instance = %spec.addr, "pub/sub link: {why}");
            }
            return End::Lost {
                subscribed: false,
                why,
            };
        }
        Err(e) => return lost(false, &e),
    }
    let connected = Instant::now();
    let mut heard = connected;
    // Read at every turn: `SENTINEL DEBUG` may change them.
    let deadline = |heard: Instant| {
        let (idle, min_age) = spec.pubsub_idle();
        (heard + idle).max(connected + min_age)
    };
    loop {
        let frame = match tokio::time::timeout_at(deadline(heard), conn.next_frame()).await {
            // Lengthened meanwhile.
            Err(_) if Instant::now() < deadline(heard) => continue,
            Err(_) => {
                return End::Lost {
                    subscribed: true,
                    why: format!("nothing received for {:?}", heard.elapsed()),
                };
            }
            Ok(Err(e)) => return lost(true, &e),
            Ok(Ok(frame)) => frame,
        };
        heard = Instant::now();
        let Some(payload) = hello_of(&frame, &spec.myid) else {
            continue;
        };
        let input = Input::Hello {
            payload,
            via: HelloVia::Channel,
        };
        if inputs.send(input).await.is_err() {
            return End::Stop;
        }
    }
}

/// The payload of a pub/sub message (`["message", channel, payload]`, a
/// RESP2 array or a RESP3 push), unless it contains `myid` (our own
/// hello), is longer than [`MAX_HELLO`] or is not text.
pub fn hello_of(frame: &Frame, myid: &str) -> Option<String> {
    let (Frame::Array(items) | Frame::Push(items)) = frame else {
        return None;
    };
    let [kind, _channel, payload] = items.as_slice() else {
        return None;
    };
    if kind.as_bytes()?.as_ref() != b"message" {
        return None;
    }
    let payload = payload.as_bytes()?;
    if payload.len() > MAX_HELLO {
        return None;
    }
    let text = std::str::from_utf8(payload).ok()?;
    if !myid.is_empty() && text.contains(myid) {
        return None;
    }
    Some(text.to_string())
}
