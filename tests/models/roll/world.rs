//! The world of `tests/models/roll/mod.rs`: the pods, their Valkeys, the
//! core's failovers, the reconciler's stored plan, and what the
//! reconciler observes of them.

use std::fmt::Write as _;

use valkyrie::kube::controller::roll::plan::{self, Member, Observed, Plan, PodState, Step, Sync};

/// Pods (ordinals `0..PODS`).
pub const PODS: usize = 3;
/// `roll_patience`, in seconds; only a pod that never comes back is older.
pub const PATIENCE: u64 = 60;
/// One write's bytes: a replica one write behind is still caught up
/// (`plan::CAUGHT_UP_BYTES`), two behind is not.
pub const WRITE_BYTES: u64 = plan::CAUGHT_UP_BYTES;

/// A replica's link to the advertised master.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// Never synced since it started (empty): never promoted.
    Never,
    /// Synced once, not with the master there is now.
    Stale,
    /// Linked to the up master: what it holds is a prefix of the master's.
    Up,
}

/// A pod's Valkey process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Valkey {
    Down,
    Master,
    Replica(Link),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pod {
    /// Runs the update revision.
    pub new: bool,
    pub life: PodState,
    pub valkey: Valkey,
    /// The writes it holds, a bit each.
    pub data: u8,
    /// Its preStop hook waits: it was the master when its deletion began
    /// (the hook runs once, then; a pod promoted later stops unheld).
    pub hook: bool,
}

/// A failover or switchover the core runs, and the replica it chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Running {
    /// A switchover (the roll's, or the hand-over of a master pod being
    /// deleted): writes paused, the replica catches up, then is promoted.
    Switchover(usize),
    /// An unplanned failover of a master that is down.
    Failover(usize),
}

/// Which faults a run may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Faults {
    /// The reconciler crashes or the Lease moves: the stored plan is
    /// dropped, and the new process has marked nothing retiring.
    pub reconciler: bool,
    /// A starting pod never becomes Ready.
    pub stuck: bool,
    /// The master's Valkey dies; its pod restarts empty.
    pub master: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The reconciler deleted a pod holding a write (not lost already)
    /// that no other live pod holds.
    OnlyCopyDeleted,
    /// A master pod went away (not by a crash) with a write no other live
    /// pod holds.
    OnlyCopyRemoved,
    /// Two Valkeys took writes.
    TwoMasters,
    /// The reconciler deleted a pod while one never came back.
    DeletedPastStuck,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sys {
    pub pods: [Pod; PODS],
    /// The StatefulSet's size as applied.
    pub size: i32,
    /// The master the core advertises (up or not).
    pub master: usize,
    pub running: Option<Running>,
    /// The ordinals the core never promotes, a bit each.
    pub retiring: u8,
    /// Acknowledged writes (ids `0..writes`).
    pub writes: u8,
    /// The plan observed, not yet acted on, and the master it was
    /// observed with.
    pub stored: Option<(Plan, usize)>,
    pub faults: u8,
    /// The master's Valkey crashed once (its unreplicated writes may be
    /// lost).
    pub crashed: bool,
    /// The acknowledged writes an unplanned failover lost (the replica
    /// promoted lacked them): a copy left elsewhere is on a dead history.
    pub lost: u8,
    /// The pod that never comes back.
    pub stuck: Option<usize>,
    pub violation: Option<(Kind, String)>,
}

pub fn bit(n: usize) -> u8 {
    1 << n
}

impl Sys {
    pub fn new(master: usize, new: bool, size: i32) -> Sys {
        let pods = std::array::from_fn(|n| Pod {
            new,
            life: PodState::Ready,
            valkey: if n == master {
                Valkey::Master
            } else {
                Valkey::Replica(Link::Up)
            },
            data: 0,
            hook: false,
        });
        Sys {
            pods,
            size,
            master,
            running: None,
            retiring: 0,
            writes: 0,
            stored: None,
            faults: 0,
            crashed: false,
            lost: 0,
            stuck: None,
            violation: None,
        }
    }

