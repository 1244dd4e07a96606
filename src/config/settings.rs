//! The configuration's values: [`Config`], each monitored group's
//! [`GroupConfig`], the command-line [`Overrides`], the defaults, and the
//! rules on names, hosts and renamed commands that the parser and the
//! Sentinel port share.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::secret::Secret;
use super::tls::{GroupTls, TlsSettings};

/// Default Sentinel port.
pub const DEFAULT_PORT: u16 = 26379;
/// Default topology-push (index) port.
pub const DEFAULT_INDEX_PORT: u16 = 12120;
/// Default admin HTTP port.
pub const DEFAULT_ADMIN_PORT: u16 = 9126;
/// Default of `index-max-subscribers-per-address`: many application
/// processes behind one address fit, while one host's stalled sockets cost
/// a change at most this many writes.
pub const DEFAULT_INDEX_MAX_PER_ADDRESS: usize = 256;

/// The whole configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Sentinel protocol port (`port`).
    pub port: u16,
    /// Addresses to listen on (`bind`); empty means all interfaces.
    pub bind: Vec<String>,
    /// Working directory for the state file (`dir`).
    pub dir: PathBuf,
    /// Topology-push port (`index-port`), 0 disables.
    pub index_port: u16,
    /// Admin HTTP port (`admin-port`), 0 disables.
    pub admin_port: u16,
    /// Whether `index_port` was asked for (the file, a flag, the
    /// environment) rather than left at its default: a default port that
    /// another daemon on the host already holds is turned off with a
    /// warning, an asked-for one stops the start.
    pub index_port_given: bool,
    /// Likewise for `admin_port`.
    pub admin_port_given: bool,
    /// `logfile <path>`: where the log goes, appended to and reopened when
    /// the file is moved away; `None` (`logfile ""`): standard error.
    pub logfile: Option<PathBuf>,
    /// `admin-bind <addr>…`: where the admin port listens (empty: the
    /// `bind` addresses, as the other ports).
    pub admin_bind: Vec<String>,
    /// `admin-auth-token-file <path>`: the status page and API ask for
    /// `Authorization: Bearer <the file's content>`.
    pub admin_auth_token_file: Option<PathBuf>,
    /// `admin-auth-basic-file <path>`: the status page and API ask for
    /// basic auth with the file's `user:password`.
    pub admin_auth_basic_file: Option<PathBuf>,
    /// Password of the default user on the Sentinel port (`requirepass`).
    pub requirepass: Option<Secret>,
    /// ACL users on the Sentinel port (`user <name> <rules…>`), rules as
    /// written.
    pub users: Vec<UserRule>,
    /// The Sentinel port's ACL as last changed by `ACL SETUSER`/`DELUSER`
    /// (restored from the state file): replaces `requirepass` and `users`.
    pub acl: Option<Vec<UserRule>>,
    /// `loglevel`: debug, verbose, notice or warning.
    pub loglevel: String,
    /// Maximum Sentinel-port clients (`maxclients`).
    pub maxclients: usize,
    /// Index subscribers one client address may hold
    /// (`index-max-subscribers-per-address`; 0: no such limit).
    pub index_max_per_address: usize,
    /// `sentinel announce-ip`.
    pub announce_ip: Option<String>,
    /// `sentinel announce-port` (0: the listening port).
    pub announce_port: u16,
    /// `sentinel resolve-hostnames`.
    pub resolve_hostnames: bool,
    /// `sentinel announce-hostnames`.
    pub announce_hostnames: bool,
    /// `protected-mode` (default yes): while the default user needs no
    /// password, clients from outside the loopback may only read
    /// (`docs/security.md`, "Protected mode").
    pub protected_mode: bool,
    /// `sentinel sentinel-user`: the user peer links authenticate as
    /// (with `sentinel-pass`; else `requirepass`, as Sentinel).
    pub sentinel_user: Option<String>,
    /// `sentinel sentinel-pass`, likewise.
    pub sentinel_pass: Option<Secret>,
    /// `client-output-buffer-limit pubsub <hard> <soft> <seconds>`: when a
    /// subscriber that does not read is disconnected.
    pub pubsub_limit: OutputLimit,
    /// Monitored groups, in file order.
    pub groups: Vec<GroupConfig>,
    /// `sentinel myid`: the daemon's id, 40 hex characters. When absent,
    /// the id saved in the state file, else a fresh random one (saved).
    pub myid: Option<String>,
    /// `sentinel deny-scripts-reconfig` (default yes): `SENTINEL SET`
    /// may not change a group's scripts; only this file names them.
    pub deny_scripts_reconfig: bool,
    /// `sentinel current-epoch`: the global epoch when no state file
    /// exists yet.
    pub current_epoch: u64,
    /// The `tls-*` directives, `index-tls` and `admin-tls`.
    pub tls: TlsSettings,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            port: DEFAULT_PORT,
            bind: Vec::new(),
            dir: PathBuf::from("."),
            index_port: DEFAULT_INDEX_PORT,
            admin_port: DEFAULT_ADMIN_PORT,
            index_port_given: false,
            admin_port_given: false,
            logfile: None,
            admin_bind: Vec::new(),
            admin_auth_token_file: None,
            admin_auth_basic_file: None,
            requirepass: None,
            users: Vec::new(),
            acl: None,
            loglevel: "notice".into(),
            maxclients: 10_000,
            index_max_per_address: DEFAULT_INDEX_MAX_PER_ADDRESS,
            announce_ip: None,
            announce_port: 0,
            resolve_hostnames: false,
            announce_hostnames: false,
            protected_mode: true,
            sentinel_user: None,
            sentinel_pass: None,
            pubsub_limit: OutputLimit::PUBSUB,
            groups: Vec::new(),
            myid: None,
            deny_scripts_reconfig: true,
            current_epoch: 0,
            tls: TlsSettings::new(),
        }
    }
}

