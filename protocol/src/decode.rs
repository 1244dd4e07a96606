//! The streaming RESP2/RESP3 frame decoder.
//!
//! # Design
//!
//! Decoding is split in two passes over one frame:
//!
//! 1. a **tokenizer** walks the buffer and appends one [`Token`] per value
//!    (offsets into the buffer, numbers already parsed) to a reusable tape,
//!    keeping a stack of how many elements each open aggregate still needs;
//! 2. once the frame is complete, the buffer is split off and frozen once,
//!    and the tape is turned into a [`Frame`] tree whose strings are slices
//!    of that one buffer.
//!
//! The tokenizer keeps its position, the open-aggregate stack, a pending
//! bulk header and the point where a line search stopped, so when input
//! arrives in pieces it resumes exactly where it stopped. Nothing is ever
//! rescanned: a frame trickled in one byte at a time costs linear time.
//!
//! Nothing is allocated from a declared length. The tape grows by one token
//! per value actually present, and aggregate vectors are sized from the
//! tape, never from the header, so `*2000000000` costs a few bytes.

use bytes::{Bytes, BytesMut};

use crate::scan::{Number, read_number};
use crate::{DecodeError, Frame, Limits};

/// One value found by the tokenizer; offsets are relative to the start of
/// the frame being decoded.
#[derive(Clone, Copy, Debug)]
enum Token {
    Simple(usize, usize),
    Error(usize, usize),
    Integer(i64),
    Bulk(usize, usize),
    NullBulk,
    NullArray,
    Null,
    Boolean(bool),
    Double(f64),
    BigNumber(usize, usize),
    BulkError(usize, usize),
    Verbatim(usize, usize),
    Array(usize),
    Map(usize),
    Set(usize),
    Attribute(usize),
    Push(usize),
}

/// A resumable decoder of RESP2 and RESP3 frames.
///
/// Feed it the same growing buffer until it returns a frame; it consumes
/// exactly the bytes of each frame it returns and nothing else.
///
/// ```
/// use bytes::BytesMut;
/// use valkyrie_protocol::{Frame, FrameDecoder};
///
/// let mut decoder = FrameDecoder::new();
/// let mut buf = BytesMut::from(&b"*2\r\n$3\r\nfoo\r"[..]);
/// assert_eq!(decoder.decode(&mut buf), Ok(None));
/// buf.extend_from_slice(b"\n:7\r\n");
/// let frame = decoder.decode(&mut buf)?;
/// assert_eq!(frame, Some(Frame::Array(vec![Frame::bulk("foo"), Frame::Integer(7)])));
/// assert!(buf.is_empty());
/// # Ok::<(), valkyrie_protocol::DecodeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    limits: Limits,
    /// Offset of the next token to read.
    pos: usize,
    /// Where the CRLF search of an incomplete line resumes.
    scan: usize,
    /// A bulk-like header already read: (payload start, payload length).
    pending: Option<(usize, usize)>,
    /// Bytes still missing for the pending bulk, a hint for reservations.
    want: usize,
    tape: Vec<Token>,
    /// Elements still expected by each open aggregate, innermost last.
    stack: Vec<usize>,
}

impl Default for FrameDecoder {
    fn default() -> FrameDecoder {
        FrameDecoder::new()
    }
}

impl FrameDecoder {
    /// A decoder with [`Limits::DEFAULT`].
    pub fn new() -> FrameDecoder {
        FrameDecoder::with_limits(Limits::DEFAULT)
    }

