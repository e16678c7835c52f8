//! The group, modelled rather than run: Raft's safety rules over the
//! members' real durable logs, without its messages and timers.
//!
//! ```text
//!   submissions ─► pool (per member FIFO; lost, or interleaved across members;
//!                  held by a member that cannot reach a leader, up to 10 s)
//!   leader      ─► appends pool messages and memberships to its own log
//!   replicate   ─► follower log made a prefix of the leader's: find the last
//!                  index where both hold the same term, truncate the rest,
//!                  append (or install the leader's oldest checkpoint when the
//!                  leader purged what the follower lacks)
//!   commit      ─► the last entry of the leader's term that a majority of
//!                  the voters acknowledged (fsynced, or written without
//!                  gcache.fsync), and everything before it
//!   election    ─► when the leader is gone: among the reachable voters, the
//!                  most up-to-date log (last term, then length) wins if a
//!                  majority of its configuration's voters is reachable; it
//!                  appends a blank entry of its new term
//! ```
//!
//! Not modelled: votes and terms as messages, timeouts, joint consensus
//! (configuration changes go one member at a time, each after the previous
//! one committed), a deposed leader that keeps appending. What matters for
//! the node is kept: only committed entries are applied, an acknowledged
//! entry survives any crash of a minority, a whole-group crash keeps
//! everything committed, uncommitted entries may vanish or be replaced.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};

use rand::rngs::StdRng;
use rand::Rng;
use tandem_engine::message::JoinInfo;
use tandem_group::{MemberInfo, Membership};

use super::checks::{fail, Checked};
use super::disk::Disk;
use super::record::{Event, Record};
use super::Sim;

/// The leader's view of the group.
#[derive(Default)]
pub struct Raft {
    pub term: u64,
    pub leader: Option<usize>,
    /// What the leader knows to be committed.
    pub commit: u64,
    /// Member id -> the prefix of its log known to equal the leader's.
    matched: BTreeMap<u64, u64>,
    /// Member id -> the prefix it acknowledged (durable).
    acked: BTreeMap<u64, u64>,
    /// Every entry ever committed: index -> term. None may change.
    committed: BTreeMap<u64, u64>,
}

impl Raft {
    pub fn matched(&self, member: u64) -> u64 {
        self.matched.get(&member).copied().unwrap_or(0)
    }
}

/// Submissions on their way to the leader, per member in submission order
/// (the group never reorders one member's messages; it may lose some).
#[derive(Default)]
pub struct Pool {
    queues: BTreeMap<u64, VecDeque<Vec<u8>>>,
    /// Submissions of members that cannot reach a leader, still in their
    /// own queue (`submit.rs`): delivered once they can, given up after
    /// `HOLD_MS` (a forward is never repeated: nothing is ordered twice).
    held: BTreeMap<u64, VecDeque<(u64, Vec<u8>)>>,
    /// Forwards whose answer was lost, still on their way: (due, origin,
    /// payload). They reach the leader when due, whatever their member
    /// submitted since.
    late: Vec<(u64, u64, Vec<u8>)>,
}

/// How long a member's submit queue keeps trying (two suspect timeouts).
const HOLD_MS: u64 = 10_000;

impl Pool {
    pub fn push(&mut self, origin: u64, payload: Vec<u8>) {
        self.queues.entry(origin).or_default().push_back(payload);
    }

    pub fn hold(&mut self, origin: u64, now_ms: u64, payload: Vec<u8>) {
        self.held.entry(origin).or_default().push_back((now_ms, payload));
    }

    /// `origin` reaches a leader again: what it still holds goes on, after
    /// what it had sent before (its order is kept).
    pub fn release_held(&mut self, origin: u64, now_ms: u64) {
        for (since_ms, payload) in self.held.remove(&origin).unwrap_or_default() {
            if now_ms < since_ms + HOLD_MS {
                self.push(origin, payload);
            }
        }
    }

    /// The process died with its queue.
    pub fn forget_held(&mut self, origin: u64) {
        self.held.remove(&origin);
    }

    /// The next submission of one member, chosen at random.
    fn take(&mut self, rng: &mut StdRng) -> Option<(u64, Vec<u8>)> {
        let origins: Vec<u64> = self.queues.iter().filter(|(_, q)| !q.is_empty()).map(|(&o, _)| o).collect();
        let origin = *origins.get(rng.gen_range(0..origins.len().max(1)))?;
        let payload = self.queues.get_mut(&origin)?.pop_front()?;
        Some((origin, payload))
    }

