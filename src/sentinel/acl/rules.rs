//! ACL rules as Valkey 8.0.1 applies and describes them (`ACLSetSelector`):
//! password digests (SHA-256, as Valkey stores them), rule errors, and the
//! [`Selector`] — the command bitmap (one bit per id of
//! [`super::categories::COMMANDS`], plus the "future commands" bit that
//! only `+@all` sets), the rules string that describes it, first-argument
//! exceptions, key patterns (stored and shown; the port has no keys) and
//! channel patterns. A user and its flags are in [`super::user`].

use sha2::{Digest, Sha256};

use super::categories;
use crate::sentinel::commands::{self, COMMANDS};

/// A password digest: SHA-256 of the password.
pub type Hash = [u8; 32];

/// The digest Valkey stores for `password`.
pub fn hash(password: &[u8]) -> Hash {
    Sha256::digest(password).into()
}

/// Lowercase hex, as `ACL LIST` and `ACL GETUSER` show digests.
pub fn hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn unhex(s: &[u8]) -> Option<Hash> {
    if s.len() != 64 || !s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// Why a rule was refused; the texts of Valkey's `ACLSetUserStringError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// EINVAL.
    Syntax,
    /// ENOENT.
    Unknown,
    /// EEXIST.
    KeyAfterAll,
    /// EISDIR.
    ChannelAfterAll,
    /// ENODEV.
    NoSuchPassword,
    /// EBADMSG.
    BadHash,
    /// ECHILD.
    FirstArgOfSub,
}

impl RuleError {
    /// Valkey's text.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list \
                 of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

const READ: u8 = 1;
const WRITE: u8 = 2;
const FUTURE: u128 = 1 << 127;

/// Commands, keys and channels a selector allows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    pub(super) allowed: u128,
    allcommands: bool,
    rules: String,
    firstargs: Vec<(usize, Vec<String>)>,
    allkeys: bool,
    keys: Vec<(u8, String)>,
    pub(super) allchannels: bool,
    channels: Vec<String>,
}

/// Why a command was denied, with the argument at fault for channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denial {
    /// The command (ACL_DENIED_CMD).
    Command,
    /// A channel, at this argument index (ACL_DENIED_CHANNEL).
    Channel(usize),
}

