//! The whole of the null provider's ordering: a counter hands out seqnos,
//! commits leave in seqno order, and the committed position moves past a
//! seqno once everything up to it is released. That is the work any
//! provider has to do for the server on one node, and nothing more: no
//! certification index, no group, no log.
//!
//! It keeps the contract the server relies on (docs: the provider
//! contract, "Local (client) transaction" and "TOI"): seqnos are dense,
//! commit order is strictly by seqno, `last_committed` and causal waits
//! move only on `release`, a TOI runs alone, and `pause` holds commits.

use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A seqno, as the wsrep API counts (−1: none).
pub type Seqno = i64;

#[derive(Debug)]
struct State {
    /// The last seqno handed out.
    assigned: Seqno,
    /// The last seqno that left commit order.
    committed_in_order: Seqno,
    /// Released above `released_upto`, waiting for the gap below to close.
    released: BTreeSet<Seqno>,
    /// Everything up to here is released: `last_committed`.
    released_upto: Seqno,
    /// `pause`: commits wait until `resume`.
    paused: bool,
}

pub struct Order {
    state: Mutex<State>,
    moved: Condvar,
}

/// A wait that ran out of time.
#[derive(Debug, PartialEq, Eq)]
pub struct TimedOut;

impl Order {
    /// Everything up to `position` is committed already.
    pub fn new(position: Seqno) -> Order {
        let position = position.max(0);
        Order {
            state: Mutex::new(State {
                assigned: position,
                committed_in_order: position,
                released: BTreeSet::new(),
                released_upto: position,
                paused: false,
            }),
            moved: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next seqno, for a write-set, a TOI or a view.
    pub fn assign(&self) -> Seqno {
        let mut s = self.lock();
        s.assigned += 1;
        s.assigned
    }

    /// Waits until `seqno` is next to commit and commits are not paused.
    pub fn enter_commit(&self, seqno: Seqno) {
        let s = self.lock();
        let _s = self.wait(s, |s| s.paused || s.committed_in_order + 1 < seqno);
    }

    /// `seqno` left commit order: the next may enter.
    pub fn leave_commit(&self, seqno: Seqno) {
        let mut s = self.lock();
        s.committed_in_order = s.committed_in_order.max(seqno);
        drop(s);
        self.moved.notify_all();
    }

    /// `seqno` is done with: the committed position moves past every seqno
    /// released without a gap.
    pub fn release(&self, seqno: Seqno) {
        let mut s = self.lock();
        if seqno > s.released_upto {
            s.released.insert(seqno);
        }
        while s.released.first() == Some(&(s.released_upto + 1)) {
            s.released.pop_first();
            s.released_upto += 1;
        }
        drop(s);
        self.moved.notify_all();
    }

    /// A TOI at `seqno` runs alone: everything before it is released.
    pub fn enter_isolation(&self, seqno: Seqno) {
        self.enter_commit(seqno);
        let s = self.lock();
        let _s = self.wait(s, |s| s.released_upto + 1 < seqno);
    }

    /// The TOI at `seqno` ended: later commits go on.
    pub fn leave_isolation(&self, seqno: Seqno) {
        self.leave_commit(seqno);
        self.release(seqno);
    }

    /// `last_committed_id`.
    pub fn last_committed(&self) -> Seqno {
        self.lock().released_upto
    }

    /// A causal wait: for `upto`, or else everything handed out so far, to
    /// be committed, at most `timeout`; the committed position then.
    pub fn wait_causal(&self, upto: Option<Seqno>, timeout: Duration) -> Result<Seqno, TimedOut> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        let target = upto.unwrap_or(s.assigned);
        while s.released_upto < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TimedOut);
            }
            s = self.moved.wait_timeout(s, left).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
        }
        Ok(s.released_upto)
    }

    /// `pause`: commits wait from now on; returns once those that left
    /// commit order are released, with the committed position.
    pub fn pause(&self) -> Seqno {
        let mut s = self.lock();
        s.paused = true;
        let s = self.wait(s, |s| s.released_upto < s.committed_in_order);
        s.released_upto
    }

    pub fn resume(&self) {
        self.lock().paused = false;
        self.moved.notify_all();
    }

    fn wait<'a>(&self, s: MutexGuard<'a, State>, blocked: impl FnMut(&mut State) -> bool) -> MutexGuard<'a, State> {
        self.moved.wait_while(s, blocked).unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    /// Commits by many threads leave in seqno order whatever order the
    /// threads reach commit order in, and the committed position ends at
    /// the last seqno.
    #[test]
    fn commits_leave_in_seqno_order_and_the_position_follows_releases() {
        let order = Arc::new(Order::new(10));
        let left = Arc::new(Mutex::new(Vec::new()));
        let seqnos: Vec<Seqno> = (0..40).map(|_| order.assign()).collect();
        assert_eq!(seqnos.first(), Some(&11));
        let threads: Vec<_> = seqnos
            .iter()
            .rev()
            .map(|&seqno| {
                let (order, left) = (order.clone(), left.clone());
                thread::spawn(move || {
                    order.enter_commit(seqno);
                    left.lock().unwrap().push(seqno);
                    order.leave_commit(seqno);
                    order.release(seqno);
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*left.lock().unwrap(), seqnos, "left commit order by seqno");
        assert_eq!(order.last_committed(), 50);
    }

    #[test]
    fn the_position_waits_for_a_gap_to_close() {
        let order = Order::new(0);
        let (a, b) = (order.assign(), order.assign());
        order.release(b);
        assert_eq!(order.last_committed(), 0, "seqno 1 is not released yet");
        order.release(a);
        assert_eq!(order.last_committed(), 2);
    }

    #[test]
    fn a_causal_wait_covers_what_was_handed_out_before_it_and_times_out_otherwise() {
        let order = Arc::new(Order::new(0));
        let seqno = order.assign();
        assert_eq!(order.wait_causal(None, Duration::from_millis(20)), Err(TimedOut));
        let releaser = {
            let order = order.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                order.release(seqno);
            })
        };
        assert_eq!(order.wait_causal(None, Duration::from_secs(60)), Ok(1));
        releaser.join().unwrap();
    }

    /// A TOI starts only once everything before it is released, and holds
    /// the commits after it until it ends.
    #[test]
    fn a_toi_runs_alone() {
        let order = Arc::new(Order::new(0));
        let (before, toi, after) = (order.assign(), order.assign(), order.assign());
        order.enter_commit(before);
        order.leave_commit(before);
        let toi_thread = {
            let order = order.clone();
            thread::spawn(move || {
                order.enter_isolation(toi);
                order.last_committed()
            })
        };
        thread::sleep(Duration::from_millis(20));
        assert!(!toi_thread.is_finished(), "the TOI waits for the release of {before}");
        order.release(before);
        assert_eq!(toi_thread.join().unwrap(), before);
        let after_thread = {
            let order = order.clone();
            thread::spawn(move || order.enter_commit(after))
        };
        thread::sleep(Duration::from_millis(20));
        assert!(!after_thread.is_finished(), "held behind the TOI");
        order.leave_isolation(toi);
        after_thread.join().unwrap();
        assert_eq!(order.last_committed(), toi);
    }

    #[test]
    fn pause_holds_commits_until_resume() {
        let order = Arc::new(Order::new(5));
        let seqno = order.assign();
        assert_eq!(order.pause(), 5);
        let committer = {
            let order = order.clone();
            thread::spawn(move || order.enter_commit(seqno))
        };
        thread::sleep(Duration::from_millis(20));
        assert!(!committer.is_finished(), "paused");
        order.resume();
        committer.join().unwrap();
    }
}
