//! Consistency voting: when a write-set or a TOI statement fails on some
//! nodes and succeeds on others (or fails differently), the group decides by
//! vote which outcome is the cluster's, and every node whose outcome differs
//! leaves as inconsistent. These are Galera 4's semantics; the protocol is
//! ours: votes are messages in the total order, so every member counts the
//! same votes against the same membership at the same point of the order and
//! reaches the same decision, and a member that replays the history later
//! (IST, a restart) finds the decisions in it.
//!
//! A vote is a code: 0 for success, else a hash of the error text the server
//! reported, so two nodes that failed the same way vote the same. A node that
//! fails opens the ballot; every other voter answers once it has applied that
//! seqno. The rules of the count (`winner`):
//! - voters are the members of the primary view that hold data and are in
//!   step (synced or donor), plus any member that already applied the seqno or
//!   voted on it; arbitrators hold no data and never vote;
//! - a member that reported a committed position at or past the seqno and did
//!   not vote counts as a success;
//! - the most votes win; success wins a tie, and between two failures the
//!   larger code wins, so the outcome does not depend on arrival order;
//! - the count ends as soon as the votes still missing cannot change the
//!   winner, or when a view change removes the members that have not voted;
//! - `gcs.vote_policy` N > 0: success wins as soon as N members succeeded,
//!   whatever the others say (the policy of the member that opened the
//!   ballot holds, so every member counts alike).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::types::{Seqno, Uuid};

/// A vote: `SUCCESS`, or the code of an error text (`code_of`).
pub type Code = u64;

pub const SUCCESS: Code = 0;

/// Decisions kept for members that replay the history later; a ballot is
/// only ever looked up near the seqnos being applied.
pub const KEEP_DECIDED: usize = 1024;

/// A failed member's vote is submitted again this often until it is seen
/// ordered (a leader change may lose a submission).
pub const RESEND_EVERY_MS: u64 = 2_000;

/// The vote for an error text: a 64-bit FNV-1a hash with the top bit set, so
/// that no error ever votes success. Stable across builds and machines,
/// which is all that matters: every member computes it the same way.
pub fn code_of(error: &[u8]) -> Code {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in error {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h | (1 << 63)
}

/// The winner of a count, if the missing votes can no longer change it.
/// `policy`: `gcs.vote_policy` (0: a plain majority).
pub fn winner(counts: &BTreeMap<Code, usize>, missing: usize, policy: u32) -> Option<Code> {
    let count = |c: Code| counts.get(&c).copied().unwrap_or(0);
    if policy > 0 {
        let successes = count(SUCCESS);
        if successes >= policy as usize {
            return Some(SUCCESS);
        }
        if successes + missing >= policy as usize {
            return None; // success may still reach the policy
        }
    }
    // `a` wins a tie against `b`.
    let beats = |a: Code, b: Code| a == SUCCESS || (b != SUCCESS && a > b);
    let Some(lead) = counts.iter().fold(None, |best: Option<Code>, (&c, &n)| match best {
        Some(b) if n < count(b) || (n == count(b) && !beats(c, b)) => Some(b),
        _ => Some(c),
    }) else {
        // Nobody who counts has voted: only the missing votes could decide.
        return (missing == 0).then_some(SUCCESS);
    };
    let lead_n = count(lead);
    // Could `other` (None: a code nobody has voted yet) still overtake or tie
    // the leader and win the tie, if every missing vote went to it?
    let overtaken_by = |other: Option<Code>| {
        let n = other.map_or(0, count) + missing;
        n > lead_n || (n == lead_n && !other.is_some_and(|o| beats(lead, o)) && !(other.is_none() && lead == SUCCESS))
    };
    let challenged = counts.keys().filter(|&&c| c != lead).any(|&c| overtaken_by(Some(c)))
        || (lead != SUCCESS && overtaken_by(Some(SUCCESS)))
        || (missing > 0 && overtaken_by(None));
    (!challenged).then_some(lead)
}

/// One seqno under vote: who voted what.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ballot {
    pub votes: BTreeMap<Uuid, Code>,
    /// `gcs.vote_policy` of the member that opened it.
    pub policy: u32,
}

/// A member as the count sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Voter {
    pub uuid: Uuid,
    /// Holds data and is in step: its answer is waited for.
    pub eligible: bool,
    /// The member's last reported committed seqno.
    pub committed: Seqno,
}

