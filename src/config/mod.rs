//! Configuration: an existing `sentinel.conf`, unchanged, plus CLI flags and
//! `VALKYRIE_*` environment variables on top.
//!
//! This module owns the configuration model, the parser for Sentinel's file
//! format ([`parse`]), validation, and the overlay of command-line values.
//! It never writes the user's file: Valkyrie's own state lives in a state
//! file under `dir`. Directives that make no sense for a single Valkyrie
//! (peer sentinels, epochs, scripts), and every other valkey-server
//! directive, are accepted and reported as [`Note`]s for the caller to
//! log; unknown or malformed directives are an error naming the file and
//! line.

pub mod bounds;
mod parse;
mod secret;
mod settings;
#[cfg(test)]
mod tests;
pub mod tls;
pub mod tls_ciphers;
pub mod valkey_commands;
pub mod valkey_directives;

pub use parse::{fence_lag, parse, parse_file};
pub use secret::Secret;
pub use settings::*;
pub use tls::{AuthClients, GroupTls, TlsSettings, TlsVersion};
