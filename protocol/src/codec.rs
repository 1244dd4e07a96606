//! tokio-util codecs over the decoders and the encoder, for `Framed`
//! connections: [`FrameCodec`] for a client talking to Valkey (replies in,
//! commands out) and [`RequestCodec`] for a server (requests in, replies
//! out).

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::{DecodeError, Frame, FrameDecoder, Limits, Protocol, Request, RequestDecoder, encode};

/// Errors of a framed RESP connection.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The peer sent bytes that are not valid RESP or break a limit.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The connection failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The connection closed in the middle of a frame.
    #[error("connection closed in the middle of a frame")]
    Truncated,
}

/// Decodes frames and encodes frames in the negotiated protocol version.
#[derive(Debug, Clone, Default)]
pub struct FrameCodec {
    decoder: FrameDecoder,
    protocol: Protocol,
}

impl FrameCodec {
    /// A codec with `limits`, encoding for a `protocol` peer.
    pub fn new(limits: Limits, protocol: Protocol) -> FrameCodec {
        FrameCodec {
            decoder: FrameDecoder::with_limits(limits),
            protocol,
        }
    }

    /// Switches the protocol used for encoding (after `HELLO`).
    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
    }

    /// The protocol used for encoding.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        let frame = self.decoder.decode(src)?;
        if frame.is_none() {
            src.reserve(self.decoder.reserve_hint());
        }
        Ok(frame)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(CodecError::Truncated),
        }
    }
}

impl Encoder<&Frame> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        encode(frame, self.protocol, dst);
        Ok(())
    }
}

impl Encoder<Frame> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        encode(&frame, self.protocol, dst);
        Ok(())
    }
}

/// Decodes client requests (multibulk or inline) and encodes replies.
#[derive(Debug, Clone, Default)]
pub struct RequestCodec {
    decoder: RequestDecoder,
    protocol: Protocol,
}

impl RequestCodec {
    /// A codec with `limits`, replying in RESP2 until told otherwise.
    pub fn new(limits: Limits) -> RequestCodec {
        RequestCodec {
            decoder: RequestDecoder::with_limits(limits),
            protocol: Protocol::Resp2,
        }
    }

    /// Replaces the request limits (e.g. after `AUTH`).
    pub fn set_limits(&mut self, limits: Limits) {
        self.decoder.set_limits(limits);
    }

    /// Switches the protocol used for replies (after `HELLO`).
    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
    }

    /// The protocol used for replies.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }
}

impl Decoder for RequestCodec {
    type Item = Request;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Request>, CodecError> {
        let request = self.decoder.decode(src)?;
        if request.is_none() {
            src.reserve(self.decoder.reserve_hint());
        }
        Ok(request)
    }
}

impl Encoder<&Frame> for RequestCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        encode(frame, self.protocol, dst);
        Ok(())
    }
}

impl Encoder<Frame> for RequestCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        encode(&frame, self.protocol, dst);
        Ok(())
    }
}