impl Selector {
    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed |= 1 << id;
        } else {
            self.allowed &= !(1u128 << id);
            self.allcommands = false;
        }
    }

    /// `ACLChangeSelectorPerm`: the command and, for a container, its
    /// subcommands.
    fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.firstargs.retain(|(i, _)| *i != id);
        for sub in commands::subcommands(id) {
            self.set_bit(sub, on);
        }
    }

    /// `ACLUpdateCommandRules`: drop the same rule (and, for a whole
    /// command, its subcommand rules), then append it.
    fn update_rules(&mut self, rule: &str, on: bool) {
        let rule = rule.to_ascii_lowercase();
        let kept: Vec<&str> = self
            .rules
            .split(' ')
            .filter(|r| {
                let name = r.get(1..).unwrap_or_default();
                !(name == rule
                    || (name.len() > rule.len()
                        && name.starts_with(rule.as_str())
                        && name.as_bytes()[rule.len()] == b'|'))
            })
            .filter(|r| !r.is_empty())
            .collect();
        let mut rules = kept.join(" ");
        if !rules.is_empty() {
            rules.push(' ');
        }
        rules.push(if on { '+' } else { '-' });
        rules.push_str(&rule);
        self.rules = rules;
    }

    /// `ACLSetSelector`: one key, channel or command rule.
    pub fn apply(&mut self, op: &str) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.allkeys = true;
                self.keys.clear();
            }
            "resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
            }
            "allchannels" | "&*" => {
                self.allchannels = true;
                self.channels.clear();
            }
            "resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
            }
            "allcommands" | "+@all" => {
                self.allowed = u128::MAX;
                self.allcommands = true;
                self.rules.clear();
                self.firstargs.clear();
            }
            "nocommands" | "-@all" => {
                self.allowed = 0;
                self.allcommands = false;
                self.rules.clear();
                self.firstargs.clear();
            }
            _ => return self.apply_pattern_or_command(op),
        }
        Ok(())
    }

    fn apply_pattern_or_command(&mut self, op: &str) -> Result<(), RuleError> {
        let bytes = op.as_bytes();
        match bytes.first() {
            Some(b'~' | b'%') => {
                if self.allkeys {
                    return Err(RuleError::KeyAfterAll);
                }
                let (flags, pattern) = if bytes[0] == b'%' {
                    let mut flags = 0;
                    let mut rest = None;
                    for (i, c) in bytes.iter().enumerate().skip(1) {
                        match c.to_ascii_uppercase() {
                            b'R' if flags & READ == 0 => flags |= READ,
                            b'W' if flags & WRITE == 0 => flags |= WRITE,
                            b'~' => {
                                rest = Some(&op[i + 1..]);
                                break;
                            }
                            _ => return Err(RuleError::Syntax),
                        }
                    }
                    match rest {
                        Some(p) if flags != 0 => (flags, p),
                        _ => return Err(RuleError::Syntax),
                    }
                } else {
                    (READ | WRITE, &op[1..])
                };
                if pattern.contains([' ', '\0']) {
                    return Err(RuleError::Syntax);
                }
                match self.keys.iter_mut().find(|(_, p)| p == pattern) {
                    Some((f, _)) => *f |= flags,
                    None => self.keys.push((flags, pattern.to_string())),
                }
                self.allkeys = false;
            }
            Some(b'&') => {
                if self.allchannels {
                    return Err(RuleError::ChannelAfterAll);
                }
                let pattern = &op[1..];
                if pattern.contains([' ', '\0']) {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == pattern) {
                    self.channels.push(pattern.to_string());
                }
            }
            Some(b'+' | b'-') if bytes.get(1) == Some(&b'@') => {
                let on = bytes[0] == b'+';
                let bit = categories::category(&op[2..]).ok_or(RuleError::Unknown)?;
                self.update_rules(&op[1..], on);
                for (id, c) in COMMANDS.iter().enumerate() {
                    if c.categories & bit != 0 {
                        self.change(id, on);
                    }
                }
            }
            Some(b'+') => self.allow_command(&op[1..])?,
            Some(b'-') => {
                let id = lookup_full(&op[1..]).ok_or(RuleError::Unknown)?;
                self.change(id, false);
                self.update_rules(COMMANDS[id].name, false);
            }
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    fn allow_command(&mut self, name: &str) -> Result<(), RuleError> {
        let Some((base, sub)) = name.rsplit_once('|') else {
            let id = commands::lookup(name).ok_or(RuleError::Unknown)?;
            self.change(id, true);
            self.update_rules(COMMANDS[id].name, true);
            return Ok(());
        };
        let id = lookup_full(base).ok_or(RuleError::Unknown)?;
        if COMMANDS[id].parent.is_some() {
            return Err(RuleError::FirstArgOfSub);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if COMMANDS[id].is_container() {
            let sub_id = lookup_full(name).ok_or(RuleError::Unknown)?;
            self.change(sub_id, true);
        } else {
            tracing::warn!(
                "Deprecation warning: Allowing a first arg of an otherwise blocked command is a \
                 misuse of ACL and may get disabled in the future (offender: +{name})"
            );
            match self.firstargs.iter_mut().find(|(i, _)| *i == id) {
                Some((_, args)) => {
                    if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                        args.push(sub.to_string());
                    }
                }
                None => self.firstargs.push((id, vec![sub.to_string()])),
            }
        }
        self.update_rules(name, true);
        Ok(())
    }

    /// `ACLSelectorCheckCmd` for the port's commands (none has keys).
    pub fn check(&self, id: usize, args: &[&[u8]]) -> Result<(), Denial> {
        let cmd = &COMMANDS[id];
        if !self.allcommands && !cmd.no_auth && self.allowed & (1u128 << id) == 0 {
            let idx = if cmd.parent.is_some() { 2 } else { 1 };
            let allowed = match (args.get(idx), self.firstargs.iter().find(|(i, _)| *i == id)) {
                (Some(arg), Some((_, list))) if args.len() >= 2 => {
                    list.iter().any(|a| a.as_bytes().eq_ignore_ascii_case(arg))
                }
                _ => false,
            };
            if !allowed {
                return Err(Denial::Command);
            }
        }
        if self.allchannels {
            return Ok(());
        }
        let (from, to, pattern) = match cmd.name {
            "publish" => (1, 2, false),
            "subscribe" => (1, args.len(), false),
            "psubscribe" => (1, args.len(), true),
            _ => return Ok(()),
        };
        for (i, channel) in args.iter().enumerate().take(to).skip(from) {
            let ok = self.channels.iter().any(|p| {
                if pattern {
                    p.as_bytes() == *channel
                } else {
                    valkyrie_protocol::glob::matches(p.as_bytes(), channel)
                }
            });
            if !ok {
                return Err(Denial::Channel(i));
            }
        }
        Ok(())
    }

    /// `ACLDescribeSelectorCommandRules`.
    pub fn command_rules(&self) -> String {
        let mut s = String::from(if self.allowed & FUTURE != 0 {
            "+@all"
        } else {
            "-@all"
        });
        if !self.rules.is_empty() {
            s.push(' ');
            s.push_str(&self.rules);
        }
        s
    }

    /// The key patterns, space-separated (`ACL GETUSER`'s `keys`).
    pub fn keys_text(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let v: Vec<String> = self.keys.iter().map(key_pattern).collect();
        v.join(" ")
    }

    /// The channel patterns, space-separated (`ACL GETUSER`'s `channels`).
    pub fn channels_text(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let v: Vec<String> = self.channels.iter().map(|c| format!("&{c}")).collect();
        v.join(" ")
    }

    /// `ACLDescribeSelector`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if self.allkeys {
            s.push_str("~* ");
        } else {
            for k in &self.keys {
                s.push_str(&key_pattern(k));
                s.push(' ');
            }
        }
        if self.allchannels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            for c in &self.channels {
                s.push('&');
                s.push_str(c);
                s.push(' ');
            }
        }
        s.push_str(&self.command_rules());
        s
    }
}

