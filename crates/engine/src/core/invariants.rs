//! What must hold after every input of the core, checked after each one, in
//! every build. The checks are cheap (no walk over the certification index
//! or the history), so they stay on in production.
//!
//! A broken invariant is a bug of this process, never a peer's: only what
//! this code derives is checked, not what a message says. Where it is
//! broken the process must not go on, for what it would do next rests on
//! state it can no longer trust: a debug build (tests, the simulations)
//! panics at once, so that the input that broke it is on the stack; a
//! release build logs the invariant and asks for a restart
//! (`Command::RestartRequired`), as Galera aborts on a failed assertion.
//! The restarted process comes back through IST or SST: durability never
//! rested on this process's memory.

use super::{Command, NodeCore};
use crate::admission::Plan;
use crate::group_state::{GroupState, Outcome};
use crate::types::Seqno;

/// What may only move one way, as of the last check.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Marks {
    live: bool,
    admitted: bool,
    closing: bool,
    views_ordered: u64,
    now_ms: u64,
    /// The group state's seqno at the last ordered event since the last
    /// restore (a checkpoint or snapshot replaces the history before it).
    ordered_at: Option<Seqno>,
}

impl NodeCore {
    /// Checks the invariants after an input that returns no commands; a
    /// broken one is reported with the commands of the next input that does
    /// (a tick comes every 100 ms).
    pub(super) fn checked(&mut self) {
        self.log_state_shift();
        let checked = self.check_invariants();
        self.marks = self.marks_now();
        if let Err(why) = checked {
            self.broken(why);
        }
    }

    /// Checks the invariants after an input, and asks for a restart in
    /// `out` if one is broken (now, or since the last report).
    pub(super) fn checked_into(&mut self, out: &mut Vec<Command>) {
        self.checked();
        if let Some(why) = self.unreported.take() {
            out.push(Command::RestartRequired(why));
        }
    }

    /// After an ordered event: the group state and the outcome as well.
    pub(super) fn checked_ordered(&mut self, outcome_seqno: Option<Seqno>, state: &GroupState, out: &mut Vec<Command>) {
        let checks = state.check_invariants().and_then(|()| self.check_order(outcome_seqno, state.seqno));
        if let Err(why) = checks {
            self.broken(why);
        }
        self.marks.ordered_at = started(state);
        self.checked_into(out);
    }

    /// After a restore: the order starts again from the restored state.
    /// `GroupState::decode` has already refused a snapshot that breaks the
    /// state's invariants; they are checked again here all the same, as the
    /// core does not rest on how its caller built the state (restores are
    /// rare, and the check is O(members)).
    pub(super) fn checked_restored(&mut self, state: &GroupState, out: &mut Vec<Command>) {
        if let Err(why) = state.check_invariants() {
            self.broken(why);
        }
        self.marks.ordered_at = started(state);
        self.checked_into(out);
    }

    fn broken(&mut self, why: String) {
        // The simulations and tests stop on the input that broke it.
        assert!(!self.panic_on_broken, "invariant broken: {why}");
        if self.unreported.is_none() && !self.reported_broken {
            log::error!("Internal error: invariant broken: {why}");
            self.reported_broken = true;
            self.unreported = Some(format!("internal error: invariant broken: {why}"));
        }
    }

    /// Each ordered event moves the seqno by at most one, and an outcome
    /// that names a seqno names the one just reached.
    fn check_order(&self, outcome_seqno: Option<Seqno>, seqno: Seqno) -> Result<(), String> {
        if let Some(before) = self.marks.ordered_at {
            check(seqno == before || seqno == before + 1, || {
                format!("an ordered event moved the seqno from {before} to {seqno}")
            })?;
        }
        match outcome_seqno {
            Some(s) => check(s == seqno, || format!("an outcome at seqno {s} while the group state is at {seqno}")),
            None => Ok(()),
        }
    }

    /// What only moves one way, as it stands now.
    fn marks_now(&self) -> Marks {
        Marks {
            live: self.live,
            admitted: self.admission.is_some(),
            closing: self.closing,
            views_ordered: self.views_ordered,
            now_ms: self.now_ms,
            ordered_at: self.marks.ordered_at,
        }
    }

