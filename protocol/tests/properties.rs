//! Property tests: encode/decode roundtrip, and chunking equivalence (any
//! split of the input yields exactly the frames of the whole input, or the
//! same error after the same frames).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use proptest::prelude::*;
use valkyrie_protocol::{Frame, Limits, Protocol, RequestDecoder, encode, encode_command};

fn line_bytes() -> impl Strategy<Value = Bytes> {
    // Simple strings and errors cannot hold CR or LF.
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..12,
    )
    .prop_map(Bytes::from)
}

fn any_bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from)
}

fn scalar() -> impl Strategy<Value = Frame> {
    prop_oneof![
        line_bytes().prop_map(Frame::Simple),
        line_bytes().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        any_bytes().prop_map(Frame::Bulk),
        Just(Frame::NullBulk),
        Just(Frame::NullArray),
        Just(Frame::Null),
        any::<bool>().prop_map(Frame::Boolean),
        any::<f64>().prop_map(Frame::Double),
        prop_oneof![
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::NAN),
            Just(0.0),
            Just(-0.0)
        ]
        .prop_map(Frame::Double),
        "-?[0-9]{1,60}".prop_map(|s| Frame::BigNumber(Bytes::from(s))),
        any_bytes().prop_map(Frame::BulkError),
        ("[a-z]{3}", any_bytes()).prop_map(|(f, text)| {
            let f = f.as_bytes();
            Frame::Verbatim {
                format: [f[0], f[1], f[2]],
                text,
            }
        }),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    scalar().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Set),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Push),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            (
                proptest::collection::vec((inner.clone(), inner.clone()), 0..3),
                inner
            )
                .prop_map(|(attributes, data)| Frame::Attribute {
                    attributes,
                    data: Box::new(data)
                }),
        ]
    })
}

fn resp2_frame() -> impl Strategy<Value = Frame> {
    let leaf = prop_oneof![
        line_bytes().prop_map(Frame::Simple),
        line_bytes().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        any_bytes().prop_map(Frame::Bulk),
        Just(Frame::NullBulk),
        Just(Frame::NullArray),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        proptest::collection::vec(inner, 0..6).prop_map(Frame::Array)
    })
}

