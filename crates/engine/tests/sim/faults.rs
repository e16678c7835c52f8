//! The fault menu, drawn from the seed, and the faults themselves.
//!
//! ```text
//!   submissions   lost (0-20 %), interleaved across members; a leader change
//!                 loses half of what was waiting
//!   partitions    one member cut off for 1-15 s (a cut-off leader is replaced)
//!   crash         one member: kill -9 (page cache survives) or, with
//!                 gcache.fsync, power loss (unsynced log bytes torn at a point
//!                 drawn from the seed, unsynced directory operations undone)
//!   group crash   every member at once, the same way
//!   database      innodb_flush_log_at_trx_commit=0/2: a crash loses the commits
//!                 since the last flush (flushed every second)
//!   flipped byte  once, in a log segment of a crashed member: recovery must
//!                 call it corrupt (the member comes back under a new identity)
//!   appliers      slow (0-3 tasks a tick, stalls of 1-10 s) or quick
//!   purge         small segments and a small byte budget: purges, checkpoints,
//!                 snapshot installs and state transfers happen
//! ```

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tandem_engine::types::Uuid;
use tandem_gcache::MemStorage;

use super::checks::{fail, Checked};
use super::disk::Disk;
use super::process::{Ctx, Identity, Process};
use super::Sim;

/// Everything a run's seed decides before it starts.
#[derive(Clone, Debug)]
pub struct Knobs {
    pub seed: u64,
    pub seats: usize,
    /// `gcache.fsync`: an entry counts as acknowledged once fsynced, and
    /// crashes may be power losses. Without it, only kill -9.
    pub fsync: bool,
    /// `innodb_flush_log_at_trx_commit=1`; else a crash loses recent commits.
    pub db_flush_each_commit: bool,
    pub loss_pct: u32,
    pub partitions: bool,
    pub crashes: bool,
    pub group_crash: bool,
    pub flip: bool,
    pub slow_appliers: bool,
    pub segment_bytes: u64,
    pub budget_bytes: u64,
    /// Chance (percent) that a synced member starts a transfer in a tick.
    pub write_pct: u32,
    pub steps: usize,
    /// Negative test: a restarted member drops the first record it replays.
    pub drop_replayed_record: bool,
    /// A lost forward may reach the leader later, after its member's later
    /// submissions (`submit.rs` does not resend one whose answer is lost).
    pub late_forwards: bool,
    /// Negative test: a process never starts a new lock epoch.
    pub no_lock_epochs: bool,
    /// Print the run's story (`SIM_VERBOSE=1`); changes nothing else.
    pub verbose: bool,
}

impl Knobs {
    pub fn draw(seed: u64) -> Knobs {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x6b6e_6f62);
        let segment_bytes = [1_024, 2_048, 4_096][rng.gen_range(0..3)];
        Knobs {
            seed,
            seats: rng.gen_range(3..=5),
            fsync: rng.gen_bool(0.6),
            db_flush_each_commit: rng.gen_bool(0.3),
            loss_pct: [0, 5, 20][rng.gen_range(0..3)],
            partitions: rng.gen_bool(0.5),
            crashes: rng.gen_bool(0.7),
            group_crash: rng.gen_bool(0.4),
            flip: rng.gen_bool(0.2),
            slow_appliers: rng.gen_bool(0.4),
            segment_bytes,
            budget_bytes: segment_bytes * rng.gen_range(0..6),
            write_pct: rng.gen_range(5..25),
            steps: rng.gen_range(250..450),
            drop_replayed_record: false,
            verbose: std::env::var("SIM_VERBOSE").is_ok_and(|v| v == "1"),
            // Drawn last: the knobs drawn before keep their values.
            late_forwards: rng.gen_bool(0.5),
            no_lock_epochs: false,
        }
    }
}

/// A random version-4 uuid, from the seed.
pub fn fresh_uuid(rng: &mut StdRng) -> Uuid {
    let mut b: [u8; 16] = rng.gen();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    Uuid(b)
}