/// Whether `id` can be a daemon id: 40 hexadecimal characters, as the
/// run ids Sentinel makes.
pub fn valid_myid(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The error for a master name that breaks [`valid_name`] (`SENTINEL
/// MONITOR` prefixes `ERR `).
pub const BAD_MASTER_NAME: &str =
    "Master names cannot contain spaces, newlines or special characters.";
/// The error for a host that breaks [`valid_name`].
pub const BAD_HOST: &str = "Hosts cannot contain spaces, newlines or special characters.";

/// Whether a master name or host can be carried by every line-oriented
/// output (event payloads, `INFO`, `CLIENT LIST`-like lines, logs): every
/// byte within `!`..`~`, as Valkey's rule for client names. Sentinel
/// accepts any name, but one with a space or a newline breaks its own
/// event payloads and config rewrite; Valkyrie refuses it.
/// An empty name is refused too: the index port would send
/// `SNAPSHOT  epoch=…`, which its clients cannot read. So is a name
/// longer than [`MAX_NAME_LEN`].
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| (b'!'..=b'~').contains(&b))
}

/// The longest master name or host, in bytes. It keeps every line that
/// carries one within the index protocol's limits even when each byte is
/// %-escaped (3 bytes): a client's `WATCH <name>` within
/// `MAX_COMMAND_LINE` (4 KiB), and `SNAPSHOT`/`MASTER` lines far within
/// `MAX_SERVER_LINE` (64 KiB). Hostnames are at most 253 bytes anyway.
pub const MAX_NAME_LEN: usize = 1024;

/// The error for a master name longer than [`MAX_NAME_LEN`].
pub const LONG_MASTER_NAME: &str = "Master names cannot be longer than 1024 bytes.";

/// Why `name` cannot be a master name ([`BAD_MASTER_NAME`] or
/// [`LONG_MASTER_NAME`]), or `None` when it can.
pub fn master_name_error(name: &str) -> Option<&'static str> {
    if name.len() > MAX_NAME_LEN {
        Some(LONG_MASTER_NAME)
    } else if valid_name(name) {
        None
    } else {
        Some(BAD_MASTER_NAME)
    }
}

