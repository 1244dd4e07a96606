//! The `valkyrie` command line.

#![forbid(unsafe_code)]

use clap::Parser;

/// A failover and discovery daemon for Valkey that speaks the Sentinel
/// protocol.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    anyhow::bail!(
        "the daemon is not built yet: this release ships the valkyrie-protocol library only"
    )
}