    /// A leader change loses what the old leader had not appended yet.
    pub fn lose_some(&mut self, rng: &mut StdRng) {
        for queue in self.queues.values_mut() {
            queue.retain(|_| rng.gen_bool(0.5));
        }
    }

    pub fn clear(&mut self) {
        self.queues.clear();
        self.held.clear();
        self.late.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.queues.values().all(VecDeque::is_empty)
            && self.held.values().all(VecDeque::is_empty)
            && self.late.is_empty()
    }

    /// A forward delayed on its way: it arrives at `due_ms`.
    fn delay(&mut self, due_ms: u64, origin: u64, payload: Vec<u8>) {
        self.late.push((due_ms, origin, payload));
    }

    /// The delayed forwards that arrive by `now_ms`, in the order sent.
    fn arrived(&mut self, now_ms: u64) -> Vec<(u64, Vec<u8>)> {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.late).into_iter().partition(|l| l.0 <= now_ms);
        self.late = later;
        due.into_iter().map(|(_, origin, payload)| (origin, payload)).collect()
    }
}

fn two_disks(seats: &mut [super::Seat], a: usize, b: usize) -> (&mut Disk, &mut super::Seat) {
    assert_ne!(a, b);
    let (first, second) = seats.split_at_mut(a.max(b));
    let (lower, upper) = (&mut first[a.min(b)], &mut second[0]);
    if a < b {
        (lower.disk.as_mut().expect("the leader runs"), upper)
    } else {
        (upper.disk.as_mut().expect("the leader runs"), lower)
    }
}

impl Sim {
    pub(super) fn leader_disk(&self) -> Option<&Disk> {
        self.seats[self.raft.leader?].disk.as_ref()
    }

    pub(super) fn leader_config(&self) -> Option<&Membership> {
        self.leader_disk()?.config()
    }

    /// Whether `seat`'s current identity is in the leader's configuration.
    pub(super) fn in_config(&self, seat: usize) -> bool {
        let member = self.seats[seat].identity.member;
        self.leader_config().is_some_and(|c| c.members.contains_key(&member))
    }

    fn appended(&mut self, event: Event) -> Checked<()> {
        let leader = self.raft.leader.expect("only a leader appends");
        let bytes = Record { term: self.raft.term, event }.encode();
        let disk = self.seats[leader].disk.as_mut().expect("the leader runs");
        disk.append(&[(self.raft.term, bytes)]).or_else(|e| fail("storage", e))
    }

    /// The first member founds the group: it is the only voter.
    pub(super) fn bootstrap(&mut self, seat: usize) -> Checked<()> {
        self.raft.term = 1;
        self.raft.leader = Some(seat);
        let id = self.seats[seat].identity.member;
        let members = BTreeMap::from([(id, self.member_info(seat))]);
        self.appended(Event::Membership(Membership { voters: vec![id], learners: vec![], members }))
    }

    pub(super) fn member_info(&self, seat: usize) -> MemberInfo {
        let s = &self.seats[seat];
        let process = s.process.as_ref().expect("a running member joins");
        let join = JoinInfo { incarnation: s.identity.incarnation, position: process.core.start(), arbitrator: false };
        MemberInfo { uuid: s.identity.uuid.0, name: s.name.clone(), app: join.encode(), ..MemberInfo::default() }
    }

    /// Keeps or replaces the leader (see the module docs).
    pub(super) fn elect(&mut self) -> Checked<()> {
        if let Some(l) = self.raft.leader {
            if self.reachable(l) {
                return Ok(());
            }
            self.raft.leader = None;
        }
        let voter = |sim: &Sim, s: usize| {
            let id = sim.seats[s].identity.member;
            sim.seats[s].disk.as_ref().and_then(Disk::config).is_some_and(|c| c.voters.contains(&id))
        };
        let candidates: Vec<usize> = (0..self.seats.len()).filter(|&s| self.reachable(s) && voter(self, s)).collect();
        let up_to_date = |s: &usize| {
            let d = self.seats[*s].disk.as_ref().expect("reachable");
            (d.last_term(), d.last(), Reverse(*s))
        };
        let Some(best) = candidates.iter().copied().max_by_key(up_to_date) else { return Ok(()) };
        let config = self.seats[best].disk.as_ref().and_then(Disk::config).expect("a voter has a config").clone();
        let votes = config.voters.iter().filter(|&&id| candidates.iter().any(|&s| self.seats[s].identity.member == id));
        if votes.count() * 2 <= config.voters.len() {
            return Ok(());
        }
        let highest = self.seats.iter().filter_map(|s| s.disk.as_ref()).map(Disk::last_term).max().unwrap_or(0);
        self.raft.term = self.raft.term.max(highest) + 1;
        self.raft.leader = Some(best);
        self.raft.matched.clear();
        self.raft.acked.clear();
        self.raft.commit = self.seats[best].process.as_ref().map_or(0, |p| p.commit_known);
        self.world.pool.lose_some(&mut self.rng);
        self.world.stats.elections += 1;
        self.world.trace.note(&[30, best as u64, self.raft.term]);
        let (name, term, commit) = (&self.seats[best].name, self.raft.term, self.raft.commit);
        self.world.event(|| format!("{name}: elected leader of term {term} (knows commit {commit})"));
        self.check_committed_kept(best)?;
        self.appended(Event::Blank)
    }

