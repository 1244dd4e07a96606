//! Server-side request decoding: commands as Valkey reads them.
//!
//! A request is either a **multibulk** (`*<n>\r\n` followed by `n` bulk
//! strings) or, when the first byte is not `*`, an **inline** command: one
//! line split into arguments with Valkey's quoting rules, so `PING` typed
//! into `nc` or `telnet` works.
//!
//! [`RequestDecoder::parse`] is the zero-allocation path: it records the
//! argument positions and leaves the bytes where they are;
//! [`RequestDecoder::decode`] builds a [`Request`] of `Bytes` slices of the
//! read buffer. Like the frame decoder it resumes where it stopped.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::scan::{Number, read_number};
use crate::{DecodeError, Limits};

/// A decoded command: its arguments, the command name first.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Request {
    /// The arguments, in order.
    pub args: Vec<Bytes>,
}

/// A resumable decoder of client requests (multibulk and inline).
#[derive(Debug, Clone)]
pub struct RequestDecoder {
    limits: Limits,
    /// Offset of the next unread byte of the current request.
    pos: usize,
    /// Where the newline search of an incomplete inline line resumes.
    scan: usize,
    /// Arguments still expected by the current multibulk, if one started.
    remaining: Option<usize>,
    /// A bulk header already read: (payload start, payload length).
    pending: Option<(usize, usize)>,
    want: usize,
    /// Argument positions: into the input, or into `inline` for inline
    /// requests (whose quoting may change the bytes).
    args: Vec<Range<usize>>,
    inline: Vec<u8>,
    from_inline: bool,
}

impl Default for RequestDecoder {
    fn default() -> RequestDecoder {
        RequestDecoder::new()
    }
}

/// The arguments of the request last returned by [`RequestDecoder::parse`],
/// borrowed from the input buffer.
#[derive(Debug, Clone, Copy)]
pub struct Argv<'a> {
    base: &'a [u8],
    ranges: &'a [Range<usize>],
}

impl<'a> Argv<'a> {
    /// Number of arguments (0 for an empty request, which Valkey ignores).
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether the request had no arguments.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Argument `i`.
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        self.ranges.get(i).and_then(|r| self.base.get(r.clone()))
    }

    /// All arguments in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let base = self.base;
        self.ranges.iter().filter_map(move |r| base.get(r.clone()))
    }
}

impl RequestDecoder {
    /// A decoder with [`Limits::DEFAULT`].
    pub fn new() -> RequestDecoder {
        RequestDecoder::with_limits(Limits::DEFAULT)
    }

    /// A decoder enforcing `limits` (`max_aggregate` bounds the argument
    /// count, `max_line` the inline line).
    pub fn with_limits(limits: Limits) -> RequestDecoder {
        RequestDecoder {
            limits,
            pos: 0,
            scan: 0,
            remaining: None,
            pending: None,
            want: 0,
            args: Vec::new(),
            inline: Vec::new(),
            from_inline: false,
        }
    }

    /// Replaces the limits, e.g. once a client has authenticated. Takes
    /// effect from the next request.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Parses one request at the front of `buf` without copying it.
    ///
    /// Returns its length once complete; its arguments are then available
    /// from [`argv`](Self::argv) with the same `buf` until the next call.
    /// The caller consumes that many bytes before the next call. A request
    /// with no arguments (`*0`, an empty line) is returned as such: Valkey
    /// skips those without replying.
    #[inline]
    pub fn parse(&mut self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        // Most requests arrive whole: take them in one tight pass. Anything
        // unusual (incomplete, invalid, over a limit, huge numbers) goes to
        // the resumable path, which then owns the request until it
        // completes, so the fast path looks at a request at most once.
        if self.remaining.is_none() && buf.first() == Some(&b'*') {
            self.args.clear();
            self.from_inline = false;
            if let Some(end) = fast_multibulk(buf, &mut self.args, &self.limits) {
                return Ok(Some(end));
            }
        }
        self.parse_slow(buf)
    }