/// What became of a vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cast {
    /// The first failure on this seqno: a ballot is open.
    Opened,
    Counted,
    /// The ballot was decided already (a late vote, or a replay).
    Late {
        winner: Code,
    },
    /// A success vote on a seqno nobody failed, or a repeated vote.
    Ignored,
}

/// The result of a count that ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub seqno: Seqno,
    pub winner: Code,
    /// Votes per code, and how many members counted.
    pub counts: BTreeMap<Code, usize>,
    pub voters: usize,
}

/// The group's ballots: part of the replicated state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ballots {
    pub open: BTreeMap<Seqno, Ballot>,
    pub decided: BTreeMap<Seqno, Code>,
    /// Bumped on every change, so a node copies the ballots only when they moved.
    pub generation: u64,
}

impl Ballots {
    pub fn decision(&self, seqno: Seqno) -> Option<Code> {
        self.decided.get(&seqno).copied()
    }

    pub fn cast(&mut self, seqno: Seqno, from: Uuid, code: Code, policy: u32) -> Cast {
        if let Some(&winner) = self.decided.get(&seqno) {
            return Cast::Late { winner };
        }
        let opened = !self.open.contains_key(&seqno);
        if opened && code == SUCCESS {
            return Cast::Ignored;
        }
        let ballot = self.open.entry(seqno).or_insert(Ballot { votes: BTreeMap::new(), policy });
        if ballot.votes.contains_key(&from) {
            return Cast::Ignored; // a resubmission: the first vote stands
        }
        ballot.votes.insert(from, code);
        self.generation += 1;
        if opened {
            Cast::Opened
        } else {
            Cast::Counted
        }
    }

    /// Counts every open ballot against the current members; returns the
    /// ballots this count decided, lowest seqno first.
    pub fn recount(&mut self, members: &[Voter]) -> Vec<Decision> {
        let mut decided = vec![];
        for (&seqno, ballot) in &self.open {
            let (counts, voters, missing) = count(seqno, ballot, members);
            if let Some(winner) = winner(&counts, missing, ballot.policy) {
                decided.push(Decision { seqno, winner, counts, voters });
            }
        }
        for d in &decided {
            self.open.remove(&d.seqno);
            self.decided.insert(d.seqno, d.winner);
        }
        while self.decided.len() > KEEP_DECIDED {
            self.decided.pop_first();
        }
        if !decided.is_empty() {
            self.generation += 1;
        }
        decided
    }
}

/// Votes per code, the number of members that count, and how many of them
/// have not voted yet.
fn count(seqno: Seqno, ballot: &Ballot, members: &[Voter]) -> (BTreeMap<Code, usize>, usize, usize) {
    let mut counts = BTreeMap::new();
    let (mut voters, mut missing) = (0, 0);
    for m in members {
        let explicit = ballot.votes.get(&m.uuid).copied();
        let applied = m.committed >= seqno;
        if explicit.is_none() && !applied && !m.eligible {
            continue;
        }
        voters += 1;
        match explicit.or(applied.then_some(SUCCESS)) {
            Some(code) => *counts.entry(code).or_insert(0) += 1,
            None => missing += 1,
        }
    }
    (counts, voters, missing)
}

/// This node's side of voting: its outcome on each seqno under vote, and
/// what it did about each decision. Pure: the node's core drives it.
#[derive(Debug, Default)]
pub struct MyVotes {
    /// The group's ballots as of the last ordered event.
    pub seen: Ballots,
    failed: BTreeMap<Seqno, Failure>,
    /// Seqnos this node answered with a success.
    answered: BTreeSet<Seqno>,
    /// `gcs.vote_policy`, sent with each vote.
    pub policy: u32,
    /// Seqnos this node did not apply because the group had voted them failed.
    skipped: BTreeSet<Seqno>,
    /// Decisions this node has acted upon.
    settled: BTreeSet<Seqno>,
    /// A decision waits for this node to apply its seqno.
    unsettled: bool,
    /// This process applies the seqnos after this one itself; those up to it
    /// came with its data (a state transfer, its own position at restart).
    own_from: Seqno,
}

#[derive(Debug)]
struct Failure {
    code: Code,
    reason: String,
    sent_ms: u64,
}

/// What the node must do about its votes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoteAction {
    Submit {
        seqno: Seqno,
        code: Code,
        reason: String,
        policy: u32,
    },
    /// This node's outcome on `seqno` differs from the group's: it must leave.
    Inconsistent {
        seqno: Seqno,
        mine: Code,
        winner: Code,
    },
}

