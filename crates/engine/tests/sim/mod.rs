//! A deterministic simulation of a whole group of pure nodes: N members,
//! each a `GroupState` + `NodeCore` + model database + durable log in its
//! own `MemStorage`, driven by one seeded `StdRng` in one thread, with time
//! a number the loop advances (100 ms a tick).
//!
//! ```text
//!   seed ─► Knobs (fault menu) ─► forming ─► faults (knobs.steps ticks) ─► healing ─► final checks
//!
//!   each tick:  faults ─► restarts ─► election ─► membership change ─► clients
//!               ─► replication ─► leader orders submissions ─► fsync ─► commit
//!               ─► connectivity ─► members apply committed entries (GroupState,
//!               NodeCore, commands) ─► appliers commit to the databases ─► ticks
//!               ─► every second: database flush, purge ─► state transfers
//! ```
//!
//! Modules: `raft` (the group), `disk` (a member's durable log), `process`
//! and `applier` (a member process: the core and the shell's commands),
//! `db` (the model database), `faults`, `checks`, `record`.

mod applier;
pub mod checks;
mod db;
mod disk;
pub mod faults;
mod process;
mod raft;
mod record;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tandem_engine::admission::Plan;
use tandem_engine::core::LocalState;
use tandem_gcache::MemStorage;

use self::applier::Donation;
use self::checks::{fail, final_databases, Checked, Failure, History, Trace};
use self::db::Db;
use self::disk::Disk;
pub use self::faults::Knobs;
use self::process::{Ctx, Identity, Process};
use self::raft::{Pool, Raft};

const TICK_MS: u64 = 100;
/// Ticks allowed to form the group, and to heal it at the end.
const FORMING_TICKS: usize = 600;
const HEALING_TICKS: usize = 3_000;

/// What a run did, beyond passing: how much of the menu it reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub acked: usize,
    pub crashes: u32,
    pub power_losses: u32,
    pub group_crashes: u32,
    pub restarts: u32,
    pub restarts_required: u32,
    pub new_identities: u32,
    pub flips: u32,
    pub partitions: u32,
    pub elections: u32,
    pub snapshots: u32,
    pub donations: u32,
    pub resumes: u32,
    pub transfers: u32,
    pub purges: u32,
    /// Commits databases lost in crashes (their non-durable tail).
    pub db_commits_lost: u32,
    /// Acknowledged transactions among them: they must come back from a log.
    pub acked_lost_by_a_database: u32,
    /// Entries restarted members replayed from their own logs.
    pub own_log_replayed: u64,
    /// Forwards appended after later submissions of their member.
    pub late_forwards: u32,
    /// Write-sets ordered after their client was told they failed (gave
    /// up, or taken for lost): the origin applies them as remote ones.
    pub ordered_after_giving_up: u32,
}

impl Stats {
    /// Adds another run's counts (for coverage over many seeds).
    pub fn add(&mut self, other: &Stats) {
        let counts = [
            (&mut self.crashes, other.crashes),
            (&mut self.power_losses, other.power_losses),
            (&mut self.group_crashes, other.group_crashes),
            (&mut self.restarts, other.restarts),
            (&mut self.restarts_required, other.restarts_required),
            (&mut self.new_identities, other.new_identities),
            (&mut self.flips, other.flips),
            (&mut self.partitions, other.partitions),
            (&mut self.elections, other.elections),
            (&mut self.snapshots, other.snapshots),
            (&mut self.donations, other.donations),
            (&mut self.resumes, other.resumes),
            (&mut self.transfers, other.transfers),
            (&mut self.purges, other.purges),
            (&mut self.db_commits_lost, other.db_commits_lost),
            (&mut self.acked_lost_by_a_database, other.acked_lost_by_a_database),
            (&mut self.late_forwards, other.late_forwards),
            (&mut self.ordered_after_giving_up, other.ordered_after_giving_up),
        ];
        for (total, n) in counts {
            *total += n;
        }
        self.acked += other.acked;
        self.own_log_replayed += other.own_log_replayed;
    }

    pub fn note_plan(&mut self, plan: &Plan) {
        match plan {
            Plan::Resume { .. } => self.resumes += 1,
            Plan::Transfer => self.transfers += 1,
            Plan::Found => {}
        }
    }
}

/// What every member process shares: the checkers, the leader's pool,
/// transfers in flight.
pub struct World {
    pub history: History,
    pub trace: Trace,
    pub pool: Pool,
    pub donations: Vec<Donation>,
    /// Members that reached Synced and want to be voters.
    pub promotions: Vec<u64>,
    pub next_trx: u64,
    pub stats: Stats,
    pub segment_bytes: u64,
    /// Print what happens (`SIM_VERBOSE=1`), for reading a failing seed.
    pub verbose: bool,
    pub now_ms: u64,
    /// `Knobs::no_lock_epochs`.
    pub no_lock_epochs: bool,
}

