//! One member process: the replicated state and the pure node core, fed the
//! committed log entries in order, and the shell's handling of what the
//! core commands (as `node.rs` executes them): submissions go to the
//! leader's pool, ordered write-sets to the waiting client or the applier
//! queue, admissions to the front of the queue, released log to the purger.
//!
//! ```text
//!   committed entry ─► GroupState::apply ─► NodeCore::on_ordered ─► [Command]
//!   connectivity / tick / snapshot ─► NodeCore::on_* ──────────────► [Command]
//!   [Command] ─► pool (submit) | waiter | applier queue | release | restart
//! ```
//!
//! The applier side (tasks, state transfer) is in `applier.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::rngs::StdRng;
use rand::Rng;
use tandem_engine::admission::Plan;
use tandem_engine::certification::Verdict;
use tandem_engine::core::{Command, LocalState, NodeCore};
use tandem_engine::group_state::GroupState;
use tandem_engine::message::{Body, Envelope};
use tandem_engine::queue::Task;
use tandem_engine::types::{Gtid, Seqno, Uuid};
use tandem_engine::waiter::Reply;
use tandem_engine::writeset::{flags, Key, KeyType, WriteSet};
use tandem_group::Ordered;

use super::applier::Sst;
use super::checks::{fail, Checked};
use super::db::{encode_change, Db, ACCOUNTS};
use super::disk::Disk;
use super::record::{Checkpoint, Event, Record};
use super::World;

/// How long a client waits while its node is cut off before it gives up
/// (`evs.suspect_timeout`).
pub const SUSPECT_MS: u64 = 5_000;
/// A client waiting for its write-set probes the order this often.
const PROBE_EVERY_MS: u64 = 1_000;

/// Who a process is in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub member: u64,
    pub uuid: Uuid,
    pub incarnation: u32,
}

/// What a process needs of the world while it runs a step.
pub struct Ctx<'a> {
    pub now_ms: u64,
    pub name: &'a str,
    pub db: &'a mut Db,
    pub world: &'a mut World,
}

/// Someone in this process waiting for a message of ours to come back.
#[derive(Clone, Debug)]
enum Waiter {
    Client {
        accounts: [usize; 2],
        last_seen: Seqno,
    },
    /// The join task's state transfer request.
    Donor,
    /// A causal read sent to learn whether older messages were lost.
    Probe,
}

/// Work for the appliers, in order.
#[derive(Debug)]
pub enum Work {
    Task(Task),
    /// A local transaction's own write-set: its client commits it in order.
    Local {
        seqno: Seqno,
        verdict: Verdict,
        ws: WriteSet,
        accounts: [usize; 2],
    },
}

/// The applier queue (`queue.rs`): until the join task has run, nothing but
/// it is handed out.
pub struct Queue {
    tasks: VecDeque<Work>,
    holding: bool,
}

impl Queue {
    fn new() -> Queue {
        Queue { tasks: VecDeque::new(), holding: true }
    }

    pub fn pop(&mut self) -> Option<Work> {
        let first_overrides = matches!(self.tasks.front(), Some(Work::Task(Task::Connect(_) | Task::RestartRequired)));
        (!self.holding || first_overrides).then(|| self.tasks.pop_front()).flatten()
    }

