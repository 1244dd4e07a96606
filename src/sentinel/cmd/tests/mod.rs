//! `SENTINEL` subcommands parsed before they run.

use valkyrie_protocol::Frame;

use super::sentinel::Subcommand;

fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Subcommand<'a>, Frame> {
    let sub = args
        .get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    Subcommand::parse(args, sub.as_deref())
}

#[test]
fn arguments_are_named_by_role_and_aliases_are_one_command() {
    let a: &[&[u8]] = &[b"SENTINEL", b"get-primary-addr-by-name", b"m"];
    let b: &[&[u8]] = &[b"sentinel", b"GET-MASTER-ADDR-BY-NAME", b"m"];
    assert_eq!(parse(a), Ok(Subcommand::MasterAddr { name: b"m" }));
    assert_eq!(parse(a), parse(b));
    let down: &[&[u8]] = &[
        b"SENTINEL",
        b"is-master-down-by-addr",
        b"h",
        b"1",
        b"2",
        b"*",
    ];
    assert_eq!(
        parse(down),
        Ok(Subcommand::IsMasterDown {
            args: [b"h", b"1", b"2", b"*"]
        })
    );
    let help: &[&[u8]] = &[b"SENTINEL", b"simulate-failure", b"HELP"];
    assert_eq!(parse(help), Ok(Subcommand::SimulateFailureHelp));
}

#[test]
fn wrong_arity_and_unknown_subcommands_get_sentinels_errors() {
    let short: &[&[u8]] = &[b"SENTINEL", b"master"];
    assert_eq!(
        parse(short),
        Err(Frame::error(
            "ERR wrong number of arguments for 'sentinel|master' command"
        ))
    );
    let bare: &[&[u8]] = &[b"SENTINEL"];
    assert_eq!(
        parse(bare),
        Err(Frame::error(
            "ERR wrong number of arguments for 'sentinel' command"
        ))
    );
    let unknown: &[&[u8]] = &[b"SENTINEL", b"Nope"];
    assert_eq!(
        parse(unknown),
        Err(Frame::error(
            "ERR unknown subcommand 'Nope'. Try SENTINEL HELP."
        ))
    );
    // Arity of MONITOR and SET is their handlers', in Sentinel's order.
    let monitor: &[&[u8]] = &[b"SENTINEL", b"monitor", b"m"];
    assert!(matches!(parse(monitor), Ok(Subcommand::Monitor { .. })));
}
