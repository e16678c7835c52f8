//! How a node gets its data in step with the group when it (re)joins: the
//! decision is pure and lives here, so that it can be tested case by case.
//!
//! ```text
//!   local data at X, same history, X >= first replayable seqno  -> Resume at X (IST)
//!   this node founded the history with this very view          -> Found
//!   local data ahead of the view (same history)                 -> Diverged (refuse)
//!   anything else (no data, other history, X too old)           -> Transfer (SST)
//! ```
//!
//! "Replayable" means the ordered history this process has seen from its
//! replica's starting point: its own durable log from a checkpoint, then the
//! group's log. A resumed node is connected to the server at its own
//! position X and receives X+1.. through the normal appliers: that stream is
//! IST, whether the write-sets come from its own log or from the leader's.

use crate::group_state::ViewChange;
use crate::types::{Gtid, Seqno, Uuid};

/// How the server is brought in step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The history starts with this view, founded by this node: its data is
    /// the group's state by definition.
    Found,
    /// Connect at the local position; everything after it is applied from
    /// the ordered stream (IST).
    Resume { position: Seqno },
    /// Connect at the view, then a full state transfer from a donor.
    Transfer,
}

/// What the join task delivers first: the plan, and the view the server is
/// connected with (for `Resume`, positioned at the local data).
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    pub plan: Plan,
    pub view: ViewChange,
}

/// Where this process stands relative to the history it replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footing {
    /// Where the local data is (`wsrep_start_position`, or grastate.dat).
    pub start: Gtid,
    /// The history the group continues.
    pub group_uuid: Uuid,
    /// The first seqno this process can replay: the replica's position when
    /// it was last restored (checkpoint or snapshot), plus one.
    pub replay_from: Seqno,
}

impl Footing {
    /// Whether the local data can be brought up to date from the ordered
    /// history this process replays (no state transfer needed).
    pub fn resumable(&self) -> bool {
        self.start.seqno >= 0
            && !self.start.uuid.is_nil()
            && self.start.uuid == self.group_uuid
            && self.start.seqno + 1 >= self.replay_from
    }

    /// The local data holds seqnos the group has not ordered yet: it comes
    /// from a different past (a restored backup, a split brain). Galera
    /// refuses such a node rather than join it on a guess.
    pub fn ahead_of(&self, view_seqno: Seqno) -> bool {
        self.start.uuid == self.group_uuid && self.start.seqno >= view_seqno
    }

    /// The history was founded at `first_seqno` on data from Galera, whose
    /// cache showed that every seqno after `last_write` up to `first_seqno`
    /// was a configuration change: no data. Local data of that history at
    /// `last_write` or later then holds exactly the state at `first_seqno`,
    /// and counts as being there, so that it resumes instead of taking a
    /// state transfer. Only while replaying from the history's very start.
    /// Returns where the local data was, when it moved.
    pub fn skip_inherited_changes(&mut self, first_seqno: Seqno, last_write: Option<Seqno>) -> Option<Seqno> {
        let last_write = last_write?;
        let same_history = !self.start.uuid.is_nil() && self.start.uuid == self.group_uuid;
        let behind_by_changes = (last_write..first_seqno).contains(&self.start.seqno);
        if !same_history || !behind_by_changes || self.replay_from != first_seqno + 1 {
            return None;
        }
        let was = self.start.seqno;
        self.start.seqno = first_seqno;
        Some(was)
    }
}

/// The plan for the view that admits this process to the group. `founder`:
/// the view is the first of its history and this node its only member.
pub fn plan_at_view(footing: &Footing, view_seqno: Seqno, founder: bool) -> Result<Plan, String> {
    if founder {
        return Ok(Plan::Found);
    }
    if footing.ahead_of(view_seqno) {
        return Err(format!(
            "local state seqno ({}) is not below the group's ({}): the histories diverged; \
             remove grastate.dat and let the node get a state transfer if this is expected",
            footing.start.seqno, view_seqno
        ));
    }
    if footing.resumable() {
        return Ok(Plan::Resume { position: footing.start.seqno });
    }
    Ok(Plan::Transfer)
}

