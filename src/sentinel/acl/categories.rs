//! The ACL categories: their bits, in Valkey's order, and their names.
//! The commands they are given to are rows of the Sentinel port's command
//! table ([`crate::sentinel::commands`]).

/// ACL category bits, in Valkey's order (`ACL CAT`).
#[allow(missing_docs)]
pub mod cat {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const READ: u32 = 1 << 1;
    pub const WRITE: u32 = 1 << 2;
    pub const SET: u32 = 1 << 3;
    pub const SORTEDSET: u32 = 1 << 4;
    pub const LIST: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const STRING: u32 = 1 << 7;
    pub const BITMAP: u32 = 1 << 8;
    pub const HYPERLOGLOG: u32 = 1 << 9;
    pub const GEO: u32 = 1 << 10;
    pub const STREAM: u32 = 1 << 11;
    pub const PUBSUB: u32 = 1 << 12;
    pub const ADMIN: u32 = 1 << 13;
    pub const FAST: u32 = 1 << 14;
    pub const SLOW: u32 = 1 << 15;
    pub const BLOCKING: u32 = 1 << 16;
    pub const DANGEROUS: u32 = 1 << 17;
    pub const CONNECTION: u32 = 1 << 18;
    pub const TRANSACTION: u32 = 1 << 19;
    pub const SCRIPTING: u32 = 1 << 20;
}

/// The category names, in the order of their bits.
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of a category name (case-insensitive), as Valkey's
/// `ACLGetCommandCategoryFlagByName`.
pub fn category(name: &str) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}