impl Config {
    /// Two of Valkyrie's ports set to the same number (0, disabled, never
    /// conflicts): the second listener could not bind. Names both.
    pub fn port_conflict(&self) -> Option<String> {
        let ports = [
            ("port", self.port),
            ("tls-port", self.tls.port.unwrap_or(0)),
            ("index-port", self.index_port),
            ("admin-port", self.admin_port),
        ];
        for (i, (a, pa)) in ports.iter().enumerate() {
            for (b, pb) in &ports[i + 1..] {
                if *pa != 0 && pa == pb {
                    return Some(format!("'{a}' and '{b}' are both {pa}"));
                }
            }
        }
        None
    }

    /// The group called `name`.
    pub fn group(&self, name: &str) -> Option<&GroupConfig> {
        self.groups.iter().find(|g| g.name == name)
    }
}

/// An output-buffer limit, as Valkey's `client-output-buffer-limit`: a
/// client whose pending output exceeds `hard` bytes, or stays above `soft`
/// bytes for `soft_secs` seconds, is disconnected. 0 disables a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimit {
    /// Bytes; 0: none.
    pub hard: u64,
    /// Bytes; 0: none.
    pub soft: u64,
    /// Seconds above `soft` before the disconnect.
    pub soft_secs: u64,
}

impl OutputLimit {
    /// Valkey's default for pub/sub clients: `32mb 8mb 60`.
    pub const PUBSUB: OutputLimit = OutputLimit {
        hard: 32 * 1024 * 1024,
        soft: 8 * 1024 * 1024,
        soft_secs: 60,
    };
}

/// An ACL user line: `user <name> <rule>…`.
#[derive(Clone, PartialEq, Eq)]
pub struct UserRule {
    /// The user name.
    pub name: String,
    /// Its rules as written (`on`, `>password`, `+@all`, …).
    pub rules: Vec<String>,
}

impl fmt::Debug for UserRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Rules carry passwords (`>secret`, `#hash`): never print them.
        f.debug_struct("UserRule")
            .field("name", &self.name)
            .field("rules", &self.rules.len())
            .finish()
    }
}

/// One monitored master and how to treat it (`sentinel monitor` and the
/// per-master `sentinel …` directives).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupConfig {
    /// The master's name, as clients ask for it.
    pub name: String,
    /// Address of the initial master.
    pub host: String,
    /// Port of the initial master.
    pub port: u16,
    /// The quorum: with peers, the sentinels that must see the master down
    /// for ODOWN, and the least votes an election needs.
    pub quorum: u32,
    /// `down-after-milliseconds` (default 30 s).
    pub down_after: Duration,
    /// `failover-timeout` (default 180 s).
    pub failover_timeout: Duration,
    /// `parallel-syncs` (default 1).
    pub parallel_syncs: u32,
    /// `auth-pass`: password for the monitored instances.
    pub auth_pass: Option<Secret>,
    /// `auth-user`: ACL user for the monitored instances.
    pub auth_user: Option<String>,
    /// `master-reboot-down-after-period` (0: disabled).
    pub master_reboot_down_after_period: Duration,
    /// `write-fence` and `write-fence-lag` (Valkyrie's): how the group's
    /// masters are fenced (`docs/failover.md`, "The write fence").
    pub write_fence: crate::core::WriteFence,
    /// How long a switchover waits for the group's `-master` Service to
    /// reach the chosen replica before pausing writes (a CR group's,
    /// `--kubernetes-route-wait-ms`); zero: the group has no route.
    pub route_wait: Duration,
    /// `known-replica` / `known-slave` entries from a file Sentinel wrote.
    pub known_replicas: Vec<(String, u16)>,
    /// `rename-command <cmd> <renamed>` pairs.
    pub renamed_commands: Vec<(String, String)>,
    /// `known-sentinel <name> <ip> <port> <runid>` entries (a file a
    /// sentinel wrote): the peer table when no state file exists yet.
    pub known_sentinels: Vec<(String, String, u16)>,
    /// `config-epoch`: the configuration's epoch when no state file
    /// exists yet.
    pub config_epoch: u64,
    /// `leader-epoch`: the epoch of the last vote when no state file
    /// exists yet (no second vote in it).
    pub leader_epoch: u64,
    /// Who owns the group's definition: sentinel.conf and the Sentinel
    /// commands, or a Kubernetes custom resource.
    pub owner: GroupOwner,
    /// The group's own TLS toward its instances (a CR's `spec.tls`);
    /// `None`: links follow `tls-replication`.
    pub tls: Option<GroupTls>,
    /// `notification-script`: run with each WARNING event of the group
    /// (`src/scripts/`); relative to `dir`.
    pub notification_script: Option<String>,
    /// `client-reconfig-script`: run when the group's master moves.
    pub client_reconfig_script: Option<String>,
}

