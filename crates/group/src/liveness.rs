//! When we last heard from each peer, as seen by the transport.
//!
//! openraft only tells the *leader* about its followers. Followers need their
//! own clock of leader contact for non-primary detection, and every member
//! wants to say which peers it still hears when it goes non-primary.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::sync::lock;
use crate::MemberId;

#[derive(Default)]
pub struct Liveness {
    /// Any successful exchange with the member, in either direction.
    heard: Mutex<BTreeMap<MemberId, Instant>>,
    /// AppendEntries (log or heartbeat) received from the member.
    appends: Mutex<BTreeMap<MemberId, Instant>>,
}

impl Liveness {
    pub fn heard(&self, member: MemberId) {
        lock(&self.heard).insert(member, Instant::now());
    }

    pub fn append_from(&self, member: MemberId) {
        let now = Instant::now();
        lock(&self.appends).insert(member, now);
        lock(&self.heard).insert(member, now);
    }

    /// Time since `member` last sent us an AppendEntries, if it ever did.
    pub fn since_append(&self, member: MemberId) -> Option<Duration> {
        lock(&self.appends).get(&member).map(Instant::elapsed)
    }

    /// Time since `member` was last heard from, if it ever was.
    pub fn since_heard(&self, member: MemberId) -> Option<Duration> {
        lock(&self.heard).get(&member).map(Instant::elapsed)
    }

    /// Members heard from within `window`, sorted.
    pub fn reachable(&self, window: Duration) -> Vec<MemberId> {
        let mut ids: Vec<MemberId> =
            lock(&self.heard).iter().filter(|(_, at)| at.elapsed() <= window).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reachable_lists_recent_peers_only() {
        let l = Liveness::default();
        l.heard(3);
        l.append_from(1);
        assert_eq!(l.reachable(Duration::from_secs(60)), vec![1, 3]);
        assert!(l.since_append(1).is_some());
        assert!(l.since_append(3).is_none());
        assert!(l.since_heard(3).is_some());
        assert!(l.since_heard(4).is_none());
        std::thread::sleep(Duration::from_millis(5));
        assert!(l.reachable(Duration::from_millis(1)).is_empty());
    }

    /// The group's clock is tokio's: a paused runtime (as a simulation runs
    /// it) ages what was heard only as far as it advances its time.
    #[tokio::test(start_paused = true)]
    async fn a_paused_clock_ages_what_was_heard_by_its_own_time() {
        let l = Liveness::default();
        l.heard(3);
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(l.reachable(Duration::from_secs(60)), vec![3]);
        assert_eq!(l.since_heard(3), Some(Duration::from_secs(30)));
        tokio::time::advance(Duration::from_secs(31)).await;
        assert!(l.reachable(Duration::from_secs(60)).is_empty());
    }
}