    /// Raft's leader completeness: the new leader holds every committed entry.
    fn check_committed_kept(&self, leader: usize) -> Checked<()> {
        let disk = self.seats[leader].disk.as_ref().expect("the leader runs");
        for (&index, &term) in self.raft.committed.range(disk.base()..) {
            if disk.term_at(index) != Some(term) {
                let found = disk.term_at(index);
                let name = &self.seats[leader].name;
                return fail(
                    "raft_model",
                    format!("committed entry {index} (term {term}) is {found:?} in the log of the new leader {name}"),
                );
            }
        }
        Ok(())
    }

    /// The leader appends up to `n` pooled submissions (some are lost).
    pub(super) fn order(&mut self, n: usize, loss_pct: u32) -> Checked<()> {
        if self.raft.leader.is_none() {
            return Ok(());
        }
        for (origin, payload) in self.world.pool.arrived(self.now_ms) {
            self.world.stats.late_forwards += 1;
            self.world.trace.note(&[33, origin]);
            self.appended(Event::Message { origin, payload })?;
        }
        for _ in 0..n {
            let Some((origin, payload)) = self.world.pool.take(&mut self.rng) else { break };
            if self.rng.gen_range(0..100) < loss_pct {
                self.world.trace.note(&[31, origin]);
                if self.knobs.late_forwards && self.rng.gen_bool(0.5) {
                    let due = self.now_ms + self.rng.gen_range(500..8_000);
                    self.world.pool.delay(due, origin, payload);
                }
                continue;
            }
            self.appended(Event::Message { origin, payload })?;
        }
        Ok(())
    }

    /// At most one configuration change at a time, each once the previous
    /// one is committed: drop retired identities, make synced learners
    /// voters, add members the configuration lacks as learners.
    pub(super) fn change_membership(&mut self) -> Checked<()> {
        let Some(disk) = self.leader_disk() else { return Ok(()) };
        let (Some(config), Some(index)) = (disk.config().cloned(), disk.config_index()) else { return Ok(()) };
        if index > self.raft.commit {
            return Ok(());
        }
        let mut next = config.clone();
        if let Some(old) = self.retired.iter().copied().find(|id| config.members.contains_key(id)) {
            next.voters.retain(|&v| v != old);
            next.learners.retain(|&v| v != old);
            next.members.remove(&old);
        } else if let Some(id) = self.world.promotions.iter().copied().find(|id| config.learners.contains(id)) {
            next.learners.retain(|&v| v != id);
            next.voters.push(id);
        } else if let Some(seat) = (0..self.seats.len()).find(|&s| self.reachable(s) && !self.in_config(s)) {
            let id = self.seats[seat].identity.member;
            next.learners.push(id);
            next.members.insert(id, self.member_info(seat));
        } else {
            return Ok(());
        }
        self.world.promotions.retain(|id| next.learners.contains(id));
        self.world.trace.note(&[32, next.voters.len() as u64, next.members.len() as u64]);
        self.world.event(|| format!("membership: voters {:?}, learners {:?}", next.voters, next.learners));
        self.appended(Event::Membership(next))
    }

    /// Brings every reachable follower's log closer to the leader's: up to
    /// `chunk` entries each, fewer (or none) when `lag` (a slow link), so
    /// that a leader can die holding entries nobody else has.
    pub(super) fn replicate(&mut self, chunk: u64, lag: bool) -> Checked<()> {
        let Some(leader) = self.raft.leader else { return Ok(()) };
        let mut sent = BTreeMap::new();
        for seat in 0..self.seats.len() {
            if seat != leader && self.reachable(seat) && self.in_config(seat) {
                let n = if lag { self.rng.gen_range(0..=chunk) } else { chunk };
                self.replicate_to(leader, seat, n, &mut sent)?;
            }
        }
        Ok(())
    }