    pub fn acked(&self) -> u8 {
        (1u8 << self.writes) - 1
    }

    pub fn master_up(&self) -> bool {
        self.pods[self.master].valkey == Valkey::Master
    }

    /// What `roll::act` re-checks before a deletion or a switchover: the
    /// master observed is the master, up, and no failover runs.
    pub fn unchanged(&self, seen: usize) -> bool {
        self.master == seen && self.master_up() && self.running.is_none()
    }

    /// What Valkyrie sees of pod `n`'s Valkey (`roll::sync_of`).
    fn sync_of(&self, n: usize) -> Sync {
        let p = &self.pods[n];
        if n == self.master {
            return if self.master_up() {
                Sync::Master
            } else {
                Sync::Unknown
            };
        }
        match p.valkey {
            Valkey::Down => Sync::Unknown,
            Valkey::Replica(Link::Up) if self.master_up() => {
                let gap = self.pods[self.master].data & !p.data;
                let behind = u64::from(gap.count_ones()) * WRITE_BYTES;
                if behind <= plan::CAUGHT_UP_BYTES {
                    Sync::Synced
                } else {
                    Sync::Behind(behind)
                }
            }
            Valkey::Replica(_) | Valkey::Master => Sync::Unlinked,
        }
    }

    /// What one reconcile observes (`roll::observe`).
    pub fn observe(&self, want: i32, strict_need: Option<u64>) -> Observed {
        // As `roll::observe`: the ordinals below both sizes, and any pod
        // beyond that still exists.
        let beyond = (0..PODS)
            .filter(|&n| self.pods[n].life != PodState::Missing)
            .max()
            .map_or(0, |n| n as i32 + 1);
        let members = (0..want.max(self.size).max(beyond))
            .map(|ordinal| {
                let n = ordinal as usize;
                let p = &self.pods[n];
                Member {
                    ordinal,
                    // A missing pod has no revision: it counts as current.
                    current: p.new || p.life == PodState::Missing,
                    pod: p.life,
                    sync: self.sync_of(n),
                    age_secs: if self.stuck == Some(n) {
                        PATIENCE + 1
                    } else {
                        0
                    },
                }
            })
            .collect();
        Observed {
            want,
            size: self.size,
            members,
            failover: self.running.is_some(),
            strict_need,
            patience_secs: PATIENCE,
        }
    }

    /// The ordinals `roll::decide` marks retiring for `o` and its plan.
    pub fn retiring_for(o: &Observed, p: &Plan) -> u8 {
        plan::retiring(o, p)
            .into_iter()
            .fold(0, |r, n| r | bit(n as usize))
    }

    /// The replicas a switchover may promote: linked to the up master,
    /// running, not retiring (the core does not look at the pod).
    pub fn switchover_candidates(&self) -> Vec<usize> {
        (0..PODS)
            .filter(|&n| n != self.master && self.retiring & bit(n) == 0)
            .filter(|&n| self.pods[n].valkey == Valkey::Replica(Link::Up))
            .collect()
    }

    /// The replicas an unplanned failover may promote: synced once, not
    /// retiring, holding the most writes among those.
    pub fn failover_candidates(&self) -> Vec<usize> {
        let eligible: Vec<usize> = (0..PODS)
            .filter(|&n| n != self.master && self.retiring & bit(n) == 0)
            .filter(|&n| matches!(self.pods[n].valkey, Valkey::Replica(Link::Up | Link::Stale)))
            .collect();
        let most = eligible
            .iter()
            .map(|&n| self.pods[n].data.count_ones())
            .max();
        eligible
            .into_iter()
            .filter(|&n| Some(self.pods[n].data.count_ones()) == most)
            .collect()
    }

