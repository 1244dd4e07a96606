//! RESP parser benchmarks: Valkyrie's decoders against `redis-protocol`
//! (`decode_range`, its zero-copy rival, and `decode_bytes_mut`), a nom 8
//! parser producing the same output as our request path, and a `memchr`
//! newline scan as the bandwidth ceiling. Every contestant gets identical
//! input bytes; throughput is reported per input byte.
//!
//! Run: `cargo bench --bench parser`; `scripts/bench-report` turns the
//! results into the tables of docs/benchmarks.md.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use valkyrie_protocol::{
    Frame, FrameDecoder, Limits, Protocol, RequestDecoder, encode, encode_command,
};

/// 10,000 pipelined `SET key:NNNNNNNN <32 bytes>` commands (~693 KiB).
fn pipelined_set() -> (Vec<u8>, usize) {
    let mut out = BytesMut::new();
    let value = [b'v'; 32];
    for i in 0..10_000 {
        let key = format!("key:{i:08}");
        encode_command(&[&b"SET"[..], key.as_bytes(), &value], &mut out);
    }
    (out.to_vec(), 10_000)
}

/// One `SENTINEL MASTERS` reply entry: a flat array of 40 bulk strings.
fn master_entry(i: usize) -> Frame {
    let fields: [(&str, String); 20] = [
        ("name", format!("group-{i}")),
        ("ip", "10.0.0.12".into()),
        ("port", "6379".into()),
        ("runid", "06b6da8b2b3b8e1f7e0a0c9f8d2c1b0a9e8d7c6b".into()),
        ("flags", "master".into()),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "736".into()),
        ("last-ping-reply", "736".into()),
        ("down-after-milliseconds", "1000".into()),
        ("info-refresh", "736".into()),
        ("role-reported", "master".into()),
        ("role-reported-time", "766".into()),
        ("config-epoch", "100".into()),
        ("num-slaves", "2".into()),
        ("num-other-sentinels", "2".into()),
        ("quorum", "2".into()),
        ("failover-timeout", "10000".into()),
        ("parallel-syncs", "1".into()),
    ];
    Frame::Array(
        fields
            .into_iter()
            .flat_map(|(k, v)| [Frame::bulk(k), Frame::bulk(v)])
            .collect(),
    )
}

/// 1,000 `SENTINEL MASTERS` replies of 3 masters each, pipelined.
fn sentinel_masters() -> (Vec<u8>, usize) {
    let reply = Frame::Array((0..3).map(master_entry).collect());
    let mut out = BytesMut::new();
    for _ in 0..1000 {
        encode(&reply, Protocol::Resp2, &mut out);
    }
    (out.to_vec(), 1000)
}

/// 1,000 `INFO replication` replies (one bulk string each).
fn info_replication() -> (Vec<u8>, usize) {
    let text = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
        slave0:ip=127.0.0.1,port=16381,state=online,offset=2314251,lag=0\r\n\
        slave1:ip=127.0.0.1,port=16382,state=online,offset=2314251,lag=1\r\n\
        replicas_waiting_psync:0\r\nmaster_failover_state:no-failover\r\n\
        master_replid:7c2b5a1f0f7e4f1e1a3c9d2b8e6f4a0c5d7e9f1b\r\n\
        master_replid2:0000000000000000000000000000000000000000\r\n\
        master_repl_offset:2314251\r\nsecond_repl_offset:-1\r\n\
        repl_backlog_active:1\r\nrepl_backlog_size:1048576\r\n\
        repl_backlog_first_byte_offset:1\r\nrepl_backlog_histlen:2314251\r\n";
    let reply = Frame::bulk(text);
    let mut out = BytesMut::new();
    for _ in 0..1000 {
        encode(&reply, Protocol::Resp2, &mut out);
    }
    (out.to_vec(), 1000)
}

/// 1,000 RESP3 `HELLO 3` replies (a map of 7 pairs), as a Sentinel sends.
fn hello3() -> (Vec<u8>, usize) {
    let reply = Frame::Map(vec![
        (Frame::bulk("server"), Frame::bulk("valkey")),
        (Frame::bulk("version"), Frame::bulk("8.0.1")),
        (Frame::bulk("proto"), Frame::Integer(3)),
        (Frame::bulk("id"), Frame::Integer(5)),
        (Frame::bulk("mode"), Frame::bulk("sentinel")),
        (Frame::bulk("role"), Frame::bulk("master")),
        (Frame::bulk("modules"), Frame::Array(vec![])),
    ]);
    let mut out = BytesMut::new();
    for _ in 0..1000 {
        encode(&reply, Protocol::Resp3, &mut out);
    }
    (out.to_vec(), 1000)
}

