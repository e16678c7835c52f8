//! The send window: how far the leader lets a member fall behind in
//! *receiving* the ordered stream before it holds new payloads back.
//!
//! A Raft entry commits once a majority has it, so a member that receives
//! late (a stalled process, busy cores, a slow disk) falls behind without
//! slowing anyone: the ordered stream goes on at the others' pace. Flow
//! control cannot see that gap. A member counts what it received and has not
//! applied; what it has not even received yet it knows nothing of, so its
//! pause goes out late, and the writers have run on meanwhile (measured on
//! 2 cores: a slow node's receiving fell 167 entries behind in bursts, and
//! its lag peaked at 400 write-sets against a flow-control limit of 27).
//! Galera has no such gap: its total order waits for every member to
//! receive (`evs.send_window`), so a slow receiver slows the senders.
//!
//! So the leader, before it appends, looks at each voter it heard from
//! lately: while one has more than `window` entries it has not acknowledged,
//! payloads wait. A member that went quiet (down, cut off) stops counting
//! once its last acknowledgement is older than `live`, so a dead member
//! holds the group back for that long at most, not until it is evicted. One
//! that is far behind (back from a partition, catching up) counts only once
//! it is near again: holding everyone while it streams a long gap would
//! stop the group for nothing, since holding does not bring it nearer.

use std::time::Duration;

/// Past this many windows behind a member is catching up, not lagging.
pub const FAR_WINDOWS: u64 = 32;

/// What the leader knows of one other voter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Follower {
    /// Entries of the leader's log it has not acknowledged.
    pub behind: u64,
    /// Since its last acknowledgement; `None`: never heard from.
    pub heard: Option<Duration>,
}

/// Whether the leader must hold new payloads back now.
pub fn must_hold(followers: impl IntoIterator<Item = Follower>, window: u64, live: Duration) -> bool {
    if window == 0 {
        return false;
    }
    let far = window.saturating_mul(FAR_WINDOWS);
    followers.into_iter().any(|f| f.heard.is_some_and(|h| h <= live) && f.behind > window && f.behind <= far)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: Duration = Duration::from_millis(200);

    fn near(behind: u64) -> Follower {
        Follower { behind, heard: Some(Duration::from_millis(5)) }
    }

    #[test]
    fn a_live_voter_past_the_window_holds_the_leader_back() {
        assert!(!must_hold([near(0), near(64)], 64, LIVE), "at the window is within it");
        assert!(must_hold([near(0), near(65)], 64, LIVE));
        assert!(!must_hold([near(0), near(65)], 0, LIVE), "0 turns the window off");
    }

    #[test]
    fn a_quiet_or_far_behind_voter_holds_nothing_back() {
        let quiet = Follower { behind: 100, heard: Some(Duration::from_millis(201)) };
        let never = Follower { behind: 100, heard: None };
        assert!(!must_hold([near(0), quiet, never], 64, LIVE));
        let catching_up = near(64 * FAR_WINDOWS + 1);
        assert!(!must_hold([near(0), catching_up], 64, LIVE));
        assert!(must_hold([near(0), near(64 * FAR_WINDOWS)], 64, LIVE), "near again: it counts");
    }
}
