//! Consistency voting, this node's side: the group's ballots as they move,
//! this node's failures to apply, and what the applier must skip. The
//! counting itself is in `voting.rs`; this is what the core does with it.

use super::{Command, NodeCore};
use crate::message::Body;
use crate::types::Seqno;
use crate::voting::{Ballots, Code, VoteAction, SUCCESS};

impl NodeCore {
    /// Whether `on_votes` has anything to do (cheap: checked on every event).
    pub fn votes_moved(&self, ballots: &Ballots) -> bool {
        self.votes.active() || ballots.generation != self.votes.seen.generation
    }

    /// After an ordered event: follow the group's ballots. `applied`: the
    /// last seqno this node has applied (left the apply monitor).
    pub fn on_votes(&mut self, ballots: &Ballots, applied: Seqno) -> Vec<Command> {
        let mut out = vec![];
        if self.votes.observe(ballots) {
            out.push(Command::VotesChanged);
        }
        if self.votes.active() || matches!(out.first(), Some(Command::VotesChanged)) {
            self.vote_step(applied, &mut out);
        }
        self.checked_into(&mut out);
        out
    }

    /// The server failed to apply (or execute, for TOI) `seqno` here.
    /// `policy`: `gcs.vote_policy` now.
    pub fn vote_failed(
        &mut self,
        seqno: Seqno,
        code: Code,
        reason: String,
        applied: Seqno,
        policy: u32,
    ) -> Vec<Command> {
        let mut out = vec![];
        self.votes.policy = policy;
        self.votes.failed(seqno, code, reason);
        self.vote_step(applied, &mut out);
        self.checked_into(&mut out);
        out
    }

    /// The server's data is now at `position` (see `MyVotes::applies_after`).
    pub fn applies_after(&mut self, position: Seqno) {
        self.votes.applies_after(position);
        self.checked();
    }

    /// A failure of ours still under vote: if the node stops now, its data
    /// may be the odd one out.
    pub fn undecided_failure(&self) -> Option<Seqno> {
        self.votes.undecided_failure()
    }

    /// The group's decision on `seqno`, once there is one.
    pub fn vote_decision(&self, seqno: Seqno) -> Option<Code> {
        self.votes.decision(seqno)
    }

    /// Whether the applier must skip `seqno`: the group voted that it failed
    /// on the majority, which rolled it back (Galera skips it in the same way,
    /// and leaves it out of IST).
    pub fn skips(&mut self, seqno: Seqno) -> bool {
        let skip = self.votes.decision(seqno).is_some_and(|w| w != SUCCESS);
        if skip {
            self.votes.skipped(seqno);
        }
        self.checked();
        skip
    }

    pub(super) fn vote_step(&mut self, applied: Seqno, out: &mut Vec<Command>) {
        if !self.votes_enabled || self.closing {
            return;
        }
        for action in self.votes.step(self.me, applied, self.live, self.now_ms) {
            out.push(match action {
                VoteAction::Submit { seqno, code, reason, policy } => {
                    Command::Submit(Body::Vote { seqno, code, reason, policy })
                }
                VoteAction::Inconsistent { seqno, mine, winner } => Command::Inconsistent { seqno, mine, winner },
            });
        }
    }
}
