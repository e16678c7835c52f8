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
//!
//! What a voter has not acknowledged includes what is still on its way: a
//! voter one round trip away cannot have acknowledged what the leader
//! appended within that round trip, however fast it receives. Counting those
//! entries would cap the group at one window per round trip (measured with
//! a site 50 ms away: 1,301 commits/s, against 3,307 with the window 16
//! times larger). So only entries older than the voter's round trip count
//! ([`Follower::in_flight`], from [`Appended`] and the round trips the
//! pipelined links measure, `crate::round_trips`): the window is sized for
//! each link by itself, and on a LAN it is what it was.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Past this many windows behind a member is catching up, not lagging.
pub const FAR_WINDOWS: u64 = 32;

/// What the leader knows of one other voter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Follower {
    /// Entries of the leader's log it has not acknowledged.
    pub behind: u64,
    /// Of those, the ones appended within its last round trip: on their
    /// way, or their acknowledgement on its way back.
    pub in_flight: u64,
    /// Since its last acknowledgement; `None`: never heard from.
    pub heard: Option<Duration>,
}

/// Whether the leader must hold new payloads back now.
pub fn must_hold(followers: impl IntoIterator<Item = Follower>, window: u64, live: Duration) -> bool {
    if window == 0 {
        return false;
    }
    let far = window.saturating_mul(FAR_WINDOWS);
    followers.into_iter().any(|f| {
        let late = f.behind.saturating_sub(f.in_flight);
        f.heard.is_some_and(|h| h <= live) && late > window && late <= far
    })
}

/// How far back [`Appended`] remembers: a round trip longer than this
/// counts as this long.
pub const HORIZON: Duration = Duration::from_secs(5);

/// Samples closer than this are one: at most one per millisecond is kept.
const GRAIN: Duration = Duration::from_millis(1);

/// What the leader's log held when: `(t, index)` says the log reached
/// `index` by `t`. Noted before each append; a sample may be late by the
/// time between two appends (and [`GRAIN`]), which only makes an entry look
/// younger, so in flight longer: never held back for what is on its way.
#[derive(Debug, Default)]
pub struct Appended {
    samples: VecDeque<(Instant, u64)>,
}

impl Appended {
    /// The log reached `index` by `now`.
    pub fn note(&mut self, now: Instant, index: u64) {
        match self.samples.back() {
            Some(&(_, last)) if index <= last => return,
            Some(&(at, _)) if now < at + GRAIN => return,
            _ => self.samples.push_back((now, index)),
        }
        // Keep one sample at or before the horizon, for round trips that long.
        while self.samples.get(1).is_some_and(|&(at, _)| at + HORIZON <= now) {
            self.samples.pop_front();
        }
    }

    /// Of the log's `last` entries, how many came after `now - round_trip`.
    /// With no sample that old, none: never too little held back.
    pub fn in_flight(&self, now: Instant, round_trip: Duration, last: u64) -> u64 {
        let Some(then) = now.checked_sub(round_trip.min(HORIZON)) else { return 0 };
        let by_then = self.samples.iter().take_while(|&&(at, _)| at <= then).last();
        by_then.map_or(0, |&(_, index)| last.saturating_sub(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: Duration = Duration::from_millis(200);

    fn near(behind: u64) -> Follower {
        Follower { behind, in_flight: 0, heard: Some(Duration::from_millis(5)) }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_live_voter_past_the_window_holds_the_leader_back() {
        assert!(!must_hold([near(0), near(64)], 64, LIVE), "at the window is within it");
        assert!(must_hold([near(0), near(65)], 64, LIVE));
        assert!(!must_hold([near(0), near(65)], 0, LIVE), "0 turns the window off");
    }

    #[test]
    fn a_quiet_or_far_behind_voter_holds_nothing_back() {
        let quiet = Follower { behind: 100, in_flight: 0, heard: Some(Duration::from_millis(201)) };
        let never = Follower { behind: 100, in_flight: 0, heard: None };
        assert!(!must_hold([near(0), quiet, never], 64, LIVE));
        let catching_up = near(64 * FAR_WINDOWS + 1);
        assert!(!must_hold([near(0), catching_up], 64, LIVE));
        assert!(must_hold([near(0), near(64 * FAR_WINDOWS)], 64, LIVE), "near again: it counts");
    }

    #[test]
    fn what_is_in_flight_does_not_count() {
        let remote = |behind, in_flight| Follower { behind, in_flight, heard: Some(ms(5)) };
        assert!(!must_hold([remote(130, 66)], 64, LIVE), "64 late: at the window");
        assert!(must_hold([remote(130, 65)], 64, LIVE), "65 late");
        assert!(!must_hold([remote(10, 65)], 64, LIVE), "more in flight than behind: none late");
        let far = 64 * FAR_WINDOWS;
        assert!(!must_hold([remote(far + 101, 100)], 64, LIVE), "far behind, beyond the flight");
        assert!(must_hold([remote(far + 100, 100)], 64, LIVE));
    }

    #[test]
    fn in_flight_is_what_came_within_the_round_trip() {
        let t0 = Instant::now();
        let mut log = Appended::default();
        for k in 0..=100u64 {
            log.note(t0 + ms(k), 10 * k);
        }
        let now = t0 + ms(100);
        assert_eq!(log.in_flight(now, ms(50), 1000), 500, "by 50 ms the log held 500");
        assert_eq!(log.in_flight(now, ms(0), 1000), 0);
        assert_eq!(log.in_flight(now, ms(200), 1000), 0, "no sample that old: nothing in flight");
        assert_eq!(log.in_flight(now, ms(49) + Duration::from_micros(500), 1000), 500, "between samples: the older");
    }

    #[test]
    fn the_history_is_coarse_and_bounded() {
        let t0 = Instant::now();
        let mut log = Appended::default();
        log.note(t0, 1);
        log.note(t0 + Duration::from_micros(500), 2);
        assert_eq!(log.samples.len(), 1, "within a grain: one sample");
        log.note(t0 + ms(2), 2);
        log.note(t0 + ms(3), 2);
        assert_eq!(log.samples.len(), 2, "no new entry: no new sample");
        assert_eq!(log.in_flight(t0 + ms(3), ms(2), 2), 1, "2 was noted late, so it counts as in flight");
        for k in 1..=20_000u64 {
            log.note(t0 + ms(k), 2 + k);
        }
        let now = t0 + ms(20_000);
        let kept = log.samples.len() as u128;
        assert!(kept <= HORIZON.as_millis() + 2, "{kept} samples kept");
        assert_eq!(log.in_flight(now, HORIZON, 20_002), 5_000, "a round trip at the horizon still has a sample");
        assert_eq!(log.in_flight(now, HORIZON * 3, 20_002), 5_000, "a longer one counts as the horizon");
    }
}