/// The view a resumed server is connected with: the group's configuration,
/// positioned at the local data, so that the server's checkpoint stays
/// where its data is (it writes a view's seqno as its checkpoint).
pub fn view_at(view: &ViewChange, position: Seqno) -> ViewChange {
    let mut at = view.clone();
    at.state_id.seqno = position;
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const HISTORY: Uuid = Uuid([7; 16]);

    fn footing(start: Seqno, replay_from: Seqno) -> Footing {
        Footing { start: Gtid { uuid: HISTORY, seqno: start }, group_uuid: HISTORY, replay_from }
    }

    #[test]
    fn data_inside_the_replayable_history_resumes() {
        assert_eq!(plan_at_view(&footing(10, 5,), 20, false), Ok(Plan::Resume { position: 10 }));
        // Exactly at the replay start: the next seqno is the first replayed.
        assert_eq!(plan_at_view(&footing(4, 5), 20, false), Ok(Plan::Resume { position: 4 }));
        // Nothing missed at all.
        assert_eq!(plan_at_view(&footing(19, 5), 20, false), Ok(Plan::Resume { position: 19 }));
    }

    /// Founded at 27 on Galera's data; 26 and 27 were departures.
    #[test]
    fn data_behind_by_inherited_configuration_changes_resumes_at_the_start() {
        let mut behind = footing(25, 28);
        assert_eq!(behind.skip_inherited_changes(27, Some(25)), Some(25));
        assert_eq!(behind.start.seqno, 27);
        assert_eq!(plan_at_view(&behind, 29, false), Ok(Plan::Resume { position: 27 }));
        let mut one_behind = footing(26, 28);
        assert_eq!(one_behind.skip_inherited_changes(27, Some(25)), Some(26));
        assert_eq!(plan_at_view(&one_behind, 29, false), Ok(Plan::Resume { position: 27 }));
    }

    #[test]
    fn inherited_changes_never_cover_missing_data() {
        // Seqno 25 was a write-set: data at 24 lacks it.
        let mut before_the_write = footing(24, 28);
        assert_eq!(before_the_write.skip_inherited_changes(27, Some(25)), None);
        assert_eq!(plan_at_view(&before_the_write, 29, false), Ok(Plan::Transfer));
        // Nothing known of Galera's cache.
        let mut unknown = footing(26, 28);
        assert_eq!(unknown.skip_inherited_changes(27, None), None);
        assert_eq!(plan_at_view(&unknown, 29, false), Ok(Plan::Transfer));
        // Another history.
        let mut other = Footing { start: Gtid { uuid: Uuid([1; 16]), seqno: 26 }, ..footing(0, 28) };
        assert_eq!(other.skip_inherited_changes(27, Some(25)), None);
        // Restored from a snapshot: the history's start is not replayed.
        let mut restored = footing(26, 40);
        assert_eq!(restored.skip_inherited_changes(27, Some(25)), None);
        // Already at or past the start: nothing to skip.
        let mut founder = footing(27, 28);
        assert_eq!(founder.skip_inherited_changes(27, Some(25)), None);
        assert_eq!(founder.start.seqno, 27);
    }

    #[test]
    fn data_older_than_the_replayable_history_needs_a_transfer() {
        assert_eq!(plan_at_view(&footing(3, 5), 20, false), Ok(Plan::Transfer));
    }

    #[test]
    fn no_data_or_another_history_needs_a_transfer() {
        let none = Footing { start: Gtid::UNDEFINED, group_uuid: HISTORY, replay_from: 0 };
        assert_eq!(plan_at_view(&none, 20, false), Ok(Plan::Transfer));
        let other = Footing { start: Gtid { uuid: Uuid([1; 16]), seqno: 10 }, group_uuid: HISTORY, replay_from: 0 };
        assert_eq!(plan_at_view(&other, 20, false), Ok(Plan::Transfer));
        assert!(!other.resumable());
    }

    #[test]
    fn data_ahead_of_the_group_is_refused() {
        let err = plan_at_view(&footing(20, 5), 20, false).unwrap_err();
        assert!(err.contains("diverged"), "{err}");
        assert!(plan_at_view(&footing(25, 5), 20, false).is_err());
    }

    #[test]
    fn a_founder_needs_nothing() {
        let none = Footing { start: Gtid::UNDEFINED, group_uuid: HISTORY, replay_from: 0 };
        assert_eq!(plan_at_view(&none, 1, true), Ok(Plan::Found));
    }

    #[test]
    fn a_resumed_view_is_positioned_at_the_data() {
        let v = ViewChange { state_id: Gtid { uuid: HISTORY, seqno: 20 }, view_no: 3, members: vec![] };
        let at = view_at(&v, 12);
        assert_eq!((at.state_id.seqno, at.view_no, at.state_id.uuid), (12, 3, HISTORY));
    }
}