    pub fn release_hold(&mut self) {
        self.holding = false;
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

pub struct Process {
    pub me: Identity,
    pub state: GroupState,
    pub core: NodeCore,
    /// Log index applied to `state`.
    pub applied: u64,
    /// Highest index this process knows to be committed.
    pub commit_known: u64,
    pub queue: Queue,
    waiters: BTreeMap<u64, Waiter>,
    next_token: u64,
    pub sst: Option<Sst>,
    /// The state transfer's data, once the donor sent it.
    pub sst_inbox: Option<super::db::Image>,
    pub primary: bool,
    /// What the core released of the log (`ReleaseLog`).
    pub released: Seqno,
    since_checkpoint: u64,
    checkpoint_every: u64,
    /// The process must end (restart required, a failed transfer).
    pub restart: Option<String>,
    /// A state transfer would be justified: the history after the data's
    /// position is gone for this process (snapshot installed, or no
    /// checkpoint at or below the data).
    pub sst_justified: bool,
    /// Accounts held by local transactions (row locks).
    locked: BTreeSet<usize>,
    /// Tokens of write-sets whose client was told they failed.
    gave_up: BTreeSet<u64>,
    /// The lock epoch (`Node::new_lock_epoch`): raised when clients give up
    /// on write-sets the group may still order.
    epoch: u32,
    probed_ms: u64,
    /// Negative test: the first record of the own-log replay is dropped.
    skip_replay: bool,
}

fn storage_failure<T>(member: &str, e: String) -> Checked<T> {
    fail("storage", format!("{member}: {e}"))
}

impl Process {
    fn new(me: Identity, start: Gtid, checkpoint_every: u64) -> Process {
        Process {
            me,
            state: GroupState::default(),
            core: NodeCore::new(me.uuid, me.incarnation, start, String::new()),
            applied: 0,
            commit_known: 0,
            queue: Queue::new(),
            waiters: BTreeMap::new(),
            next_token: 0,
            sst: None,
            sst_inbox: None,
            primary: false,
            released: -1,
            since_checkpoint: checkpoint_every,
            checkpoint_every,
            restart: None,
            sst_justified: false,
            locked: BTreeSet::new(),
            gave_up: BTreeSet::new(),
            epoch: 0,
            probed_ms: 0,
            skip_replay: false,
        }
    }

    /// A process starting on `disk` with its data at `start`: resume the
    /// replicated state from the newest checkpoint at or below the data
    /// (else the newest), then replay the committed part of its own log.
    pub fn start(me: Identity, start: Gtid, disk: &mut Disk, drop_replayed: bool, ctx: &mut Ctx) -> Checked<Process> {
        let mut p = Process::new(me, start, ctx.world.segment_bytes);
        p.since_checkpoint = if disk.has_checkpoints() { 0 } else { p.checkpoint_every };
        let at = (start.seqno >= 0).then_some(start.seqno);
        match disk.choose_resume(at) {
            Some((index, position)) => {
                let cp = disk.read_checkpoint(index).or_else(|e| storage_failure(ctx.name, e))?;
                p.state = GroupState::decode(&cp.state).or_else(|e| storage_failure(ctx.name, e))?;
                p.applied = index;
                p.sst_justified = at.is_none_or(|x| position > x);
                let commands = p.core.on_restored(&p.state);
                p.execute(commands, ctx)?;
            }
            // No checkpoint: a new log, replayed from the start of the
            // history (or from a snapshot, which then justifies a transfer).
            None => p.sst_justified = false,
        }
        p.commit_known = disk.saved_commit.max(p.applied);
        p.skip_replay = drop_replayed && p.applied < p.commit_known;
        let resumed_at = p.applied;
        p.apply_committed(disk, ctx)?;
        p.skip_replay = false;
        ctx.world.stats.own_log_replayed += p.applied - resumed_at;
        Ok(p)
    }

    // ---- the ordered stream -------------------------------------------------

    /// Applies committed entries this process holds and has not applied.
    pub fn apply_committed(&mut self, disk: &mut Disk, ctx: &mut Ctx) -> Checked<()> {
        let upto = self.commit_known.min(disk.last());
        if self.applied >= upto || self.restart.is_some() {
            return Ok(());
        }
        let records = match disk.read_range(self.applied + 1, upto) {
            Ok(records) => records,
            Err(e) => {
                // openraft stops on a storage error: the process ends.
                self.restart = Some(format!("the group log could not be read: {e}"));
                return Ok(());
            }
        };
        for (index, bytes) in records {
            let record = Record::decode(&bytes).or_else(|e| storage_failure(ctx.name, e))?;
            if std::mem::take(&mut self.skip_replay) {
                self.applied = index; // the deliberate bug: this record is never applied
                continue;
            }
            self.apply_record(index, record, ctx)?;
            self.applied = index;
            self.since_checkpoint += bytes.len() as u64;
            self.maybe_checkpoint(index, disk).or_else(|e| storage_failure(ctx.name, e))?;
            if self.restart.is_some() {
                break;
            }
        }
        Ok(())
    }

    fn apply_record(&mut self, index: u64, record: Record, ctx: &mut Ctx) -> Checked<()> {
        let outcome = match record.event {
            Event::Blank => return Ok(()),
            Event::Membership(m) => self.state.apply(Ordered::Membership(m)),
            Event::Message { origin, payload } => self.state.apply(Ordered::Message { origin, payload: &payload }),
        };
        ctx.world.history.observe(ctx.name, index, &outcome, &self.state)?;
        let commands = self.core.on_ordered(outcome, &self.state);
        self.execute(commands, ctx)
    }

    /// A checkpoint about every segment of log (`StateMachine`).
    fn maybe_checkpoint(&mut self, index: u64, disk: &mut Disk) -> Result<(), String> {
        if self.since_checkpoint < self.checkpoint_every {
            return Ok(());
        }
        self.since_checkpoint = 0;
        let term = disk.term_at(index).expect("an applied entry is in the log");
        let config = disk.config_at(index).cloned();
        let cp = Checkpoint { index, term, position: self.state.seqno, config, state: self.state.encode() };
        disk.write_checkpoint(&cp)
    }

    /// The leader's checkpoint replaces the log this process lacked.
    pub fn install_snapshot(&mut self, cp: &Checkpoint, disk: &mut Disk, ctx: &mut Ctx) -> Checked<()> {
        assert!(cp.index > self.applied, "a snapshot is only sent to a member that lacks its history");
        disk.install(cp).or_else(|e| storage_failure(ctx.name, e))?;
        self.state = GroupState::decode(&cp.state).or_else(|e| storage_failure(ctx.name, e))?;
        self.applied = cp.index;
        self.commit_known = self.commit_known.max(cp.index);
        self.sst_justified = true;
        self.since_checkpoint = 0;
        let commands = self.core.on_restored(&self.state);
        self.execute(commands, ctx)
    }

    // ---- other inputs -------------------------------------------------------

    pub fn set_primary(&mut self, primary: bool, ctx: &mut Ctx) -> Checked<()> {
        if primary == self.primary {
            return Ok(());
        }
        self.primary = primary;
        let commands = self.core.on_connectivity(primary, ctx.now_ms);
        self.execute(commands, ctx)
    }

    /// The shell's 100 ms ticker, and what client threads do meanwhile.
    pub fn tick(&mut self, ctx: &mut Ctx) -> Checked<()> {
        let commands = self.core.on_tick(ctx.now_ms, ctx.db.position());
        self.execute(commands, ctx)?;
        let cut_long = self.core.cut_since_ms().is_some_and(|since| ctx.now_ms.saturating_sub(since) >= SUSPECT_MS);
        if cut_long {
            self.give_up_clients(ctx);
        }
        let waiting = self.waiters.values().any(|w| matches!(w, Waiter::Client { .. }));
        if waiting && self.primary && ctx.now_ms >= self.probed_ms + PROBE_EVERY_MS {
            self.probed_ms = ctx.now_ms;
            self.send(Body::Causal, Some(Waiter::Probe), ctx);
        }
        Ok(())
    }

    /// `await_reply` after the suspect timeout: the client gets an error;
    /// its write-set, if ordered later, is applied like a remote one.
    fn give_up_clients(&mut self, ctx: &mut Ctx) {
        let tokens: Vec<u64> =
            self.waiters.iter().filter(|(_, w)| matches!(w, Waiter::Client { .. })).map(|(&t, _)| t).collect();
        if !tokens.is_empty() {
            self.new_lock_epoch(ctx);
        }
        for token in tokens {
            if let Some(Waiter::Client { accounts, .. }) = self.waiters.remove(&token) {
                self.unlock(accounts);
                self.gave_up.insert(token);
                ctx.world.trace.note(&[11, token]);
            }
        }
    }

    /// A client of this node transfers between two accounts it can lock,
    /// reading the balances of its own database (possibly behind the group:
    /// certification decides).
    pub fn begin_transfer(&mut self, rng: &mut StdRng, ctx: &mut Ctx) {
        let ready = self.primary && self.core.state == LocalState::Synced && self.restart.is_none();
        let Some(balances) = ctx.db.current.balances.filter(|_| ready) else { return };
        let free: Vec<usize> = (0..ACCOUNTS).filter(|a| !self.locked.contains(a)).collect();
        if free.len() < 2 {
            return;
        }
        let from = free[rng.gen_range(0..free.len())];
        let to = *free.iter().filter(|&&a| a != from).nth(rng.gen_range(0..free.len() - 1)).expect("two free");
        let amount = rng.gen_range(1..=20);
        let writes = [(from, balances[from] - amount), (to, balances[to] + amount)];
        let key = |a: usize| Key {
            parts: vec![b"bank".to_vec(), b"accounts".to_vec(), vec![a as u8]],
            kind: KeyType::Exclusive,
        };
        let last_seen = ctx.db.position();
        ctx.world.next_trx += 1;
        let ws = WriteSet {
            source: self.me.uuid,
            trx_id: ctx.world.next_trx,
            conn_id: 1,
            flags: flags::TRX_START | flags::TRX_END,
            last_seen,
            safe: self.safe_seqno(last_seen),
            keys: vec![key(from), key(to)],
            data: encode_change(writes, rng.gen_range(0..64)),
        };
        self.locked.extend([from, to]);
        self.send(Body::WriteSet(ws), Some(Waiter::Client { accounts: [from, to], last_seen }), ctx);
    }

    /// No write-set this node sends from now on has seen less than this.
    fn safe_seqno(&self, committed: Seqno) -> Seqno {
        let in_flight = self.waiters.values().filter_map(|w| match w {
            Waiter::Client { last_seen, .. } => Some(*last_seen),
            _ => None,
        });
        in_flight.fold(committed, Seqno::min)
    }

    /// `Node::new_lock_epoch`: before the locks of a transaction whose
    /// write-set may still be ordered go.
    fn new_lock_epoch(&mut self, ctx: &mut Ctx) {
        if !ctx.world.no_lock_epochs {
            self.epoch += 1;
        }
    }

    pub fn unlock(&mut self, accounts: [usize; 2]) {
        for a in accounts {
            self.locked.remove(&a);
        }
    }

    pub fn clients_waiting(&self) -> bool {
        self.waiters.values().any(|w| matches!(w, Waiter::Client { .. })) || !self.locked.is_empty()
    }

    // ---- the shell: commands ------------------------------------------------

    /// `Node::send`: tokens in submission order; a node outside the primary
    /// component keeps the message in its submit queue for a while.
    fn send(&mut self, body: Body, waiter: Option<Waiter>, ctx: &mut Ctx) -> u64 {
        self.next_token += 1;
        let token = self.next_token;
        if let Some(w) = waiter {
            self.waiters.insert(token, w);
        }
        let envelope =
            Envelope { source: self.me.uuid, incarnation: self.me.incarnation, token, body, epoch: self.epoch };
        if self.primary {
            ctx.world.pool.push(self.me.member, envelope.encode());
        } else {
            ctx.world.pool.hold(self.me.member, ctx.now_ms, envelope.encode());
        }
        token
    }

    pub fn send_state_request(&mut self, ctx: &mut Ctx) -> u64 {
        let request = format!("sst to {} incarnation {}", self.me.uuid, self.me.incarnation).into_bytes();
        self.send(Body::StateRequest { donors: String::new(), request }, Some(Waiter::Donor), ctx)
    }

    pub fn abandon(&mut self, token: u64) {
        self.waiters.remove(&token);
    }

    /// `Waiters::complete`: the waiter of `token`, if any; every older one
    /// was lost (the group orders one member's messages in submission order).
    fn complete(&mut self, token: u64, ctx: &mut Ctx) -> Option<Waiter> {
        let newer = self.waiters.split_off(&token);
        let older = std::mem::replace(&mut self.waiters, newer);
        for (lost, waiter) in older {
            ctx.world.trace.note(&[12, lost]);
            match waiter {
                // `replicate_body`: a later message of ours was ordered, but
                // a late forward may still order this one.
                Waiter::Client { accounts, .. } => {
                    self.new_lock_epoch(ctx);
                    self.unlock(accounts);
                    self.gave_up.insert(lost);
                }
                Waiter::Donor => self.on_donor_reply(Reply::Lost, ctx),
                Waiter::Probe => {}
            }
        }
        self.waiters.remove(&token)
    }

    pub fn execute(&mut self, commands: Vec<Command>, ctx: &mut Ctx) -> Checked<()> {
        for command in commands {
            self.execute_one(command, ctx)?;
        }
        Ok(())
    }

    fn execute_one(&mut self, command: Command, ctx: &mut Ctx) -> Checked<()> {
        ctx.world.trace.note(&trace_words(&command));
        match command {
            Command::Submit(body) => {
                self.send(body, None, ctx);
            }
            Command::WriteSet { waiter, seqno, verdict, ws, origin, apply } => {
                match waiter.and_then(|token| self.complete(token, ctx)) {
                    Some(Waiter::Client { accounts, .. }) => {
                        self.queue.tasks.push_back(Work::Local { seqno, verdict, ws, accounts })
                    }
                    Some(other) => panic!("a write-set answered {other:?}"),
                    None if apply => {
                        if waiter.is_some_and(|token| self.gave_up.remove(&token)) {
                            ctx.world.stats.ordered_after_giving_up += 1;
                        }
                        self.queue.tasks.push_back(Work::Task(Task::Apply { seqno, verdict, ws, origin }))
                    }
                    None => {}
                }
            }
            Command::Reply { token, reply } => {
                if let Some(Waiter::Donor) = self.complete(token, ctx) {
                    self.on_donor_reply(reply, ctx);
                }
            }
            Command::Queue(task) => self.queue.tasks.push_back(Work::Task(task)),
            Command::Admit(admission) => {
                self.check_transfer_needed(&admission.plan, ctx)?;
                self.queue.tasks.push_front(Work::Task(Task::Connect(admission)));
            }
            Command::WakeWaiters => {}
            Command::ReportProgress => {
                let safe = self.safe_seqno(ctx.db.position());
                self.send(Body::Progress(safe), None, ctx);
            }
            Command::ReleaseLog(seqno) => self.released = self.released.max(seqno),
            Command::IstProgress { .. } => {}
            Command::RestartRequired(why) => self.restart = Some(why),
            Command::VotesChanged => {}
            // The simulated database never fails an apply, so no vote may
            // ever find a node inconsistent.
            // Simulated donations never fail.
            Command::TransferFailed { donor, code } => {
                return fail("transfer_failed", format!("{}: the transfer from {donor} failed ({code})", ctx.name));
            }
            Command::Inconsistent { seqno, mine, winner } => {
                return fail(
                    "voted_inconsistent",
                    format!("{} was voted inconsistent at {seqno} ({mine:x} against {winner:x})", ctx.name),
                );
            }
        }
        Ok(())
    }

    /// SST only when the history after the local data is gone for this
    /// process: a node whose data belongs to the group's history and whose
    /// log (or the leader's) still holds X+1 must resume (IST).
    fn check_transfer_needed(&self, plan: &Plan, ctx: &mut Ctx) -> Checked<()> {
        let start = self.core.start();
        let own_history = start.seqno >= 0 && start.uuid == self.state.group_uuid;
        if *plan == Plan::Transfer && own_history && !self.sst_justified {
            return fail(
                "sst_needless",
                format!(
                    "{} was given a state transfer though the history after its data ({start}) is replayable",
                    ctx.name
                ),
            );
        }
        ctx.world.stats.note_plan(plan);
        let view = self.state.seqno;
        ctx.world.event(|| format!("{}: admitted with {plan:?} (data at {start}, group at {view})", ctx.name));
        Ok(())
    }
}

/// A compact record of a command for the determinism hash.
fn trace_words(command: &Command) -> [u64; 3] {
    match command {
        Command::Submit(_) => [1, 0, 0],
        Command::WriteSet { seqno, apply, waiter, .. } => {
            [2, *seqno as u64, *apply as u64 + 2 * waiter.is_some() as u64]
        }
        Command::Reply { token, .. } => [3, *token, 0],
        Command::Queue(_) => [4, 0, 0],
        Command::Admit(a) => [5, a.view.state_id.seqno as u64, 0],
        Command::WakeWaiters => [6, 0, 0],
        Command::ReportProgress => [7, 0, 0],
        Command::ReleaseLog(s) => [8, *s as u64, 0],
        Command::IstProgress { committed, .. } => [9, *committed as u64, 0],
        Command::RestartRequired(_) => [10, 0, 0],
        Command::VotesChanged => [11, 0, 0],
        Command::Inconsistent { seqno, .. } => [12, *seqno as u64, 0],
        Command::TransferFailed { code, .. } => [13, *code as u64, 0],
    }
}