    /// The acknowledged writes, not lost, that pod `n` holds and no
    /// other live pod does.
    pub fn only_copies(&self, n: usize) -> u8 {
        let others = (0..PODS)
            .filter(|&j| j != n && self.pods[j].valkey != Valkey::Down)
            .fold(0, |d, j| d | self.pods[j].data);
        self.pods[n].data & self.acked() & !self.lost & !others
    }

    pub fn violate(&mut self, kind: Kind, what: String) {
        if self.violation.is_none() {
            self.violation = Some((kind, what));
        }
    }

    pub fn violated(&self, kind: Kind) -> bool {
        self.violation.as_ref().is_some_and(|(k, _)| *k == kind)
    }

    /// Promotes `to`: a switchover brings it up to the master's writes
    /// first; every other replica must sync again.
    pub fn promote(&mut self, to: usize, catch_up: bool) {
        let old = self.master;
        if catch_up {
            self.pods[to].data = self.pods[old].data;
        } else {
            self.lost |= self.acked() & !self.pods[to].data;
        }
        for (n, p) in self.pods.iter_mut().enumerate() {
            if let Valkey::Replica(Link::Up) = p.valkey {
                p.valkey = Valkey::Replica(Link::Stale);
            }
            if n == old && p.valkey == Valkey::Master {
                // The demoted master holds everything the new one does.
                p.valkey = Valkey::Replica(Link::Up);
            }
        }
        self.pods[to].valkey = Valkey::Master;
        self.master = to;
        self.running = None;
    }

    /// Pod `n` is deleted: its hook holds it while it is the master.
    pub fn terminate(&mut self, n: usize) {
        let p = &mut self.pods[n];
        p.life = PodState::Terminating;
        p.hook = p.valkey == Valkey::Master;
    }

    /// Pod `n`'s Valkey stops (its pod gone or restarting): it holds
    /// nothing any more.
    pub fn stop(&mut self, n: usize, life: PodState) {
        let was_master = self.pods[n].valkey == Valkey::Master;
        let p = &mut self.pods[n];
        p.life = life;
        p.valkey = Valkey::Down;
        p.data = 0;
        p.hook = false;
        if was_master {
            for p in &mut self.pods {
                if p.valkey == Valkey::Replica(Link::Up) {
                    p.valkey = Valkey::Replica(Link::Stale);
                }
            }
        }
    }

    /// One line for a trace.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for (n, p) in self.pods.iter().enumerate() {
            let life = match p.life {
                PodState::Missing => "missing",
                PodState::Starting => "starting",
                PodState::Ready => "ready",
                PodState::Terminating => "terminating",
            };
            let valkey = match p.valkey {
                Valkey::Down => "down",
                Valkey::Master => "MASTER",
                Valkey::Replica(Link::Never) => "replica(never synced)",
                Valkey::Replica(Link::Stale) => "replica(stale)",
                Valkey::Replica(Link::Up) => "replica(linked)",
            };
            let _ = write!(
                s,
                "{n}:{}/{life}{}/{valkey}/{:02b}{}{} ",
                if p.new { "new" } else { "old" },
                if p.hook { "(hook)" } else { "" },
                p.data,
                if self.retiring & bit(n) != 0 {
                    "/retiring"
                } else {
                    ""
                },
                if self.stuck == Some(n) { "/stuck" } else { "" },
            );
        }
        let _ = write!(
            s,
            "| size {} master {} {:?} writes {} plan {:?}",
            self.size,
            self.master,
            self.running,
            self.writes,
            self.stored.as_ref().map(|(p, m)| (p.size, &p.step, *m)),
        );
        s
    }
}

/// Whether a plan's step is a wait on (or a stall at) pod `n`.
pub fn waits_on(step: &Step, n: usize) -> bool {
    let n = n as i32;
    matches!(step, Step::Stalled { ordinal, .. } if *ordinal == n)
        || matches!(step, Step::Wait { ordinal: Some(o), .. } if *o == n)
}
