//! The RESP frame type: every value RESP2 and RESP3 can carry.
//!
//! One enum covers both protocol versions. RESP2-only shapes (`$-1`, `*-1`)
//! keep their own variants so a decoded reply re-encodes to the same bytes;
//! the encoder maps them onto RESP3's `_` when talking RESP3.

use bytes::Bytes;

/// One RESP value.
///
/// String payloads are [`Bytes`] so the decoder can hand out slices of the
/// read buffer without copying (see `docs/benchmarks.md` for when that pays).
#[derive(Clone, Debug)]
pub enum Frame {
    /// `+OK\r\n`
    Simple(Bytes),
    /// `-ERR message\r\n`
    Error(Bytes),
    /// `:42\r\n`
    Integer(i64),
    /// `$5\r\nhello\r\n`
    Bulk(Bytes),
    /// `$-1\r\n` (RESP2 null bulk string)
    NullBulk,
    /// `*-1\r\n` (RESP2 null array)
    NullArray,
    /// `*2\r\n...`
    Array(Vec<Frame>),
    /// `_\r\n` (RESP3 null)
    Null,
    /// `#t\r\n` / `#f\r\n`
    Boolean(bool),
    /// `,1.5\r\n`, `,inf\r\n`, `,-inf\r\n`, `,nan\r\n`
    Double(f64),
    /// `(3492890328409238509324850943850943825024385\r\n`; the digits, unparsed.
    BigNumber(Bytes),
    /// `!21\r\nSYNTAX invalid syntax\r\n`
    BulkError(Bytes),
    /// `=15\r\ntxt:Some string\r\n`
    Verbatim {
        /// The three-byte format tag (`txt`, `mkd`, …).
        format: [u8; 3],
        /// The text after `xxx:`.
        text: Bytes,
    },
    /// `%2\r\n...`, pairs in wire order.
    Map(Vec<(Frame, Frame)>),
    /// `~3\r\n...`
    Set(Vec<Frame>),
    /// `|1\r\n<key><value><data>`: out-of-band attributes attached to the
    /// frame that follows them on the wire.
    Attribute {
        /// Attribute pairs, in wire order.
        attributes: Vec<(Frame, Frame)>,
        /// The frame the attributes annotate.
        data: Box<Frame>,
    },
    /// `>3\r\n...` (RESP3 out-of-band push, e.g. pub/sub messages)
    Push(Vec<Frame>),
}

impl Frame {
    /// A bulk string holding `data`.
    pub fn bulk(data: impl Into<Bytes>) -> Frame {
        Frame::Bulk(data.into())
    }

    /// A simple string holding `data`.
    pub fn simple(data: impl Into<Bytes>) -> Frame {
        Frame::Simple(data.into())
    }

    /// A simple error holding `message` (without the leading `-`).
    pub fn error(message: impl Into<Bytes>) -> Frame {
        Frame::Error(message.into())
    }

    /// The bytes of a string-like frame (simple, bulk, verbatim text, big
    /// number), or `None`.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            Frame::Simple(b) | Frame::Bulk(b) | Frame::BigNumber(b) => Some(b),
            Frame::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Whether this frame is an error reply (simple or bulk error).
    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_) | Frame::BulkError(_))
    }

    /// The kind of this frame, for error messages and metrics labels.
    pub fn kind(&self) -> Kind {
        match self {
            Frame::Simple(_) => Kind::Simple,
            Frame::Error(_) => Kind::Error,
            Frame::Integer(_) => Kind::Integer,
            Frame::Bulk(_) => Kind::Bulk,
            Frame::NullBulk => Kind::NullBulk,
            Frame::NullArray => Kind::NullArray,
            Frame::Array(_) => Kind::Array,
            Frame::Null => Kind::Null,
            Frame::Boolean(_) => Kind::Boolean,
            Frame::Double(_) => Kind::Double,
            Frame::BigNumber(_) => Kind::BigNumber,
            Frame::BulkError(_) => Kind::BulkError,
            Frame::Verbatim { .. } => Kind::Verbatim,
            Frame::Map(_) => Kind::Map,
            Frame::Set(_) => Kind::Set,
            Frame::Attribute { .. } => Kind::Attribute,
            Frame::Push(_) => Kind::Push,
        }
    }
}

/// Doubles compare by value, except that NaN equals NaN: a frame that
/// carried `,nan` must equal itself after a roundtrip.
impl PartialEq for Frame {
    fn eq(&self, other: &Frame) -> bool {
        use Frame::*;
        match (self, other) {
            (Simple(a), Simple(b))
            | (Error(a), Error(b))
            | (Bulk(a), Bulk(b))
            | (BigNumber(a), BigNumber(b))
            | (BulkError(a), BulkError(b)) => a == b,
            (Integer(a), Integer(b)) => a == b,
            (NullBulk, NullBulk) | (NullArray, NullArray) | (Null, Null) => true,
            (Boolean(a), Boolean(b)) => a == b,
            (Double(a), Double(b)) => a == b || (a.is_nan() && b.is_nan()),
            (
                Verbatim {
                    format: f1,
                    text: t1,
                },
                Verbatim {
                    format: f2,
                    text: t2,
                },
            ) => f1 == f2 && t1 == t2,
            (Array(a), Array(b)) | (Set(a), Set(b)) | (Push(a), Push(b)) => a == b,
            (Map(a), Map(b)) => a == b,
            (
                Attribute {
                    attributes: a1,
                    data: d1,
                },
                Attribute {
                    attributes: a2,
                    data: d2,
                },
            ) => a1 == a2 && d1 == d2,
            _ => false,
        }
    }
}

/// The type of a frame, without its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `+`
    Simple,
    /// `-`
    Error,
    /// `:`
    Integer,
    /// `$`
    Bulk,
    /// `$-1`
    NullBulk,
    /// `*-1`
    NullArray,
    /// `*`
    Array,
    /// `_`
    Null,
    /// `#`
    Boolean,
    /// `,`
    Double,
    /// `(`
    BigNumber,
    /// `!`
    BulkError,
    /// `=`
    Verbatim,
    /// `%`
    Map,
    /// `~`
    Set,
    /// `|`
    Attribute,
    /// `>`
    Push,
}