impl World {
    /// A line of the run's story, printed when verbose.
    pub fn event(&self, what: impl FnOnce() -> String) {
        if self.verbose {
            eprintln!("{:>5}.{}s  {}", self.now_ms / 1_000, self.now_ms % 1_000 / 100, what());
        }
    }
}

/// One member's machine: what outlives its processes (disk, database,
/// identity) and the process running now.
pub struct Seat {
    pub name: String,
    pub identity: Identity,
    generation: u64,
    pub disk: Option<Disk>,
    /// While down: what the crash left, and whether it was a power loss.
    crashed: Option<(MemStorage, bool)>,
    down_until_ms: u64,
    stalled_until_ms: u64,
    pub db: Db,
    pub process: Option<Process>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Forming,
    Faults,
    Healing,
}

pub struct Sim {
    pub knobs: Knobs,
    rng: StdRng,
    now_ms: u64,
    step_no: usize,
    seats: Vec<Seat>,
    raft: Raft,
    world: World,
    partitioned: Option<usize>,
    heal_at_ms: u64,
    /// Identities given up (untrusted state): removed from the membership.
    retired: Vec<u64>,
    flipped: bool,
    group_crash_at: Option<usize>,
}

/// The outcome of a run that passed every check.
#[derive(Debug, PartialEq, Eq)]
pub struct Report {
    pub stats: Stats,
    pub trace: u64,
    pub last_seqno: i64,
}

impl Sim {
    pub fn new(knobs: Knobs) -> Sim {
        let mut rng = StdRng::seed_from_u64(knobs.seed);
        let group_crash_at = knobs.group_crash.then(|| rng.gen_range(knobs.steps / 3..knobs.steps * 2 / 3));
        let world = World {
            history: History::default(),
            trace: Trace::default(),
            pool: Pool::default(),
            donations: vec![],
            promotions: vec![],
            next_trx: 0,
            stats: Stats::default(),
            segment_bytes: knobs.segment_bytes,
            verbose: knobs.verbose,
            now_ms: 0,
            no_lock_epochs: knobs.no_lock_epochs,
        };
        let seats = (0..knobs.seats)
            .map(|seat| Seat {
                name: format!("n{}", seat + 1),
                identity: Identity {
                    member: (seat as u64 + 1) * 1_000,
                    uuid: faults::fresh_uuid(&mut rng),
                    incarnation: 1,
                },
                generation: 0,
                disk: None,
                crashed: None,
                down_until_ms: 0,
                stalled_until_ms: 0,
                db: if seat == 0 {
                    Db::founder(knobs.db_flush_each_commit)
                } else {
                    Db::empty(knobs.db_flush_each_commit)
                },
                process: None,
            })
            .collect();
        Sim {
            rng,
            now_ms: 0,
            step_no: 0,
            seats,
            raft: Raft::default(),
            world,
            partitioned: None,
            heal_at_ms: 0,
            retired: vec![],
            flipped: false,
            group_crash_at,
            knobs,
        }
    }

    /// Forms the group, runs the faults, heals, and checks everything.
    pub fn run(mut self) -> Result<Report, Failure> {
        self.form()?;
        for _ in 0..self.knobs.steps {
            self.step(Phase::Faults)?;
        }
        self.heal()?;
        self.final_checks()
    }

    fn form(&mut self) -> Checked<()> {
        for seat in 0..self.seats.len() {
            let identity = self.seats[seat].identity;
            let mut disk = Disk::fresh(self.knobs.segment_bytes);
            self.start_process(seat, identity, &mut disk, false)?;
            self.seats[seat].disk = Some(disk);
        }
        self.bootstrap(0)?;
        self.until_converged(Phase::Forming, FORMING_TICKS, "forming the group")
    }

    fn heal(&mut self) -> Checked<()> {
        self.heal_partition_if_due(true);
        self.restart_due(true)?;
        self.until_converged(Phase::Healing, HEALING_TICKS, "healing")
    }

    fn until_converged(&mut self, phase: Phase, ticks: usize, what: &str) -> Checked<()> {
        for _ in 0..ticks {
            self.step(phase)?;
            if self.converged() {
                return Ok(());
            }
        }
        fail(
            "liveness",
            format!("{what}: not every member synced at the same seqno after {ticks} ticks: {}", self.describe()),
        )
    }