/// `*1\r\n` nested 100 deep around `:1`, 1,000 times.
fn deep_nesting() -> (Vec<u8>, usize) {
    let mut one = b"*1\r\n".repeat(100);
    one.extend_from_slice(b":1\r\n");
    (one.repeat(1000), 1000)
}

fn newline_ceiling(input: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', input).count()
}

/// A nom 8 request parser with the same output as
/// `RequestDecoder::parse` (argument ranges), to measure what combinators
/// cost on the hot path.
mod nom_request {
    use std::ops::Range;

    use nom::bytes::streaming::take;
    use nom::character::streaming::{char, crlf, u32};
    use nom::sequence::{delimited, terminated};
    use nom::{IResult, Parser};

    pub fn parse<'a>(whole: &'a [u8], args: &mut Vec<Range<usize>>) -> IResult<&'a [u8], ()> {
        let (mut rest, n) = delimited(char('*'), u32, crlf).parse(whole)?;
        args.clear();
        for _ in 0..n {
            let (r, len) = delimited(char('$'), u32, crlf).parse(rest)?;
            let (r, data) = terminated(take(len), crlf).parse(r)?;
            let start = whole.len() - r.len() - 2 - data.len();
            args.push(start..start + data.len());
            rest = r;
        }
        Ok((rest, ()))
    }
}

