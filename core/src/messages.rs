//! What crosses the core's boundary: the commands it asks the shell to
//! send to instances and their replies, the inputs it is fed and the
//! outputs it returns.

use super::group::{FenceSetting, Op, Outcome, Refusal};
use super::peering::{DownAnswer, HelloVia};
use super::{Addr, Event, GroupState, InfoReport, LinkFailure, Millis};

/// A command the core asks the shell to send to an instance.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// `REPLICAOF NO ONE`.
    ReplicaOfNoOne,
    /// `REPLICAOF <host> <port>`.
    ReplicaOf(Addr),
    /// `CLIENT KILL TYPE normal`, so clients reconnect and rediscover.
    KillNormalClients,
    /// `CLIENT KILL TYPE pubsub`.
    KillPubsubClients,
    /// `INFO server replication keyspace`, to confirm a promotion from
    /// what the replica itself reports (role and offset).
    AskInfo,
    /// `CLIENT PAUSE <ms> WRITE`: the master of a planned switchover
    /// stops taking writes (and lets them wait) until unpaused or `ms`
    /// passed.
    PauseWrites {
        /// How long the pause lasts at most: it ends by itself should
        /// nothing unpause it.
        ms: Millis,
    },
    /// `CLIENT UNPAUSE`.
    Unpause,
    /// `CONFIG SET min-replicas-to-write … min-replicas-max-lag …
    /// repl-ping-replica-period …`: the write fence
    /// ([`write_fence`](super::group::write_fence)).
    SetWriteFence(FenceSetting),
}

/// A reply to a [`Command`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// `+OK` (or any non-error reply the core needs no detail of).
    Ok,
    /// A parsed `INFO` reply.
    Report(InfoReport),
    /// An error reply or a failed send.
    Failed(String),
}

/// What happened, as the shell saw it.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// Time passed.
    Tick,
    /// A valid PING reply from an instance.
    PingOk {
        /// The group the instance belongs to.
        group: String,
        /// The instance.
        addr: Addr,
    },
    /// A PING answered with an error that is not a valid reply
    /// (`-NOAUTH`, `-MISCONF`, `-BUSY`, an unknown command…; `-LOADING`
    /// and `-MASTERDOWN` are neither this nor [`Input::PingOk`]).
    PingRefused {
        /// The group the instance belongs to.
        group: String,
        /// The instance.
        addr: Addr,
    },
    /// A link failed.
    LinkDown {
        /// The group.
        group: String,
        /// The instance.
        addr: Addr,
        /// How it failed.
        failure: LinkFailure,
    },
    /// What an instance reported in a periodic INFO.
    Report {
        /// The group.
        group: String,
        /// The instance.
        addr: Addr,
        /// The parsed reply.
        info: InfoReport,
    },
    /// The reply to a command the core asked for.
    Reply {
        /// The group.
        group: String,
        /// The instance.
        addr: Addr,
        /// The token of the [`Output::Send`] this answers.
        token: u64,
        /// The reply.
        reply: Reply,
    },
    /// A hello (`ip,port,runid,current_epoch,name,master_ip,master_port,
    /// config_epoch`), from a data node's channel or our Sentinel port.
    Hello {
        /// The payload as received.
        payload: String,
        /// Where it came from.
        via: HelloVia,
    },
    /// A peer answered a PING. `valid`: `PONG`, `-LOADING` or
    /// `-MASTERDOWN`; any other reply only shows the link is alive.
    PeerPing {
        /// The peer's run id.
        runid: String,
        /// Whether the reply counts as available.
        valid: bool,
    },
    /// A peer's command link is down (refused, reset, timed out).
    PeerLinkDown {
        /// The peer's run id.
        runid: String,
    },
    /// The group's route (a managed group's `-master` Service) reaches
    /// `to`, as asked by [`Output::Route`]; sent also when it could not
    /// be moved or confirmed, so the switchover goes on at once.
    Routed {
        /// The group.
        group: String,
        /// Where it was asked to lead.
        to: Addr,
    },
    /// A peer answered `SENTINEL is-master-down-by-addr` about a group's
    /// master (well-formed answers only; anything else is no information).
    DownReply {
        /// The group asked about.
        group: String,
        /// The peer's run id.
        runid: String,
        /// Its answer.
        answer: DownAnswer,
    },
}