    /// `sent`: the leader's records read this tick (followers mostly need
    /// the same ones), by index.
    fn replicate_to(
        &mut self,
        leader: usize,
        seat: usize,
        chunk: u64,
        sent: &mut BTreeMap<u64, (u64, Vec<u8>)>,
    ) -> Checked<()> {
        let (ld, follower) = two_disks(&mut self.seats, leader, seat);
        let fd = follower.disk.as_mut().expect("reachable");
        let (lo, hi) = (ld.base().max(fd.base()), ld.last().min(fd.last()));
        let matching = (lo..=hi).rev().find(|&i| fd.term_at(i).is_some() && fd.term_at(i) == ld.term_at(i));
        let Some(m) = matching else { return self.send_snapshot(leader, seat) };
        let applied = follower.process.as_ref().map_or(0, |p| p.applied);
        if fd.last() > m {
            if m < applied {
                return fail("raft_model", format!("{} would lose applied entries after {m}", follower.name));
            }
            fd.truncate_after(m).or_else(|e| fail("storage", e))?;
            self.world.trace.note(&[33, seat as u64, m]);
        }
        let to = ld.last().min(m + chunk);
        if to > m {
            if (m + 1..=to).any(|i| !sent.contains_key(&i)) {
                for (i, bytes) in ld.read_range(m + 1, to).or_else(|e| fail("storage", e))? {
                    sent.insert(i, (ld.term_at(i).expect("in the log"), bytes));
                }
            }
            let records: Vec<(u64, Vec<u8>)> = sent.range(m + 1..=to).map(|(_, r)| r.clone()).collect();
            fd.append(&records).or_else(|e| fail("storage", e))?;
        }
        self.raft.matched.insert(follower.identity.member, fd.last());
        Ok(())
    }

    /// The follower lacks what the leader purged: the leader's oldest
    /// checkpoint replaces its log and its replicated state.
    fn send_snapshot(&mut self, leader: usize, seat: usize) -> Checked<()> {
        let ld = self.seats[leader].disk.as_ref().expect("the leader runs");
        let Some(index) = ld.oldest_checkpoint() else {
            return fail(
                "raft_model",
                format!("{} cannot be brought in line and there is no checkpoint", self.seats[seat].name),
            );
        };
        let cp = ld.read_checkpoint(index).or_else(|e| fail("storage", e))?;
        self.world.stats.snapshots += 1;
        self.seats[seat].db.log_replaced = true;
        self.world.trace.note(&[34, seat as u64, index]);
        let name = &self.seats[seat].name;
        self.world
            .event(|| format!("{name}: installs the leader's checkpoint at index {index} (seqno {})", cp.position));
        self.with_process(seat, |p, disk, ctx| p.install_snapshot(&cp, disk, ctx))?;
        self.raft.matched.insert(self.seats[seat].identity.member, cp.index);
        Ok(())
    }

    /// Commit: the last entry of this term a majority acknowledged.
    pub(super) fn advance_commit(&mut self) -> Checked<()> {
        let Some(leader) = self.raft.leader else { return Ok(()) };
        let fsync = self.knobs.fsync;
        for seat in 0..self.seats.len() {
            let reachable = seat == leader || (self.reachable(seat) && self.in_config(seat));
            if let (true, Some(d)) = (reachable, self.seats[seat].disk.as_ref()) {
                let member = self.seats[seat].identity.member;
                let matched = if seat == leader { d.last() } else { self.raft.matched(member) };
                self.raft.acked.insert(member, matched.min(d.acked(fsync)));
            }
        }
        let disk = self.seats[leader].disk.as_ref().expect("the leader runs");
        let voters = disk.config().expect("a leader has a config").voters.clone();
        let acked = |n: u64| voters.iter().filter(|id| self.raft.acked.get(id).is_some_and(|&a| a >= n)).count();
        let newly = (self.raft.commit + 1..=disk.last())
            .rev()
            .find(|&n| disk.term_at(n) == Some(self.raft.term) && acked(n) * 2 > voters.len());
        if let Some(n) = newly {
            for i in self.raft.commit + 1..=n {
                self.raft.committed.insert(i, disk.term_at(i).expect("in the log"));
            }
            self.raft.commit = n;
        }
        Ok(())
    }
}