impl MyVotes {
    /// Copies the group's ballots if they changed; true if they did.
    pub fn observe(&mut self, ballots: &Ballots) -> bool {
        if ballots.generation == self.seen.generation {
            return false;
        }
        self.seen = ballots.clone();
        true
    }

    /// Whether anything is under way (a ballot open, or a failure of ours).
    pub fn active(&self) -> bool {
        !self.seen.open.is_empty() || !self.failed.is_empty() || self.unsettled
    }

    pub fn decision(&self, seqno: Seqno) -> Option<Code> {
        self.seen.decision(seqno)
    }

    /// The lowest seqno this node failed and the group has not decided yet.
    pub fn undecided_failure(&self) -> Option<Seqno> {
        self.failed.keys().find(|s| !self.seen.decided.contains_key(s)).copied()
    }

    /// This node failed to apply `seqno`: its vote goes to the group, unless
    /// the group decided already (the history is being replayed).
    pub fn failed(&mut self, seqno: Seqno, code: Code, reason: String) {
        self.failed.entry(seqno).or_insert(Failure { code, reason, sent_ms: 0 });
    }

    /// The server's data is at `position` (founded, resumed, or received by a
    /// state transfer): decisions up to it are not this process's to answer.
    pub fn applies_after(&mut self, position: Seqno) {
        self.own_from = position;
    }

    /// This node skipped `seqno`, which the group voted failed.
    pub fn skipped(&mut self, seqno: Seqno) {
        self.skipped.insert(seqno);
    }

    /// What to do now. `applied`: everything up to it has left the apply
    /// monitor here. `live`: this process is in the primary view; before
    /// that it only replays history, whose decisions it does not answer to
    /// (its own failures it still checks against them).
    pub fn step(&mut self, me: Uuid, applied: Seqno, live: bool, now_ms: u64) -> Vec<VoteAction> {
        let mut out = vec![];
        self.send_failures(me, now_ms, &mut out);
        if live {
            for (&seqno, ballot) in &self.seen.open {
                let mine = ballot.votes.contains_key(&me) || self.failed.contains_key(&seqno);
                if !mine && applied >= seqno && self.answered.insert(seqno) {
                    out.push(VoteAction::Submit { seqno, code: SUCCESS, reason: String::new(), policy: self.policy });
                }
            }
        }
        let decided: Vec<(Seqno, Code)> =
            self.seen.decided.iter().filter(|(s, _)| !self.settled.contains(s)).map(|(&s, &w)| (s, w)).collect();
        self.unsettled = false;
        for (seqno, winner) in decided {
            let mine = match self.failed.get(&seqno) {
                Some(f) => Some(f.code),
                None if self.skipped.contains(&seqno) => Some(winner),
                // History, or seqnos that came with the data: not ours to answer.
                None if !live || seqno <= self.own_from => Some(winner),
                None => (applied >= seqno).then_some(SUCCESS),
            };
            let Some(mine) = mine else {
                // Decided before this node got there (a local TOI statement
                // still running, a slow applier): checked again each tick.
                self.unsettled = true;
                continue;
            };
            self.settled.insert(seqno);
            self.failed.remove(&seqno);
            if mine != winner {
                out.push(VoteAction::Inconsistent { seqno, mine, winner });
            }
        }
        self.forget_old();
        out
    }

    /// Our failure votes not yet seen ordered go (again).
    fn send_failures(&mut self, me: Uuid, now_ms: u64, out: &mut Vec<VoteAction>) {
        for (&seqno, f) in self.failed.iter_mut() {
            let ordered = self.seen.open.get(&seqno).is_some_and(|b| b.votes.contains_key(&me));
            if ordered || self.seen.decided.contains_key(&seqno) {
                continue;
            }
            if f.sent_ms == 0 || now_ms >= f.sent_ms + RESEND_EVERY_MS {
                f.sent_ms = now_ms.max(1);
                out.push(VoteAction::Submit { seqno, code: f.code, reason: f.reason.clone(), policy: self.policy });
            }
        }
    }

    /// Bookkeeping for ballots the group has forgotten.
    fn forget_old(&mut self) {
        let Some(oldest) = self.seen.decided.keys().next().copied().or(self.seen.open.keys().next().copied()) else {
            return;
        };
        self.settled.retain(|&s| s >= oldest);
        self.answered.retain(|&s| s >= oldest);
        self.skipped.retain(|&s| s >= oldest);
    }
}

#[cfg(test)]
#[path = "voting_tests.rs"]
mod tests;