fn key_pattern((flags, pattern): &(u8, String)) -> String {
    if *flags == READ | WRITE {
        return format!("~{pattern}");
    }
    let mut s = String::from("%");
    if flags & READ != 0 {
        s.push('R');
    }
    if flags & WRITE != 0 {
        s.push('W');
    }
    format!("{s}~{pattern}")
}

/// `lookupCommandBySdsLogic`: `name` or `container|sub`.
fn lookup_full(name: &str) -> Option<usize> {
    let mut parts = name.split('|');
    let base = parts.next()?;
    let sub = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let id = commands::lookup(base)?;
    match sub {
        None => Some(id),
        Some(sub) => {
            if !COMMANDS[id].is_container() {
                return None;
            }
            commands::lookup(&format!("{}|{sub}", COMMANDS[id].name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::user::User;
    use super::*;

    fn user(rules: &str) -> User {
        let mut u = User::new("u");
        for r in rules.split(' ') {
            assert_eq!(u.apply(r), Ok(()), "{r}");
        }
        u
    }

    #[test]
    fn describes_like_valkey() {
        let u = user("on >pw -@all +ping +sentinel|get-master-addr-by-name");
        assert_eq!(
            u.describe(),
            "on sanitize-payload #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 \
             resetchannels -@all +ping +sentinel|get-master-addr-by-name"
        );
        let u = user("on >x +@admin ~key* %R~r* allchannels");
        assert!(u.describe().ends_with("~key* %R~r* &* -@all +@admin"));
        let u = user("+@all -@dangerous &chan*");
        assert!(
            u.describe()
                .ends_with("resetchannels &chan* +@all -@dangerous")
        );
        // A whole command replaces its subcommand rules.
        let u = user("-sentinel|set +sentinel|myid -sentinel");
        assert!(u.describe().ends_with("-@all -sentinel"));
    }

    #[test]
    fn checks_commands_and_channels() {
        let id = |n| super::commands::lookup(n).unwrap_or(usize::MAX);
        let u = user("on -@all +ping +sentinel|get-master-addr-by-name");
        assert_eq!(u.check(id("ping"), &[b"ping"]), Ok(()));
        assert_eq!(u.check(id("sentinel|set"), &[]), Err(Denial::Command));
        // AUTH and HELLO are never denied.
        assert_eq!(u.check(id("auth"), &[]), Ok(()));
        // A container's category covers all its subcommands.
        let u = user("+@all -@dangerous");
        assert_eq!(u.check(id("sentinel|help"), &[]), Err(Denial::Command));
        let u = user("-@all +@admin");
        assert_eq!(u.check(id("sentinel|help"), &[]), Ok(()));
        let u = user("+@all &chan*");
        let args: [&[u8]; 3] = [b"subscribe", b"chanx", b"other"];
        assert_eq!(u.check(id("subscribe"), &args), Err(Denial::Channel(2)));
        let args: [&[u8]; 2] = [b"psubscribe", b"chan*"];
        assert_eq!(u.check(id("psubscribe"), &args), Ok(()));
        let args: [&[u8]; 2] = [b"psubscribe", b"chanx"];
        assert_eq!(u.check(id("psubscribe"), &args), Err(Denial::Channel(1)));
        // First-argument exceptions.
        let u = user("-@all +info|server");
        let args: [&[u8]; 2] = [b"info", b"SERVER"];
        assert_eq!(u.check(id("info"), &args), Ok(()));
        assert_eq!(u.check(id("info"), &[b"info"]), Err(Denial::Command));
    }

    #[test]
    fn refuses_like_valkey() {
        let mut u = User::new("u");
        assert_eq!(u.apply("badrule"), Err(RuleError::Syntax));
        assert_eq!(u.apply("+nosuchcmd"), Err(RuleError::Unknown));
        assert_eq!(u.apply("+sentinel|nosuch"), Err(RuleError::Unknown));
        assert_eq!(u.apply("-@nosuch"), Err(RuleError::Unknown));
        assert_eq!(u.apply("+sentinel|set|x"), Err(RuleError::FirstArgOfSub));
        assert_eq!(u.apply("#abc"), Err(RuleError::BadHash));
        assert_eq!(u.apply("<nope"), Err(RuleError::NoSuchPassword));
        assert_eq!(u.apply("allchannels"), Ok(()));
        assert_eq!(u.apply("&x"), Err(RuleError::ChannelAfterAll));
    }

    #[test]
    fn passwords_are_digests() {
        let u = user("on >secret");
        assert!(u.check_password(b"secret"));
        assert!(!u.check_password(b"secreT"));
        let h = hex(&hash(b"secret"));
        let v = user(&format!("on #{h}"));
        assert!(v.check_password(b"secret"));
        assert!(!user(">secret").check_password(b"secret"));
    }
}
