//! One ACL user: its flags, password digests and selectors, and how
//! Valkey 8.0.1 applies rules to them and describes them (`ACLSetUser`,
//! `ACLDescribeUser`); the selectors themselves are in [`super::rules`].

use super::rules::*;
/// An ACL user.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    /// Its name.
    pub name: String,
    enabled: bool,
    nopass: bool,
    skip_sanitize: bool,
    passwords: Vec<Hash>,
    /// The root selector first, then any `(…)` selectors.
    selectors: Vec<Selector>,
}

impl User {
    /// A new user, as `ACLCreateUser`: off, no password, no commands,
    /// no keys, no channels.
    pub fn new(name: &str) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            passwords: Vec::new(),
            selectors: vec![Selector::default()],
        }
    }

    /// The default user, as `ACLCreateDefaultUser`.
    pub fn default_user() -> User {
        let mut u = User::new("default");
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            // These rules are valid by construction.
            let _ = u.apply(op);
        }
        u
    }

    /// Enabled and without password: connections start authenticated.
    pub fn open(&self) -> bool {
        self.enabled && self.nopass
    }

    /// Whether it is enabled with at least one password.
    pub fn has_password(&self) -> bool {
        !self.nopass
    }

    /// Checks a password: SHA-256 digests compared in constant time.
    pub fn check_password(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let digest = hash(password);
        let mut ok = subtle::Choice::from(0u8);
        for p in &self.passwords {
            ok |= subtle::ConstantTimeEq::ct_eq(&p[..], &digest[..]);
        }
        bool::from(ok)
    }

    /// `ACLSetUser`: one rule.
    pub fn apply(&mut self, op: &str) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => self.skip_sanitize = true,
            "sanitize-payload" => self.skip_sanitize = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.truncate(1),
            "reset" => {
                for op in [
                    "resetpass",
                    "resetkeys",
                    "resetchannels",
                    "off",
                    "sanitize-payload",
                    "clearselectors",
                    "-@all",
                ] {
                    self.apply(op)?;
                }
            }
            _ => match op.as_bytes()[0] {
                b'>' | b'#' => {
                    let h = if op.starts_with('>') {
                        hash(&op.as_bytes()[1..])
                    } else {
                        unhex(&op.as_bytes()[1..]).ok_or(RuleError::BadHash)?
                    };
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let h = if op.starts_with('<') {
                        hash(&op.as_bytes()[1..])
                    } else {
                        unhex(&op.as_bytes()[1..]).ok_or(RuleError::BadHash)?
                    };
                    let before = self.passwords.len();
                    self.passwords.retain(|p| *p != h);
                    if self.passwords.len() == before {
                        return Err(RuleError::NoSuchPassword);
                    }
                }
                b'(' if op.ends_with(')') && op.len() >= 2 => {
                    let mut s = Selector::default();
                    for inner in op[1..op.len() - 1].split_ascii_whitespace() {
                        s.apply(inner)?;
                    }
                    self.selectors.push(s);
                }
                _ => {
                    if let Some(root) = self.selectors.first_mut() {
                        root.apply(op)?;
                    }
                }
            },
        }
        Ok(())
    }

    /// Whether one selector allows every command and every channel (the
    /// default user's usual case): no request needs looking up then.
    pub fn allows_everything(&self) -> bool {
        let all = (1u128 << crate::sentinel::commands::COMMANDS.len()) - 1;
        self.selectors
            .iter()
            .any(|s| s.allchannels && s.allowed & all == all)
    }

    /// `ACLCheckAllUserCommandPerm`: allowed when one selector allows it;
    /// otherwise the most relevant denial (channels over commands, then
    /// the last argument).
    pub fn check(&self, id: usize, args: &[&[u8]]) -> Result<(), Denial> {
        let mut worst = Denial::Command;
        for s in &self.selectors {
            match s.check(id, args) {
                Ok(()) => return Ok(()),
                Err(d) => worst = worst.max(d),
            }
        }
        Err(worst)
    }

    /// The flags, in Valkey's order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f.push(if self.skip_sanitize {
            "skip-sanitize-payload"
        } else {
            "sanitize-payload"
        });
        f
    }

    /// The password digests, in hex.
    pub fn password_hashes(&self) -> Vec<String> {
        self.passwords.iter().map(hex).collect()
    }

    /// The root selector.
    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// The `(…)` selectors.
    pub fn extra_selectors(&self) -> &[Selector] {
        &self.selectors[1..]
    }

    /// `ACLDescribeUser`: the rules after `user <name>` in `ACL LIST`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for f in self.flags() {
            s.push_str(f);
            s.push(' ');
        }
        for p in &self.passwords {
            s.push('#');
            s.push_str(&hex(p));
            s.push(' ');
        }
        s.push_str(&self.root().describe());
        for sel in self.extra_selectors() {
            s.push_str(&format!(" ({})", sel.describe()));
        }
        s
    }
}

/// `ACLMergeSelectorArguments`: joins `(` … `)` spanning several
/// arguments into one. `Err(index)` for an unmatched parenthesis.
pub fn merge_selectors(args: &[String]) -> Result<Vec<String>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, a) in args.iter().enumerate() {
        match open.as_mut() {
            Some((_, acc)) => {
                acc.push(' ');
                acc.push_str(a);
                if a.ends_with(')')
                    && let Some((_, acc)) = open.take()
                {
                    out.push(acc);
                }
            }
            None if a.starts_with('(') && !a.ends_with(')') => open = Some((i, a.clone())),
            None => out.push(a.clone()),
        }
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(out),
    }
}

/// A description (`ACL LIST`'s rules) split back into rules, `(…)`
/// selectors kept whole.
pub fn merge_selectors_of(text: &str) -> Vec<String> {
    let parts: Vec<String> = text
        .split(' ')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    merge_selectors(&parts).unwrap_or(parts)
}