impl Sim {
    /// This tick's faults, each with a small chance.
    pub(super) fn inject_faults(&mut self) {
        if self.knobs.crashes && self.rng.gen_ratio(1, 120) {
            let seat = self.rng.gen_range(0..self.seats.len());
            let power = self.knobs.fsync && self.rng.gen_bool(0.5);
            self.crash(seat, power, 200..4_000);
        }
        if self.knobs.partitions && self.partitioned.is_none() && self.rng.gen_ratio(1, 100) {
            let seat = self.rng.gen_range(0..self.seats.len());
            self.partitioned = Some(seat);
            self.heal_at_ms = self.now_ms + self.rng.gen_range(1_000..15_000);
            self.world.stats.partitions += 1;
            let (name, until) = (&self.seats[seat].name, self.heal_at_ms);
            self.world.event(|| format!("{name}: cut off until {until} ms"));
        }
        if self.group_crash_at == Some(self.step_no) {
            self.crash_everyone();
        }
    }

    pub(super) fn heal_partition_if_due(&mut self, now: bool) {
        if self.partitioned.is_some() && (now || self.now_ms >= self.heal_at_ms) {
            self.partitioned = None;
        }
    }

    fn crash_everyone(&mut self) {
        let power = self.knobs.fsync && self.rng.gen_bool(0.5);
        for seat in 0..self.seats.len() {
            self.crash(seat, power, 500..6_000);
        }
        self.world.pool.clear();
        self.world.stats.group_crashes += 1;
        self.world.event(|| "every member crashed at once".into());
    }

    /// The process dies; its storage is what a kill -9 or a power loss
    /// leaves, its database loses what it had not flushed.
    pub(super) fn crash(&mut self, seat: usize, power: bool, down_ms: std::ops::Range<u64>) {
        let rng = &mut self.rng;
        let s = &mut self.seats[seat];
        let Some(disk) = s.disk.take() else { return };
        s.process = None;
        self.world.pool.forget_held(s.identity.member);
        let storage = if power {
            let kept = rng.gen_range(0..=disk.storage().pending_dir_ops());
            disk.storage()
                .crash_keeping_dir_ops(kept, &mut |_, synced, current| synced + rng.gen_range(0..=current - synced))
        } else {
            disk.storage().kill()
        };
        let lost = if s.db.unflushed() > 0 { rng.gen_range(0..=s.db.unflushed()) } else { 0 };
        let gone = s.db.crash(lost);
        let acked_gone = gone.iter().filter(|t| self.world.history.acked.contains_key(t)).count();
        self.world.stats.acked_lost_by_a_database += acked_gone as u32;
        if self.knobs.flip && !self.flipped && rng.gen_ratio(1, 3) {
            let names = Disk::segment_names(&storage);
            if let Some(name) = names.get(rng.gen_range(0..names.len().max(1))) {
                let len = storage.file_len(name).unwrap_or(0);
                self.flipped = len > 0 && storage.flip_byte(name, rng.gen_range(0..len.max(1)));
                self.world.stats.flips += self.flipped as u32;
            }
        }
        s.crashed = Some((storage, power));
        s.down_until_ms = self.now_ms + rng.gen_range(down_ms);
        if self.raft.leader == Some(seat) {
            self.raft.leader = None;
        }
        self.world.stats.crashes += 1;
        self.world.stats.power_losses += power as u32;
        self.world.stats.db_commits_lost += lost as u32;
        self.world.trace.note(&[40, seat as u64, power as u64, lost as u64]);
        let (name, flipped) = (&self.seats[seat].name, self.flipped);
        let kind = if power { "power loss" } else { "kill -9" };
        self.world.event(|| {
            format!("{name}: {kind}; its database lost {lost} commits; byte flipped in some log so far: {flipped}")
        });
    }

