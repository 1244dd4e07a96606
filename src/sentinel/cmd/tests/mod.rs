//! Commands parsed before they run: `SENTINEL`, `CLIENT`, `ACL` and
//! `COMMAND` subcommands, and `HELLO`'s options; `VALKYRIE` in
//! `valkyrie` and `valkyrie_map`, its `PAUSE SELECTOR` in `pause`.

mod debug;
mod pause;
mod valkyrie;
mod valkyrie_map;

use valkyrie_protocol::Frame;

use super::sentinel::Subcommand;
use super::{acl, client, command, hello};

fn lower(args: &[&[u8]]) -> Option<String> {
    args.get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
}

fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Subcommand<'a>, Frame> {
    Subcommand::parse(args, lower(args).as_deref())
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
    let flags: &[&[u8]] = &[b"HELP"];
    assert_eq!(parse(help), Ok(Subcommand::SimulateFailure { flags }));
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

#[test]
fn client_subcommands_name_their_arguments_and_keep_valkeys_errors() {
    let parse =
        |args: &'static [&'static [u8]]| client::Subcommand::parse(args, lower(args).as_deref());
    assert_eq!(
        parse(&[b"CLIENT", b"SetInfo", b"lib-name", b"x"]),
        Ok(client::Subcommand::SetInfo {
            attr: b"lib-name",
            value: b"x"
        })
    );
    assert_eq!(
        parse(&[b"client", b"kill", b"127.0.0.1:1"]),
        Ok(client::Subcommand::KillAddr {
            addr: b"127.0.0.1:1"
        })
    );
    assert!(matches!(
        parse(&[b"client", b"kill", b"id", b"3"]),
        Ok(client::Subcommand::Kill { .. })
    ));
    assert_eq!(
        parse(&[b"client", b"pause", b"10", b"write"]),
        Ok(client::Subcommand::Pause {
            timeout: b"10",
            mode: Some(b"write")
        })
    );
    assert_eq!(
        parse(&[b"client", b"kill"]),
        Err(Frame::error("ERR syntax error"))
    );
    assert_eq!(
        parse(&[b"client", b"setname"]),
        Err(Frame::error(
            "ERR wrong number of arguments for 'client|setname' command"
        ))
    );
    assert_eq!(
        parse(&[b"client", b"Nope"]),
        Err(Frame::error(
            "ERR unknown subcommand 'Nope'. Try CLIENT HELP."
        ))
    );
}

#[test]
fn acl_subcommands_take_their_arity_from_the_table() {
    assert_eq!(
        acl::Subcommand::parse(&[b"ACL", b"setuser", b"u", b"on", b">p"]),
        Ok(acl::Subcommand::SetUser {
            name: b"u",
            rules: &[b"on", b">p"]
        })
    );
    assert_eq!(
        acl::Subcommand::parse(&[b"acl", b"log", b"RESET"]),
        Ok(acl::Subcommand::LogReset)
    );
    assert_eq!(
        acl::Subcommand::parse(&[b"acl", b"getuser"]),
        Err(Frame::error(
            "ERR wrong number of arguments for 'acl|getuser' command"
        ))
    );
    assert_eq!(
        acl::Subcommand::parse(&[b"acl", b"cat", b"a", b"b"]),
        Err(Frame::error(
            "ERR unknown subcommand or wrong number of arguments for 'cat'. Try ACL HELP."
        ))
    );
    assert_eq!(
        acl::Subcommand::parse(&[b"acl", b"x|y"]),
        Err(Frame::error("ERR unknown subcommand 'x|y'. Try ACL HELP."))
    );
}

/// The recorded `COMMAND` and `COMMAND DOCS` decode, and name exactly the
/// commands of the table that a sentinel knows.
#[test]
fn recorded_command_details_and_docs_cover_the_table() {
    let recorded = command::recorded();
    let mut table: Vec<String> = crate::sentinel::commands::commands()
        .map(|c| c.name.to_string())
        .collect();
    table.sort();
    let mut infos: Vec<String> = recorded.infos.iter().map(|(n, _)| n.clone()).collect();
    infos.sort();
    let mut docs: Vec<String> = recorded.docs.iter().map(|(n, _)| n.clone()).collect();
    docs.sort();
    assert_eq!(infos, table);
    assert_eq!(docs, table);
}

#[test]
fn command_and_hello_parse_before_they_act() {
    let args: &[&[u8]] = &[b"COMMAND", b"info", b"a", b"b"];
    assert_eq!(
        command::Subcommand::parse(args, Some("info")),
        Ok(command::Subcommand::Info {
            names: &[b"a", b"b"]
        })
    );
    assert_eq!(
        command::Subcommand::parse(&[b"command"], None),
        Ok(command::Subcommand::All)
    );
    let args: &[&[u8]] = &[b"HELLO", b"3", b"setname", b"n", b"AUTH", b"u", b"p"];
    assert_eq!(
        hello::Hello::parse(args),
        Ok(hello::Hello {
            protocol: Some(valkyrie_protocol::Protocol::Resp3),
            auth: Some((b"u", b"p")),
            name: Some(b"n"),
        })
    );
    // A bad name fails the whole request, AUTH included.
    let args: &[&[u8]] = &[b"HELLO", b"3", b"AUTH", b"u", b"p", b"setname", b"a b"];
    assert!(hello::Hello::parse(args).is_err());
    let args: &[&[u8]] = &[b"HELLO", b"4"];
    assert_eq!(
        hello::Hello::parse(args),
        Err(Frame::error("NOPROTO unsupported protocol version"))
    );
}
