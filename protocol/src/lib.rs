//! RESP2/RESP3 for Valkyrie: the wire format every other part speaks.
//!
//! # Layout
//!
//! - [`Frame`]: one RESP value, every RESP2 and RESP3 type.
//! - [`FrameDecoder`]: resumable streaming decoder of frames (replies from
//!   Valkey, or any RESP stream), zero-copy into the read buffer.
//! - [`RequestDecoder`]: what a server reads: multibulk commands and inline
//!   commands, with Valkey's rules and error texts.
//! - [`encode()`]: the encoder, with Valkey's RESP3→RESP2 downgrade.
//! - [`FrameCodec`], [`RequestCodec`]: tokio-util codecs over the above.
//! - [`Limits`]: depth, lengths, line and frame sizes, preallocation.
//! - [`glob`]: Valkey's glob matcher (`stringmatchlen`), for channel and
//!   group patterns.
//! - [`index`]: the topology-push ("index") protocol: wire format, parser,
//!   ordering rule and (feature `client`) an async client.
//!
//! Why the decoders are hand-written byte state machines rather than nom
//! parsers is recorded, with the measurements, in `docs/benchmarks.md`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod codec;
mod decode;
mod encode;
mod error;
mod frame;
pub mod glob;
pub mod index;
mod limits;
pub mod peer;
mod request;
mod scan;

pub use codec::{CodecError, FrameCodec, RequestCodec};
pub use decode::FrameDecoder;
pub use encode::{Protocol, encode, encode_command, to_bytes};
pub use error::DecodeError;
pub use frame::{Frame, Kind};
pub use limits::{DEPTH_CEILING, Limits};
pub use request::{Argv, Request, RequestDecoder, split_line};