    /// A decoder enforcing `limits`.
    pub fn with_limits(limits: Limits) -> FrameDecoder {
        FrameDecoder {
            limits,
            pos: 0,
            scan: 0,
            pending: None,
            want: 0,
            tape: Vec::new(),
            stack: Vec::new(),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Decodes one frame from the front of `src`, consuming its bytes.
    ///
    /// Returns `Ok(None)` when `src` holds only part of a frame; call again
    /// with the same buffer once more bytes were appended. After an error
    /// the stream cannot be resynchronised and the decoder is reset.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
        let Some(end) = self.check(src)? else {
            return Ok(None);
        };
        let bytes = src.split_to(end).freeze();
        let mut at = 0;
        let frame = build(&self.tape, &mut at, &bytes);
        self.tape.clear();
        frame.map(Some).ok_or(DecodeError::InvalidLength)
    }

    /// Decodes one frame from a complete, immutable buffer, returning the
    /// frame and the number of bytes it used. Strings are slices of `src`.
    pub fn decode_bytes(&mut self, src: &Bytes) -> Result<Option<(Frame, usize)>, DecodeError> {
        let Some(end) = self.check(src)? else {
            self.reset();
            return Ok(None);
        };
        let bytes = src.slice(..end);
        let mut at = 0;
        let frame = build(&self.tape, &mut at, &bytes);
        self.tape.clear();
        frame
            .map(|f| Some((f, end)))
            .ok_or(DecodeError::InvalidLength)
    }

    /// Validates the frame at the front of `buf` without building it.
    ///
    /// Returns its length once it is complete. Progress is kept between
    /// calls: pass the same buffer, grown, until a length comes back, then
    /// consume that many bytes (as [`decode`](Self::decode) does).
    pub fn check(&mut self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        if self.pos == 0 {
            // A new frame: the previous one's tokens are no longer needed.
            self.tape.clear();
        }
        match self.tokenize(buf) {
            Ok(Some(end)) => {
                self.pos = 0;
                self.scan = 0;
                Ok(Some(end))
            }
            Ok(None) => {
                if buf.len() > self.limits.max_frame {
                    self.reset();
                    return Err(DecodeError::FrameTooLarge {
                        limit: self.limits.max_frame,
                    });
                }
                Ok(None)
            }
            Err(e) => {
                self.reset();
                Err(e)
            }
        }
    }

    /// How many more bytes the current frame certainly needs (0 if unknown),
    /// capped by `max_prealloc`: what a reader may reserve ahead.
    pub fn reserve_hint(&self) -> usize {
        if self.pending.is_some() {
            self.want.min(self.limits.max_prealloc)
        } else {
            0
        }
    }

    /// Forgets any partially decoded frame.
    pub fn reset(&mut self) {
        self.pos = 0;
        self.scan = 0;
        self.pending = None;
        self.want = 0;
        self.tape.clear();
        self.stack.clear();
    }

    /// Advances the tokenizer; `Some(end)` once the frame is complete.
    fn tokenize(&mut self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        let limits = self.limits;
        loop {
            let pos = self.pos;
            let Some(&tag) = buf.get(pos) else {
                return Ok(None);
            };
            match tag {
                b'$' | b'!' | b'=' => {
                    let (start, len) = match self.pending {
                        Some(p) => p,
                        None => {
                            let Number::Done(n, next) =
                                read_number(buf, pos + 1, DecodeError::InvalidLength)?
                            else {
                                return Ok(None);
                            };
                            if n == -1 && tag == b'$' {
                                self.tape.push(Token::NullBulk);
                                self.pos = next;
                                if let Some(end) = self.finish_element()? {
                                    return Ok(Some(end));
                                }
                                continue;
                            }
                            match usize::try_from(n) {
                                Ok(len) if len <= limits.max_bulk => (next, len),
                                _ => {
                                    return Err(DecodeError::BulkTooLong {
                                        len: n,
                                        limit: limits.max_bulk,
                                    });
                                }
                            }
                        }
                    };
                    let end = start
                        .checked_add(len)
                        .and_then(|e| e.checked_add(2))
                        .filter(|&e| e <= limits.max_frame)
                        .ok_or(DecodeError::FrameTooLarge {
                            limit: limits.max_frame,
                        })?;
                    if buf.len() < end {
                        self.pending = Some((start, len));
                        self.want = end - buf.len();
                        return Ok(None);
                    }
                    self.pending = None;
                    if buf[end - 2] != b'\r' || buf[end - 1] != b'\n' {
                        return Err(DecodeError::MissingCrlf);
                    }
                    let stop = start + len;
                    self.tape.push(match tag {
                        b'$' => Token::Bulk(start, stop),
                        b'!' => Token::BulkError(start, stop),
                        _ => {
                            if len < 4 || buf[start + 3] != b':' {
                                return Err(DecodeError::InvalidVerbatim);
                            }
                            Token::Verbatim(start, stop)
                        }
                    });
                    self.pos = end;
                }
                b'*' | b'%' | b'~' | b'|' | b'>' => {
                    let Number::Done(n, next) =
                        read_number(buf, pos + 1, DecodeError::InvalidLength)?
                    else {
                        return Ok(None);
                    };
                    self.pos = next;
                    if n == -1 && tag == b'*' {
                        self.tape.push(Token::NullArray);
                    } else {
                        let len = usize::try_from(n).map_err(|_| DecodeError::InvalidLength)?;
                        if len > limits.max_aggregate {
                            return Err(DecodeError::AggregateTooLong {
                                len: n,
                                limit: limits.max_aggregate,
                            });
                        }
                        if self.stack.len() >= limits.depth() {
                            return Err(DecodeError::DepthExceeded {
                                limit: limits.depth(),
                            });
                        }
                        // Maps and attributes hold pairs; an attribute is
                        // also followed by the frame it annotates.
                        let (token, count) = match tag {
                            b'*' => (Token::Array(len), Some(len)),
                            b'~' => (Token::Set(len), Some(len)),
                            b'>' => (Token::Push(len), Some(len)),
                            b'%' => (Token::Map(len), len.checked_mul(2)),
                            _ => (
                                Token::Attribute(len),
                                len.checked_mul(2).and_then(|c| c.checked_add(1)),
                            ),
                        };
                        let count = count.ok_or(DecodeError::AggregateTooLong {
                            len: n,
                            limit: limits.max_aggregate,
                        })?;
                        self.tape.push(token);
                        if count > 0 {
                            self.stack.push(count);
                            continue;
                        }
                    }
                }
                b':' => {
                    let Number::Done(n, next) =
                        read_number(buf, pos + 1, DecodeError::InvalidInteger)?
                    else {
                        return Ok(None);
                    };
                    self.tape.push(Token::Integer(n));
                    self.pos = next;
                }
                b'#' => {
                    let Some(v) = buf.get(pos + 1..pos + 4) else {
                        // Reject early what can never become valid.
                        let seen = &buf[pos + 1..];
                        let ok = matches!(seen, [] | [b't' | b'f'] | [b't' | b'f', b'\r']);
                        return if ok {
                            Ok(None)
                        } else {
                            Err(DecodeError::InvalidBoolean)
                        };
                    };
                    let value = match v {
                        b"t\r\n" => true,
                        b"f\r\n" => false,
                        _ => return Err(DecodeError::InvalidBoolean),
                    };
                    self.tape.push(Token::Boolean(value));
                    self.pos = pos + 4;
                }
                b'_' => {
                    let Some(v) = buf.get(pos + 1..pos + 3) else {
                        let seen = &buf[pos + 1..];
                        return if seen.is_empty() || seen == b"\r" {
                            Ok(None)
                        } else {
                            Err(DecodeError::InvalidNull)
                        };
                    };
                    if v != b"\r\n" {
                        return Err(DecodeError::InvalidNull);
                    }
                    self.tape.push(Token::Null);
                    self.pos = pos + 3;
                }
                b'+' | b'-' | b',' | b'(' => {
                    // Lines end at the first LF, which must follow a CR; a
                    // CR or LF inside is invalid (RESP forbids them, and the
                    // encoder could not reproduce them).
                    let start = pos + 1;
                    let from = self.scan.max(start);
                    let Some(nl) = buf.get(from..).and_then(|b| memchr::memchr(b'\n', b)) else {
                        // A trailing CR may yet start the terminator.
                        let seen = buf.len() - start - usize::from(buf.ends_with(b"\r"));
                        if seen > limits.max_line {
                            return Err(DecodeError::LineTooLong {
                                limit: limits.max_line,
                            });
                        }
                        self.scan = buf.len();
                        return Ok(None);
                    };
                    let nl = from + nl;
                    let terminated = nl > start && buf[nl - 1] == b'\r';
                    let cr = if terminated { nl - 1 } else { nl };
                    if cr - start > limits.max_line {
                        return Err(DecodeError::LineTooLong {
                            limit: limits.max_line,
                        });
                    }
                    if !terminated || memchr::memchr(b'\r', &buf[start..cr]).is_some() {
                        return Err(DecodeError::InvalidLine);
                    }
                    let line = &buf[pos + 1..cr];
                    self.tape.push(match tag {
                        b'+' => Token::Simple(pos + 1, cr),
                        b'-' => Token::Error(pos + 1, cr),
                        b',' => Token::Double(parse_double(line)?),
                        _ => {
                            check_big_number(line)?;
                            Token::BigNumber(pos + 1, cr)
                        }
                    });
                    self.scan = 0;
                    self.pos = cr + 2;
                }
                other => return Err(DecodeError::InvalidType(other)),
            }
            if let Some(end) = self.finish_element()? {
                return Ok(Some(end));
            }
        }
    }

    /// Counts one finished element against the open aggregates; returns
    /// the frame's end once the outermost one is complete.
    #[inline]
    fn finish_element(&mut self) -> Result<Option<usize>, DecodeError> {
        if self.pos > self.limits.max_frame {
            return Err(DecodeError::FrameTooLarge {
                limit: self.limits.max_frame,
            });
        }
        while let Some(remaining) = self.stack.last_mut() {
            *remaining -= 1;
            if *remaining > 0 {
                return Ok(None);
            }
            self.stack.pop();
        }
        Ok(Some(self.pos))
    }
}

/// Parses a RESP3 double: a decimal or exponent number, `inf`, `-inf` or
/// `nan` (any case, as Valkey's own `strtod` accepts them).
fn parse_double(line: &[u8]) -> Result<f64, DecodeError> {
    let text = std::str::from_utf8(line).map_err(|_| DecodeError::InvalidDouble)?;
    match text {
        "inf" | "+inf" => return Ok(f64::INFINITY),
        "-inf" => return Ok(f64::NEG_INFINITY),
        "nan" | "-nan" => return Ok(f64::NAN),
        _ => {}
    }
    // Rust's parser also takes "infinity" and friends; RESP does not.
    if !text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
    {
        return Err(DecodeError::InvalidDouble);
    }
    text.parse::<f64>().map_err(|_| DecodeError::InvalidDouble)
}

fn check_big_number(line: &[u8]) -> Result<(), DecodeError> {
    let digits = line.strip_prefix(b"-").unwrap_or(line);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(DecodeError::InvalidBigNumber);
    }
    Ok(())
}

