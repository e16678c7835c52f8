//! Ordering monitors: who may proceed, given which seqnos have finished.
//!
//! Galera keeps an *apply* monitor (a write-set may start once the one it
//! depends on has finished; its `last_left` is `last_committed`) and a
//! *commit* monitor (commits happen strictly in seqno order). Both are the
//! same mechanism with a different entry condition, so both are a [`Monitor`].
//!
//! Every seqno must eventually `leave` each monitor, or everything after it
//! stalls; leaving twice, or leaving a seqno below the start, is harmless so
//! that cleanup paths can be defensive.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::types::Seqno;

#[derive(Debug)]
struct State {
    /// Every seqno up to here has left.
    last_left: Seqno,
    /// Seqnos above `last_left + 1` that left early.
    early: BTreeSet<Seqno>,
    /// While set, nothing above it may enter (FTWRL / pause).
    paused_at: Option<Seqno>,
}

#[derive(Debug)]
pub struct Monitor {
    state: Mutex<State>,
    changed: Condvar,
}

/// Why a wait ended without entering.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Interrupted {
    /// The waiter's abort flag was raised (BF abort).
    Aborted,
    TimedOut,
}

impl Monitor {
    pub fn new(position: Seqno) -> Monitor {
        Monitor {
            state: Mutex::new(State { last_left: position, early: BTreeSet::new(), paused_at: None }),
            changed: Condvar::new(),
        }
    }

    pub fn last_left(&self) -> Seqno {
        self.state.lock().last_left
    }

    /// Restarts the monitor at `position` (a joiner after state transfer).
    pub fn reset(&self, position: Seqno) {
        let mut s = self.state.lock();
        s.last_left = position;
        s.early.retain(|&n| n > position);
        Self::advance(&mut s);
        self.changed.notify_all();
    }

    /// Waits until everything up to `upto` has left and `seqno` is not held back
    /// by a pause. `abort` is polled on every wake-up so a BF abort can pull a
    /// waiter out; `interrupt` wakes all waiters for that purpose.
    pub fn enter(
        &self,
        seqno: Seqno,
        upto: Seqno,
        abort: Option<&AtomicBool>,
        timeout: Option<Duration>,
    ) -> Result<(), Interrupted> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.state.lock();
        loop {
            if abort.is_some_and(|a| a.load(Ordering::Acquire)) {
                return Err(Interrupted::Aborted);
            }
            let paused = s.paused_at.is_some_and(|p| seqno > p);
            if s.last_left >= upto && !paused {
                return Ok(());
            }
            match deadline {
                Some(d) => {
                    if self.changed.wait_until(&mut s, d).timed_out() {
                        return Err(Interrupted::TimedOut);
                    }
                }
                None => self.changed.wait(&mut s),
            }
        }
    }

    /// Waits until `seqno` itself has left (used by sync_wait and pause).
    pub fn wait_left(&self, seqno: Seqno, timeout: Option<Duration>) -> Result<(), Interrupted> {
        self.enter(Seqno::MIN, seqno, None, timeout)
    }

    pub fn leave(&self, seqno: Seqno) {
        let mut s = self.state.lock();
        if seqno <= s.last_left {
            return;
        }
        s.early.insert(seqno);
        if Self::advance(&mut s) {
            self.changed.notify_all();
        }
    }

    /// Is `seqno` done (left, or below the start)?
    pub fn has_left(&self, seqno: Seqno) -> bool {
        let s = self.state.lock();
        seqno <= s.last_left || s.early.contains(&seqno)
    }

    /// Wakes every waiter so it re-checks its abort flag.
    pub fn interrupt(&self) {
        let _guard = self.state.lock();
        self.changed.notify_all();
    }

    /// Holds back every seqno above `at` until [`Monitor::resume`].
    pub fn pause(&self, at: Seqno) {
        self.state.lock().paused_at = Some(at);
    }

    pub fn resume(&self) {
        self.state.lock().paused_at = None;
        self.changed.notify_all();
    }

    fn advance(s: &mut State) -> bool {
        let before = s.last_left;
        while s.early.first() == Some(&(s.last_left + 1)) {
            s.early.pop_first();
            s.last_left += 1;
        }
        s.last_left != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn last_left_advances_only_over_contiguous_seqnos() {
        let m = Monitor::new(0);
        m.leave(2);
        m.leave(3);
        assert_eq!(m.last_left(), 0);
        assert!(m.has_left(3) && !m.has_left(1));
        m.leave(1);
        assert_eq!(m.last_left(), 3);
        m.leave(2); // twice is harmless
        assert_eq!(m.last_left(), 3);
    }

    #[test]
    fn commit_order_is_strict_under_concurrency() {
        let m = Arc::new(Monitor::new(0));
        let order = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (1..=20i64)
            .rev()
            .map(|seqno| {
                let (m, order) = (m.clone(), order.clone());
                thread::spawn(move || {
                    m.enter(seqno, seqno - 1, None, None).unwrap();
                    order.lock().push(seqno);
                    m.leave(seqno);
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*order.lock(), (1..=20).collect::<Vec<_>>());
    }

    #[test]
    fn abort_flag_pulls_a_waiter_out() {
        let m = Arc::new(Monitor::new(0));
        let flag = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (m, flag) = (m.clone(), flag.clone());
            thread::spawn(move || m.enter(5, 4, Some(&flag), None))
        };
        flag.store(true, Ordering::Release);
        m.interrupt();
        assert_eq!(waiter.join().unwrap(), Err(Interrupted::Aborted));
    }

    #[test]
    fn pause_holds_later_seqnos_until_resume() {
        let m = Monitor::new(10);
        m.pause(10);
        assert_eq!(m.enter(11, 10, None, Some(Duration::from_millis(20))), Err(Interrupted::TimedOut));
        assert_eq!(m.enter(10, 9, None, Some(Duration::from_millis(20))), Ok(()));
        m.resume();
        assert_eq!(m.enter(11, 10, None, Some(Duration::from_millis(20))), Ok(()));
    }

    #[test]
    fn reset_moves_the_start_and_keeps_later_early_leavers() {
        let m = Monitor::new(-1);
        m.leave(7);
        m.leave(3);
        m.reset(5);
        assert_eq!(m.last_left(), 5);
        m.leave(6);
        assert_eq!(m.last_left(), 7);
    }
}