    /// The resumable path: partial input, unusual numbers, errors.
    #[inline(never)]
    fn parse_slow(&mut self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        match self.parse_inner(buf) {
            Ok(Some(end)) => {
                self.pos = 0;
                self.scan = 0;
                self.remaining = None;
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

    /// The arguments of the request [`parse`](Self::parse) last completed.
    pub fn argv<'a>(&'a self, buf: &'a [u8]) -> Argv<'a> {
        Argv {
            base: if self.from_inline { &self.inline } else { buf },
            ranges: &self.args,
        }
    }

    /// Decodes the next non-empty request from the front of `src`,
    /// consuming its bytes (and those of any empty requests before it).
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Request>, DecodeError> {
        loop {
            let Some(end) = self.parse(src)? else {
                return Ok(None);
            };
            let bytes = src.split_to(end).freeze();
            if self.args.is_empty() {
                continue;
            }
            let args = if self.from_inline {
                self.args
                    .iter()
                    .map(|r| Bytes::copy_from_slice(&self.inline[r.clone()]))
                    .collect()
            } else {
                self.args.iter().map(|r| bytes.slice(r.clone())).collect()
            };
            return Ok(Some(Request { args }));
        }
    }

    /// How many more bytes the current request certainly needs, capped by
    /// `max_prealloc`.
    pub fn reserve_hint(&self) -> usize {
        if self.pending.is_some() {
            self.want.min(self.limits.max_prealloc)
        } else {
            0
        }
    }

    /// Forgets any partially read request.
    pub fn reset(&mut self) {
        self.pos = 0;
        self.scan = 0;
        self.remaining = None;
        self.pending = None;
        self.want = 0;
        self.args.clear();
        self.from_inline = false;
    }

    fn parse_inner(&mut self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        let limits = self.limits;
        let mut remaining = match self.remaining {
            Some(r) => r,
            None => {
                let Some(&first) = buf.first() else {
                    return Ok(None);
                };
                self.args.clear();
                self.from_inline = false;
                if first != b'*' {
                    return self.parse_inline(buf);
                }
                self.args.clear();
                let bad = DecodeError::InvalidMultibulkLength;
                let Number::Done(n, next) = read_number(buf, 1, bad.clone())? else {
                    return Ok(None);
                };
                if !valkey_number(&buf[1..next - 2]) {
                    return Err(bad);
                }
                // As in Valkey, a count of zero or less is an empty request.
                if n <= 0 {
                    return Ok(Some(next));
                }
                let count = usize::try_from(n)
                    .ok()
                    .filter(|&c| c <= limits.max_aggregate)
                    .ok_or(DecodeError::AggregateTooLong {
                        len: n,
                        limit: limits.max_aggregate,
                    })?;
                // Reserve from the declared count only up to the cap; the
                // rest grows as arguments really arrive.
                let cap = limits.max_prealloc / std::mem::size_of::<Range<usize>>();
                self.args.reserve(count.min(cap.max(1)));
                self.pos = next;
                self.remaining = Some(count);
                count
            }
        };
        while remaining > 0 {
            let (start, len) = match self.pending {
                Some(p) => p,
                None => {
                    let pos = self.pos;
                    let Some(&tag) = buf.get(pos) else {
                        return Ok(None);
                    };
                    if tag != b'$' {
                        return Err(DecodeError::ExpectedBulk(tag));
                    }
                    let bad = DecodeError::InvalidBulkLength;
                    let Number::Done(n, next) = read_number(buf, pos + 1, bad.clone())? else {
                        return Ok(None);
                    };
                    if !valkey_number(&buf[pos + 1..next - 2]) {
                        return Err(bad);
                    }
                    let len = usize::try_from(n)
                        .ok()
                        .filter(|&l| l <= limits.max_bulk)
                        .ok_or(DecodeError::BulkTooLong {
                            len: n,
                            limit: limits.max_bulk,
                        })?;
                    (next, len)
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
            // Valkey skips the two bytes after a bulk argument without
            // looking at them; so does this decoder, byte for byte.
            self.args.push(start..start + len);
            self.pos = end;
            remaining -= 1;
            self.remaining = Some(remaining);
        }
        Ok(Some(self.pos))
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        let max = self.limits.max_line;
        let from = self.scan.min(buf.len());
        let Some(nl) = memchr::memchr(b'\n', &buf[from..]).map(|i| i + from) else {
            if buf.len() > max {
                return Err(DecodeError::LineTooLong { limit: max });
            }
            self.scan = buf.len();
            return Ok(None);
        };
        if nl > max {
            return Err(DecodeError::LineTooLong { limit: max });
        }
        let line = &buf[..nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.inline.clear();
        split_args(line, &mut self.inline, &mut self.args)?;
        if self.args.len() > self.limits.max_aggregate {
            return Err(DecodeError::AggregateTooLong {
                len: i64::try_from(self.args.len()).unwrap_or(i64::MAX),
                limit: self.limits.max_aggregate,
            });
        }
        self.from_inline = true;
        Ok(Some(nl + 1))
    }
}

/// Parses a complete multibulk of small numbers in one pass; `None` means
/// "let the general path decide" and leaves `args` to be cleared.
#[inline(always)]
fn fast_multibulk(buf: &[u8], args: &mut Vec<Range<usize>>, limits: &Limits) -> Option<usize> {
    let (count, mut p) = fast_header(buf, 0, b'*')?;
    if count == 0 || count > limits.max_aggregate {
        return None;
    }
    for _ in 0..count {
        let (len, start) = fast_header(buf, p, b'$')?;
        if len > limits.max_bulk {
            return None;
        }
        let stop = start + len;
        if !crlf_at(buf, stop) {
            return None;
        }
        args.push(start..stop);
        p = stop + 2;
    }
    (p <= limits.max_frame).then_some(p)
}

#[inline(always)]
fn word_at(buf: &[u8], at: usize) -> Option<u64> {
    let w: [u8; 8] = buf.get(at..at.wrapping_add(8))?.try_into().ok()?;
    Some(u64::from_le_bytes(w))
}

/// Matches `T d \r \n` or `T d d \r \n` at the low bytes of `w`; returns
/// the number and the header's size.
#[inline(always)]
fn short_header(w: u64, tag: u8) -> Option<(usize, usize)> {
    let t = u64::from(tag);
    if w & 0xFFFF_00FF == 0x0A0D_0000 | t {
        let d = ((w >> 8) as u8).wrapping_sub(b'0');
        return (d <= 9).then_some((usize::from(d), 4));
    }
    if w & 0xFF_FF00_00FF == 0x0A_0D00_0000 | t {
        let hi = ((w >> 8) as u8).wrapping_sub(b'0');
        let lo = ((w >> 16) as u8).wrapping_sub(b'0');
        // A leading zero is Valkey's "invalid length": the general path
        // says so.
        if hi == 0 || hi > 9 || lo > 9 {
            return None;
        }
        return Some((usize::from(hi) * 10 + usize::from(lo), 5));
    }
    None
}

/// Reads `<tag><digits>\r\n` at `at`: one- and two-digit numbers (nearly
/// every command name, key and small value) with a couple of word
/// compares, longer ones with a short digit loop.
#[inline(always)]
fn fast_header(buf: &[u8], at: usize, tag: u8) -> Option<(usize, usize)> {
    let w = word_at(buf, at)?;
    if let Some((n, size)) = short_header(w, tag) {
        return Some((n, at + size));
    }
    if w as u8 != tag {
        return None;
    }
    fast_len(buf, at + 1)
}

#[inline(always)]
fn crlf_at(buf: &[u8], i: usize) -> bool {
    matches!(buf.get(i..i.wrapping_add(2)), Some(&[b'\r', b'\n']))
}

/// Reads `[0-9]{1,6}\r\n` at `start` from a fixed 8-byte window, so the
/// digit loop needs no bounds checks. Longer numbers, and headers within 8
/// bytes of the end of the input, are left to the general path.
#[inline(always)]
fn fast_len(buf: &[u8], start: usize) -> Option<(usize, usize)> {
    let w: [u8; 8] = buf.get(start..start.wrapping_add(8))?.try_into().ok()?;
    let first = w[0].wrapping_sub(b'0');
    // Not a digit, or a leading zero (left to the general path's error).
    if first > 9 || (first == 0 && w[1].is_ascii_digit()) {
        return None;
    }
    let mut value = usize::from(first);
    let mut i = 1;
    while i < 7 {
        let d = w[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        value = value * 10 + usize::from(d);
        i += 1;
    }
    (i < 7 && w[i] == b'\r' && w[i + 1] == b'\n').then_some((value, start + i + 2))
}

/// Splits one line into arguments with Valkey's rules (as for inline
/// commands and configuration files): see [`RequestDecoder`]'s inline
/// handling for the quoting rules.
pub fn split_line(line: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
    let mut out = Vec::new();
    let mut ranges = Vec::new();
    split_args(line, &mut out, &mut ranges)?;
    Ok(ranges.into_iter().map(|r| out[r].to_vec()).collect())
}

/// Splits an inline command line the way Valkey's `sdssplitargs` does:
/// blanks separate arguments; `"…"` understands `\n \r \t \b \a \\ \"` and
/// `\xHH`; `'…'` understands `\'`; a closing quote must be followed by a
/// blank or the end; a NUL byte ends the line.
fn split_args(
    line: &[u8],
    out: &mut Vec<u8>,
    args: &mut Vec<Range<usize>>,
) -> Result<(), DecodeError> {
    // Valkey reads the line as a C string: a NUL ends it.
    let line = match memchr::memchr(0, line) {
        Some(i) => &line[..i],
        None => line,
    };
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let at = |i: usize| line.get(i).copied();
    let mut p = 0;
    loop {
        while at(p).is_some_and(is_space) {
            p += 1;
        }
        if p >= line.len() {
            return Ok(());
        }
        let start = out.len();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let Some(c) = at(p) else {
                if in_double || in_single {
                    return Err(DecodeError::UnbalancedQuotes);
                }
                break;
            };
            if in_double {
                if c == b'\\'
                    && at(p + 1) == Some(b'x')
                    && at(p + 2).is_some_and(|b| b.is_ascii_hexdigit())
                    && at(p + 3).is_some_and(|b| b.is_ascii_hexdigit())
                {
                    out.push(hex(line[p + 2]) * 16 + hex(line[p + 3]));
                    p += 3;
                } else if c == b'\\' && at(p + 1).is_some() {
                    p += 1;
                    out.push(match line[p] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1).is_some_and(|b| !is_space(b)) {
                        return Err(DecodeError::UnbalancedQuotes);
                    }
                    p += 1;
                    break;
                } else {
                    out.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == Some(b'\'') {
                    p += 1;
                    out.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1).is_some_and(|b| !is_space(b)) {
                        return Err(DecodeError::UnbalancedQuotes);
                    }
                    p += 1;
                    break;
                } else {
                    out.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' => {
                        p += 1;
                        break;
                    }
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => out.push(c),
                }
            }
            p += 1;
        }
        args.push(start..out.len());
    }
}

fn hex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

/// Whether a length header's text is a number as Valkey's `string2ll`
/// reads it: `0`, or an optional `-` and digits without a leading zero.
/// (`read_number` already checked that it is digits within range.)
fn valkey_number(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    match digits {
        [] => false,
        [b'0'] => digits.len() == text.len(),
        [b'0', ..] => false,
        _ => true,
    }
}
