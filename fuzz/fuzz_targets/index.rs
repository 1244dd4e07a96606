//! The index protocol's parsers on arbitrary bytes: client command lines
//! never panic; the server-stream decoder gives the same messages and the
//! same error whole and fed in chunks; every decoded message re-encodes to
//! bytes that decode to it again.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use valkyrie_protocol::index::IndexError;
use valkyrie_protocol::index::wire::{ServerDecoder, ServerMessage, parse_command};

fn decode(input: &[u8], chunk: usize) -> (Vec<ServerMessage>, Option<IndexError>) {
    let mut d = ServerDecoder::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match d.decode(&mut buf) {
                Ok(Some(m)) => out.push(m),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    for line in data.split(|&b| b == b'\n') {
        let _ = parse_command(line);
    }
    let Some((&c, input)) = data.split_first() else {
        return;
    };
    let whole = decode(input, input.len());
    assert_eq!(decode(input, usize::from(c % 7) + 1), whole);
    let mut again = BytesMut::new();
    for m in &whole.0 {
        m.encode(&mut again);
    }
    let (re, err) = decode(&again, again.len());
    assert_eq!(err, None);
    // Error texts are normalised to one line on encoding; compare the rest.
    let strip = |v: &[ServerMessage]| -> Vec<ServerMessage> {
        v.iter()
            .filter(|m| !matches!(m, ServerMessage::Error { .. }))
            .cloned()
            .collect()
    };
    assert_eq!(strip(&re), strip(&whole.0));
});