/// Who owns a group's definition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum GroupOwner {
    /// sentinel.conf, `SENTINEL MONITOR`/`SET`/`REMOVE`.
    #[default]
    Config,
    /// A `ValkeyCluster` custom resource: only its reconciliation changes
    /// or removes the group; the Sentinel commands that would are refused.
    Kubernetes {
        /// The resource's namespace.
        namespace: String,
        /// The resource's name.
        name: String,
        /// The resource's `metadata.labels`, as last applied: what a label
        /// selector (`VALKYRIE PAUSE SELECTOR`) matches. Not part of who
        /// owns the group ([`GroupOwner::same_resource`]).
        labels: BTreeMap<String, String>,
    },
}

impl GroupOwner {
    /// The owning resource's labels; `None` for a group of the
    /// configuration (it has none, and no selector selects it).
    pub fn labels(&self) -> Option<&BTreeMap<String, String>> {
        match self {
            GroupOwner::Config => None,
            GroupOwner::Kubernetes { labels, .. } => Some(labels),
        }
    }

    /// Whether `other` is the same owner, whatever the labels say: a
    /// resource relabelled still owns its group.
    pub fn same_resource(&self, other: &GroupOwner) -> bool {
        match (self, other) {
            (GroupOwner::Config, GroupOwner::Config) => true,
            (
                GroupOwner::Kubernetes {
                    namespace, name, ..
                },
                GroupOwner::Kubernetes {
                    namespace: n2,
                    name: m2,
                    ..
                },
            ) => namespace == n2 && name == m2,
            _ => false,
        }
    }
}

impl std::fmt::Display for GroupOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupOwner::Config => f.write_str("the configuration"),
            GroupOwner::Kubernetes {
                namespace, name, ..
            } => {
                write!(f, "valkeyclusters.valkyrie.io {namespace}/{name}")
            }
        }
    }
}

impl GroupConfig {
    /// A group with Sentinel's defaults.
    pub fn new(name: impl Into<String>, host: impl Into<String>, port: u16, quorum: u32) -> Self {
        GroupConfig {
            name: name.into(),
            host: host.into(),
            port,
            quorum,
            down_after: Duration::from_millis(30_000),
            failover_timeout: Duration::from_millis(180_000),
            parallel_syncs: 1,
            auth_pass: None,
            auth_user: None,
            master_reboot_down_after_period: Duration::ZERO,
            write_fence: crate::core::WriteFence::default(),
            route_wait: Duration::ZERO,
            known_replicas: Vec::new(),
            renamed_commands: Vec::new(),
            known_sentinels: Vec::new(),
            config_epoch: 0,
            leader_epoch: 0,
            owner: GroupOwner::Config,
            tls: None,
            notification_script: None,
            client_reconfig_script: None,
        }
    }
}

/// Whether the script `path` exists and may be run, as Sentinel checks it
/// (`access(X_OK)`), a relative path against `dir` (Sentinel's working
/// directory). Blocking: a file system call.
pub fn script_runnable(dir: &std::path::Path, path: &str) -> bool {
    rustix::fs::access(dir.join(path), rustix::fs::Access::EXEC_OK).is_ok()
}