fn bench_requests(c: &mut Criterion) {
    let (input, n) = pipelined_set();
    let mut g = c.benchmark_group("pipelined_set");
    g.throughput(Throughput::Bytes(input.len() as u64));
    g.bench_function("valkyrie_request_parse", |b| {
        let mut d = RequestDecoder::new();
        b.iter(|| {
            let mut at = 0;
            let mut count = 0;
            while let Ok(Some(len)) = d.parse(&input[at..]) {
                count += d.argv(&input[at..]).len();
                at += len;
            }
            assert_eq!(count, 3 * n);
            black_box(count)
        })
    });
    g.bench_function("valkyrie_request_decode", |b| {
        let mut d = RequestDecoder::new();
        b.iter_batched(
            || BytesMut::from(&input[..]),
            |mut buf| {
                let mut count = 0;
                while let Ok(Some(req)) = d.decode(&mut buf) {
                    count += req.args.len();
                }
                assert_eq!(count, 3 * n);
                count
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("valkyrie_frame_decode", |b| {
        let bytes = Bytes::from(input.clone());
        let mut d = FrameDecoder::new();
        b.iter(|| {
            let mut rest = bytes.clone();
            let mut count = 0;
            while let Ok(Some((frame, used))) = d.decode_bytes(&rest) {
                black_box(&frame);
                count += 1;
                bytes::Buf::advance(&mut rest, used);
            }
            assert_eq!(count, n);
            count
        })
    });
    g.bench_function("nom8_request_parse", |b| {
        let mut args = Vec::new();
        b.iter(|| {
            let mut rest = &input[..];
            let mut count = 0;
            while let Ok((r, ())) = nom_request::parse(rest, &mut args) {
                count += args.len();
                rest = r;
            }
            assert_eq!(count, 3 * n);
            black_box(count)
        })
    });
    redis_protocol_resp2(&mut g, &input, n);
    g.bench_function("memchr_newline_ceiling", |b| {
        b.iter(|| newline_ceiling(black_box(&input)))
    });
    g.finish();
}

fn redis_protocol_resp2(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    input: &[u8],
    n: usize,
) {
    g.bench_function("redis_protocol_decode_range", |b| {
        b.iter(|| {
            let mut at = 0;
            let mut count = 0;
            while let Ok(Some((frame, used))) =
                redis_protocol::resp2::decode::decode_range(&input[at..])
            {
                black_box(&frame);
                at += used;
                count += 1;
            }
            assert_eq!(count, n);
            count
        })
    });
    g.bench_function("redis_protocol_decode_bytes_mut", |b| {
        b.iter_batched(
            || BytesMut::from(input),
            |mut buf| {
                let mut count = 0;
                while let Ok(Some((frame, _, _))) =
                    redis_protocol::resp2::decode::decode_bytes_mut(&mut buf)
                {
                    black_box(&frame);
                    count += 1;
                }
                assert_eq!(count, n);
                count
            },
            BatchSize::LargeInput,
        )
    });
}

fn redis_protocol_resp3(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    input: &[u8],
    n: usize,
) {
    use redis_protocol::resp3::decode::complete;
    g.bench_function("redis_protocol_decode_range", |b| {
        b.iter(|| {
            let mut at = 0;
            let mut count = 0;
            while let Ok(Some((frame, used))) = complete::decode_range(&input[at..]) {
                black_box(&frame);
                at += used;
                count += 1;
            }
            assert_eq!(count, n);
            count
        })
    });
    g.bench_function("redis_protocol_decode_bytes_mut", |b| {
        b.iter_batched(
            || BytesMut::from(input),
            |mut buf| {
                let mut count = 0;
                while let Ok(Some((frame, _, _))) = complete::decode_bytes_mut(&mut buf) {
                    black_box(&frame);
                    count += 1;
                }
                assert_eq!(count, n);
                count
            },
            BatchSize::LargeInput,
        )
    });
}

/// Reply-side groups: our frame decoder (validate-only and full frames)
/// against redis-protocol and the ceiling.
fn bench_replies(c: &mut Criterion) {
    type Case = (&'static str, (Vec<u8>, usize), bool);
    let cases: [Case; 4] = [
        ("sentinel_masters", sentinel_masters(), false),
        ("info_replication", info_replication(), false),
        ("hello3_map", hello3(), true),
        ("deep_nesting", deep_nesting(), false),
    ];
    for (name, (input, n), resp3) in cases {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(input.len() as u64));
        let bytes = Bytes::from(input.clone());
        g.bench_function("valkyrie_frame_decode", |b| {
            let mut d = FrameDecoder::new();
            b.iter(|| {
                let mut rest = bytes.clone();
                let mut count = 0;
                while let Ok(Some((frame, used))) = d.decode_bytes(&rest) {
                    black_box(&frame);
                    count += 1;
                    bytes::Buf::advance(&mut rest, used);
                }
                assert_eq!(count, n);
                count
            })
        });
        g.bench_function("valkyrie_frame_check", |b| {
            let mut d = FrameDecoder::new();
            b.iter(|| {
                let mut at = 0;
                let mut count = 0;
                while let Ok(Some(used)) = d.check(&input[at..]) {
                    at += used;
                    count += 1;
                }
                assert_eq!(count, n);
                count
            })
        });
        if resp3 {
            redis_protocol_resp3(&mut g, &input, n);
        } else {
            redis_protocol_resp2(&mut g, &input, n);
        }
        g.bench_function("memchr_newline_ceiling", |b| {
            b.iter(|| newline_ceiling(black_box(&input)))
        });
        g.finish();
    }
}

/// The same 100 pipelined SET commands (6.9 KiB) arriving one byte at a
/// time: a resumable decoder does linear work; one that restarts from the
/// first byte on every call does quadratic work.
fn bench_trickle(c: &mut Criterion) {
    let (input, _) = pipelined_set();
    let input = &input[..input.len() / 100];
    let n = 100;
    let mut g = c.benchmark_group("trickle_1_byte");
    g.throughput(Throughput::Bytes(input.len() as u64));
    g.bench_function("valkyrie_frame_decode", |b| {
        let mut d = FrameDecoder::new();
        b.iter(|| {
            let mut buf = BytesMut::with_capacity(256);
            let mut count = 0;
            for &byte in input {
                buf.extend_from_slice(&[byte]);
                if let Ok(Some(f)) = d.decode(&mut buf) {
                    black_box(f);
                    count += 1;
                }
            }
            assert_eq!(count, n);
            count
        })
    });
    g.bench_function("valkyrie_request_decode", |b| {
        let mut d = RequestDecoder::with_limits(Limits::DEFAULT);
        b.iter(|| {
            let mut buf = BytesMut::with_capacity(256);
            let mut count = 0;
            for &byte in input {
                buf.extend_from_slice(&[byte]);
                if let Ok(Some(r)) = d.decode(&mut buf) {
                    black_box(r);
                    count += 1;
                }
            }
            assert_eq!(count, n);
            count
        })
    });
    g.bench_function("redis_protocol_decode_bytes_mut", |b| {
        b.iter(|| {
            let mut buf = BytesMut::with_capacity(256);
            let mut count = 0;
            for &byte in input {
                buf.extend_from_slice(&[byte]);
                if let Ok(Some((f, _, _))) =
                    redis_protocol::resp2::decode::decode_bytes_mut(&mut buf)
                {
                    black_box(f);
                    count += 1;
                }
            }
            assert_eq!(count, n);
            count
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = bench_requests, bench_replies, bench_trickle
}
criterion_main!(benches);