    /// The invariants of the node's own state, and that what only moves one
    /// way did not move back since the last check. Changes nothing: the
    /// marks move on in `checked`.
    pub fn check_invariants(&self) -> Result<(), String> {
        let (now, before) = (self.marks_now(), self.marks);
        check(now.live || !before.live, || "a live process is no longer live".into())?;
        check(now.admitted || !before.admitted, || "an admitted process lost its admission".into())?;
        check(now.closing || !before.closing, || "a closing process reopened".into())?;
        check(now.views_ordered >= before.views_ordered, || "the count of ordered views went back".into())?;
        check(now.now_ms >= before.now_ms, || format!("time went back from {} to {}", before.now_ms, now.now_ms))?;
        // Only a live process is removed, resynced or a donor.
        check(self.live || self.removed_at.is_none(), || "removed, but never live".into())?;
        check(self.live || !self.synced_ordered, || "its synced state ordered, but never live".into())?;
        check(self.live || self.bump_after.is_none(), || "asks for a view after a cut, but never live".into())?;
        check(self.live || self.donating_to.is_none(), || "a donor, but never live".into())?;
        // Write-sets are held for the server only until it is admitted.
        check(self.admission.is_none() || self.held_bytes == 0, || {
            format!("admitted with {} bytes of write-sets still held", self.held_bytes)
        })?;
        if let Some(Plan::Resume { position }) = self.admission.as_ref().map(|a| &a.plan) {
            let start = self.footing.start.seqno;
            check(*position == start, || format!("resumed at {position}, but the local data is at {start}"))?;
        }
        Ok(())
    }
}

impl GroupState {
    /// The invariants of the replicated state that its own code keeps,
    /// whatever the messages said (members sorted, the paused set and the
    /// arbitrators among them, nothing purged or barred beyond the seqno).
    pub fn check_invariants(&self) -> Result<(), String> {
        let seqno = self.seqno;
        check(self.first_seqno <= seqno, || format!("first seqno {} above the seqno {seqno}", self.first_seqno))?;
        check(self.members.windows(2).all(|w| w[0].uuid <= w[1].uuid), || "members out of order".into())?;
        let is_member = |u| self.member(u).is_some();
        check(self.paused_by.windows(2).all(|w| w[0] < w[1]), || "the paused set is out of order".into())?;
        check(self.paused_by.iter().all(|&u| is_member(u)), || "a member that left holds a pause".into())?;
        check(self.arbitrators.windows(2).all(|w| w[0] < w[1]), || "arbitrators out of order".into())?;
        check(self.arbitrators.iter().all(|&u| is_member(u)), || "an arbitrator that is not a member".into())?;
        check(self.segments.windows(2).all(|w| w[0].0 < w[1].0), || "sites out of order".into())?;
        check(self.segments.iter().all(|&(u, s)| is_member(u) && s != 0), || "a site kept for no member".into())?;
        let (purged, barrier) = (self.cert.purged_upto(), self.cert.last_barrier());
        check(purged <= seqno, || format!("the index is purged up to {purged}, above the seqno {seqno}"))?;
        check(barrier <= seqno, || format!("a barrier at {barrier}, above the seqno {seqno}"))?;
        for m in &self.members {
            if let Some((first, last)) = m.ist {
                check(first <= last && last <= seqno, || format!("member {} has an IST of {first}-{last}", m.uuid))?;
            }
        }
        let both = self.ballots.open.keys().find(|s| self.ballots.decided.contains_key(s));
        check(both.is_none(), || format!("seqno {both:?} both open for votes and decided"))
    }
}

impl Outcome {
    /// The seqno this outcome says the group reached, for those that say.
    pub(super) fn seqno(&self) -> Option<Seqno> {
        match self {
            Outcome::WriteSet { seqno, .. } | Outcome::Causal { seqno, .. } => Some(*seqno),
            Outcome::StateRequest { seqno, .. } | Outcome::MemberState { seqno, .. } => Some(*seqno),
            Outcome::View(vc) => Some(vc.state_id.seqno),
            _ => None,
        }
    }
}

/// The state's seqno, once its history has started: the first membership
/// of a history sets the seqno to where the founder's data is.
fn started(state: &GroupState) -> Option<Seqno> {
    (!state.group_uuid.is_nil()).then_some(state.seqno)
}

fn check(holds: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if holds {
        Ok(())
    } else {
        Err(why())
    }
}