/// Turns the tape into a frame. `None` only if the tape is malformed, which
/// the tokenizer rules out; the caller turns it into an error, not a panic.
fn build(tape: &[Token], at: &mut usize, bytes: &Bytes) -> Option<Frame> {
    let token = *tape.get(*at)?;
    *at += 1;
    Some(match token {
        Token::Simple(s, e) => Frame::Simple(bytes.slice(s..e)),
        Token::Error(s, e) => Frame::Error(bytes.slice(s..e)),
        Token::Integer(n) => Frame::Integer(n),
        Token::Bulk(s, e) => Frame::Bulk(bytes.slice(s..e)),
        Token::NullBulk => Frame::NullBulk,
        Token::NullArray => Frame::NullArray,
        Token::Null => Frame::Null,
        Token::Boolean(b) => Frame::Boolean(b),
        Token::Double(d) => Frame::Double(d),
        Token::BigNumber(s, e) => Frame::BigNumber(bytes.slice(s..e)),
        Token::BulkError(s, e) => Frame::BulkError(bytes.slice(s..e)),
        Token::Verbatim(s, e) => {
            let tag = bytes.get(s..s + 3)?;
            Frame::Verbatim {
                format: [tag[0], tag[1], tag[2]],
                text: bytes.slice(s + 4..e),
            }
        }
        Token::Array(n) => Frame::Array(build_list(tape, at, bytes, n)?),
        Token::Set(n) => Frame::Set(build_list(tape, at, bytes, n)?),
        Token::Push(n) => Frame::Push(build_list(tape, at, bytes, n)?),
        Token::Map(n) => Frame::Map(build_pairs(tape, at, bytes, n)?),
        Token::Attribute(n) => {
            let attributes = build_pairs(tape, at, bytes, n)?;
            let data = Box::new(build(tape, at, bytes)?);
            Frame::Attribute { attributes, data }
        }
    })
}

fn build_list(tape: &[Token], at: &mut usize, bytes: &Bytes, n: usize) -> Option<Vec<Frame>> {
    // The tape holds at least one token per element, so this capacity is
    // backed by bytes that really arrived.
    let mut items = Vec::with_capacity(n.min(tape.len() - *at));
    for _ in 0..n {
        items.push(build(tape, at, bytes)?);
    }
    Some(items)
}

fn build_pairs(
    tape: &[Token],
    at: &mut usize,
    bytes: &Bytes,
    n: usize,
) -> Option<Vec<(Frame, Frame)>> {
    let mut pairs = Vec::with_capacity(n.min((tape.len() - *at) / 2));
    for _ in 0..n {
        let key = build(tape, at, bytes)?;
        let value = build(tape, at, bytes)?;
        pairs.push((key, value));
    }
    Some(pairs)
}