/// Sentinel's error for a notification script that cannot be run.
pub const BAD_NOTIFICATION_SCRIPT: &str =
    "Notification script seems non existing or non executable";
/// Sentinel's error for a client-reconfig script that cannot be run.
pub const BAD_RECONFIG_SCRIPT: &str =
    "Client reconfiguration script seems non existing or non executable";

/// Something worth telling the operator about a directive that was
/// accepted but has no effect (or a different one) in Valkyrie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// 1-based line number.
    pub line: usize,
    /// What happened and why.
    pub message: String,
    /// Logged as a warning rather than as information: a Valkey server
    /// directive Valkyrie does not know what to do with, ignored.
    pub warning: bool,
}

/// A configuration error, naming where it is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error's text.
        message: String,
    },
    /// A directive is unknown, malformed or invalid.
    #[error("{path}:{line}: {message}")]
    Directive {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Values from the command line and `VALKYRIE_*` environment variables,
/// applied over the file. The field comments are the flags' help text.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Overrides {
    /// Sentinel protocol port.
    #[arg(long, env = "VALKYRIE_PORT")]
    pub port: Option<u16>,
    /// Addresses to listen on (repeat, or comma-separate).
    #[arg(long, env = "VALKYRIE_BIND", value_delimiter = ',')]
    pub bind: Option<Vec<String>>,
    /// Directory for the state file.
    #[arg(long, env = "VALKYRIE_DIR")]
    pub dir: Option<PathBuf>,
    /// Topology-push port (0 disables).
    #[arg(long, env = "VALKYRIE_INDEX_PORT")]
    pub index_port: Option<u16>,
    /// Admin HTTP port (0 disables).
    #[arg(long, env = "VALKYRIE_ADMIN_PORT")]
    pub admin_port: Option<u16>,
    /// Log level: debug, verbose, notice, warning.
    #[arg(long, env = "VALKYRIE_LOGLEVEL")]
    pub loglevel: Option<String>,
    /// Log file, instead of the file's `logfile` (`--logfile ""`: standard
    /// error; clap's own path parser refuses an empty value).
    #[arg(
        long,
        env = "VALKYRIE_LOGFILE",
        value_parser = clap::builder::TypedValueParser::map(
            clap::builder::OsStringValueParser::new(),
            PathBuf::from
        )
    )]
    pub logfile: Option<PathBuf>,
}

impl Overrides {
    /// Applies every value that is set.
    pub fn apply(&self, config: &mut Config) {
        if let Some(p) = self.port {
            config.port = p;
        }
        if let Some(b) = &self.bind {
            config.bind.clone_from(b);
        }
        if let Some(d) = &self.dir {
            config.dir.clone_from(d);
        }
        if let Some(p) = self.index_port {
            config.index_port = p;
            config.index_port_given = true;
        }
        if let Some(p) = self.admin_port {
            config.admin_port = p;
            config.admin_port_given = true;
        }
        if let Some(f) = &self.logfile {
            config.logfile = (!f.as_os_str().is_empty()).then(|| f.clone());
        }
        if let Some(l) = &self.loglevel {
            config.loglevel.clone_from(l);
        }
    }
}

/// Checks a `rename-command <cmd> <renamed>` pair, from the file or from
/// `SENTINEL SET`: the new name is printable ASCII, and not another of
/// Valkey's own commands (`rename-command PING FLUSHALL` would wipe the
/// data once a second). Renaming a command to itself is allowed.
pub fn check_rename(cmd: &str, renamed: &str) -> Result<(), String> {
    if renamed.is_empty() || !renamed.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "rename-command {cmd}: the new name must be printable ASCII without spaces"
        ));
    }
    if super::valkey_commands::is_valkey_command(renamed) && !renamed.eq_ignore_ascii_case(cmd) {
        return Err(format!(
            "rename-command {cmd} {renamed}: '{renamed}' is another Valkey command; a renamed \
             command gets a name of its own"
        ));
    }
    Ok(())
}
