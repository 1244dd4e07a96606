//! Decoder limits: what a peer may make us hold in memory.
//!
//! Every limit is checked before the bytes it covers are buffered or any
//! space is reserved for them, so a declared `*2000000000` or
//! `$4000000000` costs nothing but an error.

/// Bounds applied by [`FrameDecoder`](crate::FrameDecoder) and
/// [`RequestDecoder`](crate::RequestDecoder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum nesting of aggregates (arrays, maps, sets, pushes,
    /// attributes). A top-level array is depth 1.
    pub max_depth: usize,
    /// Maximum declared length of a bulk string, bulk error or verbatim
    /// string, in bytes.
    pub max_bulk: usize,
    /// Maximum declared element count of one aggregate (pairs count once for
    /// maps and attributes).
    pub max_aggregate: usize,
    /// Maximum length of one line: a simple string, error, number, or an
    /// inline command (Valkey's `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub max_line: usize,
    /// Maximum size of one whole frame or request, in bytes.
    pub max_frame: usize,
    /// Largest amount of memory reserved ahead of the data that will fill
    /// it, in bytes; a declared length only ever turns into this much
    /// preallocation, never more.
    pub max_prealloc: usize,
}

/// Hard ceiling on `max_depth`: building a frame recurses once per level.
pub const DEPTH_CEILING: usize = 1024;

impl Limits {
    /// Limits matching a Valkey server's defaults (`proto-max-bulk-len`
    /// 512 MiB, 64 KiB inline lines, 1 GiB `client-query-buffer-limit`).
    pub const DEFAULT: Limits = Limits {
        max_depth: 128,
        max_bulk: 512 * 1024 * 1024,
        max_aggregate: i32::MAX as usize,
        max_line: 64 * 1024,
        max_frame: 1024 * 1024 * 1024,
        max_prealloc: 64 * 1024,
    };

    /// Valkey's caps for a client that has not authenticated yet: at most 10
    /// arguments, bulks of at most 16 KiB.
    pub const UNAUTHENTICATED: Limits = Limits {
        max_depth: 1,
        max_bulk: 16 * 1024,
        max_aggregate: 10,
        max_line: 64 * 1024,
        max_frame: 256 * 1024,
        max_prealloc: 16 * 1024,
    };

    pub(crate) fn depth(&self) -> usize {
        self.max_depth.min(DEPTH_CEILING)
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}