/// What a RESP3 roundtrip preserves: RESP2's `$-1`/`*-1` become `_`.
fn as_resp3(f: &Frame) -> Frame {
    match f {
        Frame::NullBulk | Frame::NullArray => Frame::Null,
        Frame::Array(v) => Frame::Array(v.iter().map(as_resp3).collect()),
        Frame::Set(v) => Frame::Set(v.iter().map(as_resp3).collect()),
        Frame::Push(v) => Frame::Push(v.iter().map(as_resp3).collect()),
        Frame::Map(v) => Frame::Map(v.iter().map(|(k, x)| (as_resp3(k), as_resp3(x))).collect()),
        Frame::Attribute { attributes, data } => Frame::Attribute {
            attributes: attributes
                .iter()
                .map(|(k, x)| (as_resp3(k), as_resp3(x)))
                .collect(),
            data: Box::new(as_resp3(data)),
        },
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn roundtrip_resp3(frames in proptest::collection::vec(frame(), 1..5)) {
        let mut wire = BytesMut::new();
        for f in &frames {
            encode(f, Protocol::Resp3, &mut wire);
        }
        let (decoded, err, rest) = common::frames(&wire, Limits::DEFAULT);
        prop_assert_eq!(err, None);
        prop_assert_eq!(rest, 0);
        let expected: Vec<Frame> = frames.iter().map(as_resp3).collect();
        prop_assert_eq!(decoded, expected);
    }

    #[test]
    fn roundtrip_resp2_shapes(f in resp2_frame()) {
        // Frames made only of RESP2 types come back unchanged from RESP2.
        let wire = valkyrie_protocol::to_bytes(&f, Protocol::Resp2);
        prop_assert_eq!(one(&wire), f);
    }

    #[test]
    fn resp2_downgrade_decodes_and_is_stable(f in frame()) {
        // RESP2 output is valid RESP, and downgrading it again changes nothing.
        let wire = valkyrie_protocol::to_bytes(&f, Protocol::Resp2);
        let decoded = one(&wire);
        let again = valkyrie_protocol::to_bytes(&decoded, Protocol::Resp2);
        prop_assert_eq!(&wire[..], &again[..]);
    }

    #[test]
    fn chunking_equivalence_valid(
        frames in proptest::collection::vec(frame(), 1..5),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut wire = BytesMut::new();
        for f in &frames {
            encode(f, Protocol::Resp3, &mut wire);
        }
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        prop_assert_eq!(frames_chunked(&wire, &cuts, Limits::DEFAULT), common::frames(&wire, Limits::DEFAULT));
    }

    #[test]
    fn chunking_equivalence_mutated(
        frames in proptest::collection::vec(frame(), 1..4),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        // Corrupted input: same frames, then the same error, however split.
        let mut wire = BytesMut::new();
        for f in &frames {
            encode(f, Protocol::Resp3, &mut wire);
        }
        for (at, byte) in flips {
            let i = at.index(wire.len());
            wire[i] = byte;
        }
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        let whole = common::frames(&wire, Limits::DEFAULT);
        let chunked = frames_chunked(&wire, &cuts, Limits::DEFAULT);
        prop_assert_eq!(chunked.0, whole.0);
        prop_assert_eq!(chunked.1, whole.1);
    }

    #[test]
    fn chunking_equivalence_random_bytes(
        input in proptest::collection::vec(prop_oneof![
            Just(b'*'), Just(b'$'), Just(b'\r'), Just(b'\n'), Just(b':'), Just(b'%'),
            Just(b'1'), Just(b'2'), Just(b'-'), Just(b'+'), Just(b'_'), Just(b','), Just(b'|'),
            any::<u8>()], 0..80),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let limits = Limits { max_line: 8, max_bulk: 10, max_aggregate: 4, max_depth: 3, ..Limits::DEFAULT };
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
        let whole = common::frames(&input, limits);
        let chunked = frames_chunked(&input, &cuts, limits);
        prop_assert_eq!(chunked.0, whole.0);
        prop_assert_eq!(chunked.1, whole.1);
    }

    #[test]
    fn requests_roundtrip_and_chunk(
        cmds in proptest::collection::vec(proptest::collection::vec(any_bytes(), 1..6), 1..6),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut wire = BytesMut::new();
        for c in &cmds {
            encode_command(c, &mut wire);
        }
        let (whole, err) = requests(&wire, Limits::DEFAULT);
        prop_assert_eq!(err, None);
        let got: Vec<Vec<Bytes>> = whole.iter().map(|r| r.args.clone()).collect();
        prop_assert_eq!(&got, &cmds);
        // Chunked through the borrowing parser.
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        cuts.push(wire.len());
        cuts.sort_unstable();
        let mut decoder = RequestDecoder::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        let mut out: Vec<Vec<Bytes>> = Vec::new();
        for cut in cuts {
            buf.extend_from_slice(&wire[fed..cut]);
            fed = cut;
            while let Some(n) = decoder.parse(&buf).unwrap() {
                out.push(decoder.argv(&buf).iter().map(Bytes::copy_from_slice).collect());
                buf.drain(..n);
            }
        }
        prop_assert_eq!(out, cmds);
    }

    #[test]
    fn inline_requests_chunk(
        line in proptest::collection::vec(prop_oneof![
            Just(b' '), Just(b'"'), Just(b'\''), Just(b'\\'), Just(b'x'), Just(b'a'), Just(b'4'),
            Just(b'\r'), Just(b'\n'), Just(0u8), any::<u8>()], 0..60),
    ) {
        let mut input = line.clone();
        input.push(b'\n');
        prop_assume!(input[0] != b'*');
        let whole = requests(&input, Limits::DEFAULT);
        let trickled = requests_trickled(&input, Limits::DEFAULT);
        prop_assert_eq!(whole, trickled);
    }
}
