//! The command table's own tests: names, arity, categories, listings.

use super::*;

#[test]
fn resolves_like_valkey() {
    assert_eq!(resolve(&[b"PING"]), lookup("ping"));
    assert_eq!(
        resolve(&[b"sentinel", b"SET", b"m", b"quorum", b"2"]),
        lookup("sentinel|set")
    );
    // Arity errors and unknown subcommands are the handler's.
    assert_eq!(resolve(&[b"sentinel"]), None);
    assert_eq!(resolve(&[b"sentinel", b"set", b"m"]), None);
    assert_eq!(resolve(&[b"sentinel", b"nosuch"]), None);
    assert_eq!(resolve(&[b"sentinel|set"]), None);
    // A container with arity -1 runs by itself.
    assert_eq!(resolve(&[b"command"]), lookup("command"));
    // A sentinel's 77 rows, then `valkyrie` and its four subcommands;
    // ids are bits of a `u128` (`acl/user.rs`).
    assert_eq!(COMMANDS.len(), 82);
    assert_eq!(
        resolve(&[b"VALKYRIE", b"Readiness", b"m"]),
        lookup("valkyrie|readiness")
    );
    assert_eq!(resolve(&[b"valkyrie", b"help", b"x"]), None);
}

#[test]
fn labels_are_bounded() {
    assert_eq!(label(b"PING"), "ping");
    assert_eq!(label(b"Sentinel"), "sentinel");
    assert_eq!(label(b"QUIT"), "quit");
    assert_eq!(label(b"flushall"), "unknown");
    assert_eq!(label(b"\xff\x00garbage"), "unknown");
    assert_eq!(label(b""), "unknown");
    // A subcommand's full name is not a command.
    assert_eq!(label(b"sentinel|set"), "unknown");
}

#[test]
fn every_subcommand_follows_its_command() {
    // A handler is a column the compiler checks (`cmd::dispatch`);
    // ids are positions, so a subcommand sits right after its
    // command and its siblings.
    let mut container = None;
    for c in COMMANDS {
        match c.parent {
            None => container = Some(c.name),
            Some(parent) => {
                assert_eq!(Some(parent), container, "{}", c.name);
                assert_eq!(c.name.split_once('|').map(|(p, _)| p), Some(parent));
            }
        }
    }
    assert_eq!(commands().count(), 15);
}

#[test]
fn extension_rows_never_show_in_the_listings() {
    let extensions: Vec<&str> = COMMANDS
        .iter()
        .filter(|c| c.extension)
        .map(|c| c.name)
        .collect();
    assert_eq!(
        extensions,
        [
            "valkyrie",
            "valkyrie|readiness",
            "valkyrie|pause",
            "valkyrie|resume",
            "valkyrie|help"
        ]
    );
    // `COMMAND COUNT|LIST` and `ACL CAT <category>` are a sentinel's.
    assert!(commands().all(|c| !c.extension));
    assert!(listed().all(|c| !c.extension));
    assert_eq!(listed().count(), 77);
    // Still a command otherwise: a label, an id, categories.
    assert_eq!(label(b"Valkyrie"), "valkyrie");
    let readiness = lookup("valkyrie|readiness").map(|id| &COMMANDS[id]);
    assert_eq!(readiness.map(|c| c.parent), Some(Some("valkyrie")));
    assert_eq!(
        readiness.map(|c| c.categories),
        lookup("sentinel|master").map(|id| COMMANDS[id].categories)
    );
}