    fn step(&mut self, phase: Phase) -> Checked<()> {
        self.step_no += 1;
        self.now_ms += TICK_MS;
        self.world.now_ms = self.now_ms;
        if phase == Phase::Faults {
            self.inject_faults();
        }
        self.heal_partition_if_due(false);
        self.restart_due(false)?;
        self.elect()?;
        self.change_membership()?;
        if phase == Phase::Faults {
            self.clients();
        }
        // What the leader appends now reaches followers next tick at the
        // earliest: a fault in between can take it with the leader.
        let faults = phase == Phase::Faults;
        self.replicate(if faults { 8 } else { 256 }, faults)?;
        self.order(4, if faults { self.knobs.loss_pct } else { 0 })?;
        self.flush_logs()?;
        self.advance_commit()?;
        self.connectivity()?;
        self.apply_all()?;
        self.appliers(phase)?;
        self.ticks()?;
        if self.now_ms.is_multiple_of(1_000) {
            self.every_second()?;
        }
        self.deliver_donations();
        self.end_failed_processes();
        Ok(())
    }

    fn reachable(&self, seat: usize) -> bool {
        self.seats[seat].process.is_some() && self.partitioned != Some(seat)
    }

    /// Runs `f` on a running member's process, disk and database.
    fn with_process<T>(
        &mut self,
        seat: usize,
        f: impl FnOnce(&mut Process, &mut Disk, &mut Ctx) -> Checked<T>,
    ) -> Checked<Option<T>> {
        let now_ms = self.now_ms;
        let Seat { name, process, disk, db, .. } = &mut self.seats[seat];
        let (Some(p), Some(d)) = (process.as_mut(), disk.as_mut()) else { return Ok(None) };
        let mut ctx = Ctx { now_ms, name, db, world: &mut self.world };
        f(p, d, &mut ctx).map(Some)
    }

    fn clients(&mut self) {
        for seat in 0..self.seats.len() {
            if self.rng.gen_range(0..100) >= self.knobs.write_pct {
                continue;
            }
            let Seat { name, process, db, .. } = &mut self.seats[seat];
            if let Some(p) = process.as_mut() {
                let mut ctx = Ctx { now_ms: self.now_ms, name, db, world: &mut self.world };
                p.begin_transfer(&mut self.rng, &mut ctx);
            }
        }
    }

    /// With gcache.fsync the flusher fsyncs what accumulated (group commit),
    /// not necessarily every tick.
    fn flush_logs(&mut self) -> Checked<()> {
        if !self.knobs.fsync {
            return Ok(());
        }
        for seat in &mut self.seats {
            if let Some(disk) = seat.disk.as_mut().filter(|_| self.rng.gen_bool(0.6)) {
                disk.sync().or_else(|e| fail("storage", e))?;
            }
        }
        Ok(())
    }

    fn connectivity(&mut self) -> Checked<()> {
        for seat in 0..self.seats.len() {
            let primary = self.reachable(seat) && self.raft.leader.is_some() && self.in_config(seat);
            if primary {
                self.world.pool.release_held(self.seats[seat].identity.member, self.now_ms);
            }
            self.with_process(seat, |p, _, ctx| p.set_primary(primary, ctx))?;
        }
        Ok(())
    }

    /// Each member learns the commit index (as far as its log matches the
    /// leader's) and applies what it holds of it.
    fn apply_all(&mut self) -> Checked<()> {
        for seat in 0..self.seats.len() {
            let commit = match self.raft.leader {
                Some(l) if l == seat => Some(self.raft.commit),
                Some(_) if self.reachable(seat) && self.in_config(seat) => {
                    Some(self.raft.commit.min(self.raft.matched(self.seats[seat].identity.member)))
                }
                _ => None,
            };
            self.with_process(seat, |p, disk, ctx| {
                p.commit_known = p.commit_known.max(commit.unwrap_or(0));
                p.apply_committed(disk, ctx)
            })?;
        }
        Ok(())
    }