    /// A crashed member whose time has come starts again: the same identity
    /// if its durable state can be trusted, else a new member with an empty
    /// log (its old identity is retired from the membership). Its data is
    /// where the database recovered to.
    pub(super) fn restart(&mut self, seat: usize) -> Checked<()> {
        let (storage, power) = self.seats[seat].crashed.take().expect("a crashed member");
        let (mut disk, identity, kept) = match self.reopen(storage, power) {
            Ok(disk) => {
                let old = self.seats[seat].identity;
                (disk, Identity { incarnation: old.incarnation + 1, ..old }, true)
            }
            Err(why) => self.renew_identity(seat, why),
        };
        self.world.stats.restarts += 1;
        self.world.stats.new_identities += !kept as u32;
        if kept {
            self.check_retention(seat, &disk)?;
        }
        let (name, at) = (&self.seats[seat].name, self.seats[seat].db.gtid().seqno);
        let resume = disk.choose_resume((at >= 0).then_some(at));
        self.world.event(|| {
            let (member, incarnation, last) = (identity.member, identity.incarnation, disk.last());
            format!(
                "{name}: restarts as member {member} incarnation {incarnation}, data at {at}, resumes from \
                 checkpoint (index, seqno) {resume:?}, log up to {last}"
            )
        });
        self.start_process(seat, identity, &mut disk, kept && self.knobs.drop_replayed_record)?;
        self.seats[seat].disk = Some(disk);
        Ok(())
    }

    /// `store::open`'s judgement of what a crash left.
    fn reopen(&self, storage: MemStorage, power: bool) -> Result<Disk, String> {
        let disk = Disk::reopen(storage, self.knobs.segment_bytes)?;
        if power && !self.knobs.fsync {
            return Err("rebooted without gcache.fsync".into());
        }
        Ok(disk)
    }

    /// The member starts over under a new identity with an empty log; the
    /// old one is retired from the membership.
    fn renew_identity(&mut self, seat: usize, why: String) -> (Disk, Identity, bool) {
        self.world.trace.note(&[41, seat as u64, why.len() as u64]);
        let name = &self.seats[seat].name;
        self.world.event(|| format!("{name}: durable state not trusted ({why}): starts as a new member"));
        self.retired.push(self.seats[seat].identity.member);
        self.seats[seat].generation += 1;
        let member = (seat as u64 + 1) * 1_000 + self.seats[seat].generation;
        let identity = Identity { member, uuid: fresh_uuid(&mut self.rng), incarnation: 1 };
        (Disk::fresh(self.knobs.segment_bytes), identity, false)
    }

    /// The log was never purged past what the database may need after a
    /// crash (`retention.rs`: only settled commits are released): a member
    /// with its own identity finds a checkpoint at or below its data.
    fn check_retention(&self, seat: usize, disk: &Disk) -> Checked<()> {
        let (db, name) = (&self.seats[seat].db, &self.seats[seat].name);
        let at = db.gtid().seqno;
        if at < 0 || db.log_replaced || !disk.has_checkpoints() {
            return Ok(());
        }
        match disk.choose_resume(Some(at)) {
            Some((index, position)) if position > at => fail(
                "retention",
                format!("{name}'s data is at {at}, its log was purged up to checkpoint {index} at {position}"),
            ),
            _ => Ok(()),
        }
    }

    pub(super) fn start_process(
        &mut self,
        seat: usize,
        identity: Identity,
        disk: &mut Disk,
        drop_replayed: bool,
    ) -> Checked<()> {
        let s = &mut self.seats[seat];
        s.identity = identity;
        let start = s.db.gtid();
        let mut ctx = Ctx { now_ms: self.now_ms, name: &s.name, db: &mut s.db, world: &mut self.world };
        let process = Process::start(identity, start, disk, drop_replayed, &mut ctx)?;
        s.process = Some(process);
        Ok(())
    }

    /// Restarts crashed members whose time has come (all of them: `now`).
    pub(super) fn restart_due(&mut self, now: bool) -> Checked<()> {
        for seat in 0..self.seats.len() {
            let due = now || self.now_ms >= self.seats[seat].down_until_ms;
            if self.seats[seat].crashed.is_some() && due {
                self.restart(seat)?;
            }
        }
        Ok(())
    }

    /// A process that cannot go on exits; its supervisor starts it again.
    pub(super) fn end_failed_processes(&mut self) {
        for seat in 0..self.seats.len() {
            if let Some(why) = self.seats[seat].process.as_ref().and_then(|p| p.restart.clone()) {
                self.world.stats.restarts_required += 1;
                let name = &self.seats[seat].name;
                self.world.event(|| format!("{name}: process ends: {why}"));
                self.crash(seat, false, 100..1_000);
            }
        }
    }
}