/// What the shell must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// Send `command` to `to`; answer with [`Input::Reply`] and `token`.
    Send {
        /// The group.
        group: String,
        /// The instance.
        to: Addr,
        /// Correlates the reply.
        token: u64,
        /// The command.
        command: Command,
    },
    /// Publish an event.
    Event(Event),
    /// What a group advertises (master, replicas, epoch) changed.
    Topology {
        /// The group.
        group: String,
    },
    /// Start monitoring a newly discovered instance.
    Watch {
        /// The group.
        group: String,
        /// The instance.
        addr: Addr,
    },
    /// Write this group's state durably before carrying out any later
    /// output.
    Persist {
        /// The group.
        group: String,
        /// Its state now.
        state: GroupState,
    },
    /// Stop monitoring an instance (forgotten by `SENTINEL RESET`).
    Unwatch {
        /// The group.
        group: String,
        /// The instance.
        addr: Addr,
    },
    /// The group is no longer monitored (`SENTINEL REMOVE`): stop its
    /// links and drop its persisted state.
    Forget {
        /// The group.
        group: String,
    },
    /// Ask a peer `SENTINEL is-master-down-by-addr <master> <epoch>
    /// <candidate or *>`; answer with [`Input::DownReply`].
    AskPeer {
        /// The group.
        group: String,
        /// The peer's run id.
        runid: String,
        /// The master's address as we know it.
        master: Addr,
        /// Our current epoch.
        epoch: u64,
        /// Our run id when we ask for a vote; `None` (`*`) otherwise.
        candidate: Option<String>,
    },
    /// The peer table changed (a peer was added, moved or forgotten): the
    /// shell opens, moves or closes peer links to match
    /// [`Core::peer_links`].
    Peers,
    /// The group's master moved from `from` to `to`: run its
    /// client-reconfig script, if it has one (Sentinel's
    /// `client-reconfig-script`; emitted whether or not one is set).
    ClientReconfig {
        /// The group.
        group: String,
        /// Whether this daemon led the failover or adopted its result.
        role: ReconfRole,
        /// The old master.
        from: Addr,
        /// The new master.
        to: Addr,
    },
    /// Point the group's route (a managed group's `-master` Service) at
    /// `to`: the chosen replica ahead of a switchover, the master after
    /// one given up.
    Route {
        /// The group.
        group: String,
        /// The instance new connections should reach.
        to: Addr,
        /// A switchover waits: answer [`Input::Routed`] once new
        /// connections reach `to`.
        confirm: bool,
    },
    /// Publish this group's hello everywhere now (a promotion was just
    /// confirmed: peers should hear it at once).
    HelloNow {
        /// The group.
        group: String,
    },
    /// Something the operator should read in the log.
    Log {
        /// The group.
        group: String,
        /// What happened.
        message: String,
    },
    /// A group's peer table was full ([`MAX_PEERS`](super::peering::MAX_PEERS)):
    /// a peer was evicted or refused (counted).
    PeerRefused {
        /// The group.
        group: String,
        /// `evicted` or `full`.
        reason: &'static str,
    },
    /// A failover (or switchover) began: this daemon runs it.
    FailoverStarted {
        /// The group.
        group: String,
        /// Its epoch.
        epoch: u64,
    },
    /// The failover this daemon ran ended (`Failover` taken out of the
    /// group: promoted and reconfigured, given up, or superseded by a
    /// peer's configuration).
    FailoverEnded {
        /// The group.
        group: String,
        /// Its epoch.
        epoch: u64,
        /// Whether the group's configuration reached that epoch.
        result: FailoverResult,
        /// How long it ran, from its start (or its resumption after a
        /// restart).
        duration: Millis,
    },
    /// A failover or switchover was held back, vetoed, given up or
    /// refused, and why ([`refusal`](super::group::refusal)). The shell
    /// logs, counts and publishes it (`valkyrie:failover-reason`).
    Refused {
        /// The group.
        group: String,
        /// A failover or a switchover.
        op: Op,
        /// Held, vetoed, aborted or refused.
        outcome: Outcome,
        /// The epoch concerned: the attempt's when one was given up, the
        /// group's otherwise.
        epoch: u64,
        /// Why, as the step tested it.
        reason: Refusal,
    },
    /// `SENTINEL SIMULATE-FAILURE` asked for a crash at `point`, and it
    /// is reached: the shell carries out the outputs before this one (the
    /// `Persist` that makes the step durable among them), then exits
    /// with status 99 and carries out nothing after it.
    Crash {
        /// Where.
        point: CrashPoint,
    },
}

/// Where `SENTINEL SIMULATE-FAILURE` makes the daemon crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrashPoint {
    /// Right after `+elected-leader`: nothing sent to any instance yet.
    AfterElection,
    /// When the promotion is confirmed and persisted, before any other
    /// replica is reconfigured or any hello sent.
    AfterPromotion,
}

impl CrashPoint {
    /// Sentinel's name for it.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterElection => "crash-after-election",
            CrashPoint::AfterPromotion => "crash-after-promotion",
        }
    }

    /// Its bit in INFO's `sentinel_simulate_failure_flags`.
    pub fn bit(self) -> u8 {
        match self {
            CrashPoint::AfterElection => 1,
            CrashPoint::AfterPromotion => 2,
        }
    }
}

/// Who tells the client-reconfig script of a master's move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReconfRole {
    /// This daemon promoted the new master.
    Leader,
    /// This daemon adopted a configuration a peer (or the instances)
    /// showed it.
    Observer,
}

impl ReconfRole {
    /// The script's second argument: `leader` or `observer`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReconfRole::Leader => "leader",
            ReconfRole::Observer => "observer",
        }
    }
}

/// How a failover ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailoverResult {
    /// The group's configuration reached its epoch: its promotion (or a
    /// peer's configuration as new as it) was adopted.
    Succeeded,
    /// It was given up (timeout, lost data, interrupted by a restart).
    Aborted,
}

impl FailoverResult {
    /// Its name in logs and metric labels.
    pub fn label(self) -> &'static str {
        match self {
            FailoverResult::Succeeded => "succeeded",
            FailoverResult::Aborted => "aborted",
        }
    }
}