    fn appliers(&mut self, phase: Phase) -> Checked<()> {
        for seat in 0..self.seats.len() {
            let tasks = match phase {
                Phase::Faults if self.knobs.slow_appliers => self.slow_applier_tasks(seat),
                Phase::Faults => 8,
                _ => 64,
            };
            self.with_process(seat, |p, _, ctx| {
                for _ in 0..tasks {
                    if !p.applier_step(ctx)? {
                        break;
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// A slow applier does 0-3 tasks a tick, and now and then stalls for
    /// seconds (a long transaction, a saturated disk): its database falls
    /// behind the log, which is what log retention has to cope with.
    fn slow_applier_tasks(&mut self, seat: usize) -> usize {
        if self.now_ms < self.seats[seat].stalled_until_ms {
            return 0;
        }
        if self.rng.gen_ratio(1, 60) {
            self.seats[seat].stalled_until_ms = self.now_ms + self.rng.gen_range(1_000..10_000);
            return 0;
        }
        self.rng.gen_range(0..=3)
    }

    fn ticks(&mut self) -> Checked<()> {
        for seat in 0..self.seats.len() {
            self.with_process(seat, |p, _, ctx| p.tick(ctx))?;
        }
        Ok(())
    }

    /// The database's flush, the saved commit index, the purger.
    fn every_second(&mut self) -> Checked<()> {
        let budget = self.knobs.budget_bytes;
        for seat in 0..self.seats.len() {
            self.with_process(seat, |p, disk, ctx| {
                ctx.db.flush();
                disk.save_commit(p.commit_known).or_else(|e| fail("storage", e))?;
                if disk.purge_if_over(budget, p.released, p.applied).or_else(|e| fail("storage", e))?.is_some() {
                    ctx.world.stats.purges += 1;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    fn deliver_donations(&mut self) {
        for donation in std::mem::take(&mut self.world.donations) {
            let joiner =
                self.seats.iter_mut().filter_map(|s| s.process.as_mut()).find(|p| p.me.uuid == donation.joiner);
            if let Some(p) = joiner {
                p.offer_state(&donation);
            }
        }
    }

    /// Every member runs, is reachable, synced, idle, and at the same seqno
    /// as the whole committed log; the membership is exactly the members.
    fn converged(&self) -> bool {
        let Some(leader) = self.leader_disk() else { return false };
        let (last, config) = (leader.last(), leader.config().expect("a leader has a config"));
        let ids: Vec<u64> = self.seats.iter().map(|s| s.identity.member).collect();
        let membership_settled = config.members.len() == ids.len() && ids.iter().all(|id| config.voters.contains(id));
        let seqno = self.seats[0].process.as_ref().map(|p| p.state.seqno);
        let settled = |s: &Seat| {
            s.process.as_ref().is_some_and(|p| {
                p.primary
                    && p.applied == last
                    && p.queue.is_empty()
                    && p.sst.is_none()
                    && p.core.state == LocalState::Synced
                    && !p.clients_waiting()
                    && Some(p.state.seqno) == seqno
                    && s.db.position() == p.state.seqno
            })
        };
        self.partitioned.is_none()
            && self.raft.commit == last
            && membership_settled
            && self.world.pool.is_empty()
            && self.seats.iter().all(settled)
    }

    fn describe(&self) -> String {
        let seats: Vec<String> = self
            .seats
            .iter()
            .map(|s| match &s.process {
                None => format!("{} down", s.name),
                Some(p) => format!(
                    "{} {:?} primary={} applied={} seqno={} db={} queue_empty={} sst={:?} live={}",
                    s.name,
                    p.core.state,
                    p.primary,
                    p.applied,
                    p.state.seqno,
                    s.db.position(),
                    p.queue.is_empty(),
                    p.sst.is_some(),
                    p.core.is_live()
                ),
            })
            .collect();
        let leader = self.raft.leader.map(|l| self.seats[l].name.clone());
        format!("leader {leader:?}, commit {}, [{}]", self.raft.commit, seats.join("; "))
    }

    fn final_checks(mut self) -> Result<Report, Failure> {
        self.world.history.dense()?;
        let images: Vec<(String, db::Image)> =
            self.seats.iter().map(|s| (s.name.clone(), s.db.current.clone())).collect();
        final_databases(&images, &self.world.history.acked)?;
        for (trx, seqno) in &self.world.history.acked {
            if !self.world.history.passed(*seqno) {
                return fail(
                    "acked_durable",
                    format!("transaction {trx} was acknowledged at seqno {seqno}, which did not pass"),
                );
            }
        }
        self.world.stats.acked = self.world.history.acked.len();
        for (name, image) in &images {
            self.world.trace.note(&[50, name.len() as u64, image.content_hash()]);
        }
        let by_seat: BTreeMap<&str, i64> = images.iter().map(|(n, i)| (n.as_str(), i.position)).collect();
        assert!(by_seat.values().all(|&p| p == images[0].1.position), "converged");
        Ok(Report {
            stats: self.world.stats.clone(),
            trace: self.world.trace.value(),
            last_seqno: self.world.history.last_seqno(),
        })
    }
}

/// Runs one seed with its drawn knobs, adjusted by `adjust`.
pub fn run_seed(seed: u64, adjust: impl FnOnce(&mut Knobs)) -> (Knobs, Result<Report, Failure>) {
    let mut knobs = Knobs::draw(seed);
    adjust(&mut knobs);
    let result = Sim::new(knobs.clone()).run();
    (knobs, result)
}
