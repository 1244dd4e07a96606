//! Byte-level helpers shared by the decoders: CRLF search and number
//! parsing. Everything here is bounded: no helper looks further than its
//! caller allows, so incomplete input is re-examined at most a few bytes at
//! a time.

use crate::DecodeError;

/// Longest length header accepted: `-` plus 19 digits covers every `i64`.
pub(crate) const MAX_NUMBER_LEN: usize = 20;

/// Outcome of reading a `<number>\r\n` line.
pub(crate) enum Number {
    /// The value and the offset just past its CRLF.
    Done(i64, usize),
    /// More bytes are needed.
    Incomplete,
}

/// Reads a signed decimal number terminated by CRLF, starting at `start`.
///
/// Only `-?[0-9]+` is accepted, and at most [`MAX_NUMBER_LEN`] bytes before
/// the CR, so the verdict on any prefix never changes as more bytes arrive:
/// the same input gives the same answer however it is split.
#[inline]
pub(crate) fn read_number(
    buf: &[u8],
    start: usize,
    invalid: DecodeError,
) -> Result<Number, DecodeError> {
    let mut i = start;
    let negative = match buf.get(i) {
        None => return Ok(Number::Incomplete),
        Some(b'-') => {
            i += 1;
            true
        }
        // The RESP spec allows an explicit plus on integers, not lengths.
        Some(b'+') if matches!(invalid, DecodeError::InvalidInteger) => {
            i += 1;
            false
        }
        Some(_) => false,
    };
    let digits_start = i;
    // Accumulate as a negative number so i64::MIN parses.
    let mut acc: i64 = 0;
    loop {
        let Some(&b) = buf.get(i) else {
            return Ok(Number::Incomplete);
        };
        match b {
            b'0'..=b'9' => {
                if i - start >= MAX_NUMBER_LEN {
                    return Err(invalid);
                }
                acc = acc
                    .checked_mul(10)
                    .and_then(|v| v.checked_sub(i64::from(b - b'0')))
                    .ok_or_else(|| invalid.clone())?;
                i += 1;
            }
            b'\r' => {
                if i == digits_start {
                    return Err(invalid);
                }
                return match buf.get(i + 1) {
                    None => Ok(Number::Incomplete),
                    Some(b'\n') => {
                        let value = if negative {
                            acc
                        } else {
                            acc.checked_neg().ok_or(invalid)?
                        };
                        Ok(Number::Done(value, i + 2))
                    }
                    Some(_) => Err(invalid),
                };
            }
            _ => return Err(invalid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &[u8]) -> Result<Option<(i64, usize)>, DecodeError> {
        read_number(s, 0, DecodeError::InvalidLength).map(|n| match n {
            Number::Done(v, at) => Some((v, at)),
            Number::Incomplete => None,
        })
    }

    #[test]
    fn numbers() {
        assert_eq!(num(b"0\r\n"), Ok(Some((0, 3))));
        assert_eq!(num(b"-1\r\n"), Ok(Some((-1, 4))));
        assert_eq!(num(b"0042\r\n"), Ok(Some((42, 6))));
        assert_eq!(num(b"9223372036854775807\r\n"), Ok(Some((i64::MAX, 21))));
        assert_eq!(num(b"-9223372036854775808\r\n"), Ok(Some((i64::MIN, 22))));
        assert_eq!(
            num(b"9223372036854775808\r\n"),
            Err(DecodeError::InvalidLength)
        );
        assert_eq!(num(b"12"), Ok(None));
        assert_eq!(num(b"12\r"), Ok(None));
        assert_eq!(num(b""), Ok(None));
        assert_eq!(num(b"-"), Ok(None));
        assert_eq!(num(b"\r\n"), Err(DecodeError::InvalidLength));
        assert_eq!(num(b"-\r\n"), Err(DecodeError::InvalidLength));
        assert_eq!(num(b"+1\r\n"), Err(DecodeError::InvalidLength));
        assert_eq!(num(b"1 \r\n"), Err(DecodeError::InvalidLength));
        assert_eq!(num(b"1\rx"), Err(DecodeError::InvalidLength));
        assert_eq!(num(b"1\n"), Err(DecodeError::InvalidLength));
        assert_eq!(
            num(b"000000000000000000001\r\n"),
            Err(DecodeError::InvalidLength)
        );
    }
}
