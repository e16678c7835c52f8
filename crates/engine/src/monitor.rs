//! Ordering monitors: who may proceed, given which seqnos have finished.
//!
//! Galera keeps an *apply* monitor (a write-set may start once the one it
//! depends on has finished; its `last_left` is `last_committed`) and a
//! *commit* monitor (commits happen strictly in seqno order). Both are the
//! same mechanism with a different entry condition, so both are a [`Monitor`].
//!
//! Every seqno must eventually `leave` each monitor, or everything after it
//! stalls; leaving twice, or leaving a seqno below the start, is harmless so
//! that cleanup paths can be defensive. The one exception is the end of the
//! applier queue: once nothing more will be applied, [`Monitor::close`] sends
//! every waiter whose turn has not come away with [`Interrupted::Closed`]
//! (a shutdown must not wait for a seqno that will never leave).
//!
//! Each waiter sleeps on its own thread's condition variable and a `leave`
//! wakes only the waiters whose turn has come. With one shared condition
//! variable every commit woke every waiting committer (64 client threads:
//! 64 wake-ups and context switches per commit, on 2 cores).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::types::Seqno;

/// How often a wait in [`Monitor::enter_unless_stalled`] looks for a stall.
const STALL_POLL: Duration = Duration::from_millis(500);

#[derive(Debug)]
struct State {
    /// Every seqno up to here has left.
    last_left: Seqno,
    /// Seqnos above `last_left + 1` that left early.
    early: BTreeSet<Seqno>,
    /// While set, nothing above it may enter (FTWRL / pause).
    paused_at: Option<Seqno>,
    /// Nothing more will leave: a wait that is not over already ends.
    closed: bool,
    /// Sleeping waiters by (the seqno they wait for, waiter id).
    waiters: BTreeMap<(Seqno, u64), Arc<Condvar>>,
    next_waiter: u64,
}

impl State {
    /// Wakes the waiters whose `upto` has left (they re-check everything).
    fn wake_ready(&self) {
        for cv in self.waiters.range(..=(self.last_left, u64::MAX)).map(|(_, cv)| cv) {
            cv.notify_one();
        }
    }

    fn wake_all(&self) {
        self.waiters.values().for_each(|cv| {
            cv.notify_one();
        });
    }
}

thread_local! {
    /// A thread waits on one monitor at a time, so one condition variable per
    /// thread serves all monitors.
    static WAKER: Arc<Condvar> = Arc::new(Condvar::new());
}

#[derive(Debug)]
pub struct Monitor {
    state: Mutex<State>,
}

/// Why a wait ended without entering.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Interrupted {
    /// The waiter's abort flag was raised (BF abort).
    Aborted,
    TimedOut,
    /// The monitor was closed before the turn came: it never will.
    Closed,
}

impl Monitor {
    pub fn new(position: Seqno) -> Monitor {
        Monitor {
            state: Mutex::new(State {
                last_left: position,
                early: BTreeSet::new(),
                paused_at: None,
                closed: false,
                waiters: BTreeMap::new(),
                next_waiter: 0,
            }),
        }
    }

    pub fn last_left(&self) -> Seqno {
        self.state.lock().last_left
    }

    /// Restarts the monitor at `position` (a joiner after state transfer).
    pub fn reset(&self, position: Seqno) {
        let mut s = self.state.lock();
        s.closed = false;
        s.last_left = position;
        s.early.retain(|&n| n > position);
        Self::advance(&mut s);
        s.wake_all();
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
        let mut waiting: Option<(u64, Arc<Condvar>)> = None;
        let outcome = loop {
            if abort.is_some_and(|a| a.load(Ordering::Acquire)) {
                break Err(Interrupted::Aborted);
            }
            let paused = s.paused_at.is_some_and(|p| seqno > p);
            if s.last_left >= upto && !paused {
                break Ok(());
            }
            if s.closed {
                break Err(Interrupted::Closed);
            }
            let (_, cv) = waiting.get_or_insert_with(|| {
                let (id, cv) = (s.next_waiter, WAKER.with(Arc::clone));
                s.next_waiter += 1;
                s.waiters.insert((upto, id), cv.clone());
                (id, cv)
            });
            match deadline {
                Some(d) => {
                    if cv.wait_until(&mut s, d).timed_out() {
                        break Err(Interrupted::TimedOut);
                    }
                }
                None => cv.wait(&mut s),
            }
        };
        if let Some((id, _)) = waiting {
            s.waiters.remove(&(upto, id));
        }
        outcome
    }

    /// [`Monitor::enter`] without a deadline but for one case: while
    /// `closing` is raised, a wait during which nothing has left for
    /// `stall` ends with [`Interrupted::Closed`]. A leaving node applies
    /// what was ordered before it left (the final view comes behind it), so
    /// the turn normally comes; this bounds a shutdown when it cannot (a
    /// seqno whose owner is gone), rather than hanging the server for good.
    pub fn enter_unless_stalled(
        &self,
        seqno: Seqno,
        upto: Seqno,
        abort: Option<&AtomicBool>,
        closing: &AtomicBool,
        stall: Duration,
    ) -> Result<(), Interrupted> {
        let mut progress = (self.last_left(), Instant::now());
        loop {
            match self.enter(seqno, upto, abort, Some(STALL_POLL.min(stall))) {
                Err(Interrupted::TimedOut) => {}
                done => return done,
            }
            let left = self.last_left();
            if left != progress.0 {
                progress = (left, Instant::now());
            } else if closing.load(Ordering::Acquire) && progress.1.elapsed() >= stall {
                return Err(Interrupted::Closed);
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
            s.wake_ready();
        }
    }

    /// Is `seqno` done (left, or below the start)?
    pub fn has_left(&self, seqno: Seqno) -> bool {
        let s = self.state.lock();
        seqno <= s.last_left || s.early.contains(&seqno)
    }

    /// Wakes every waiter so it re-checks its abort flag.
    pub fn interrupt(&self) {
        self.state.lock().wake_all();
    }

    /// Nothing more will leave (the applier queue is closed): every wait
    /// whose turn has not come ends with [`Interrupted::Closed`], now and
    /// from now on, until [`Monitor::reopen`] or [`Monitor::reset`].
    pub fn close(&self) {
        let mut s = self.state.lock();
        s.closed = true;
        s.wake_all();
    }

    /// Waits again (the next `connect`), from where the monitor stands.
    pub fn reopen(&self) {
        self.state.lock().closed = false;
    }

    /// Holds back every seqno above `at` until [`Monitor::resume`].
    pub fn pause(&self, at: Seqno) {
        self.state.lock().paused_at = Some(at);
    }

    pub fn resume(&self) {
        let mut s = self.state.lock();
        s.paused_at = None;
        s.wake_ready();
    }

    #[cfg(test)]
    fn sleeping(&self) -> usize {
        self.state.lock().waiters.len()
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

    /// Threads for seqnos `count` down to 1, each entering in commit order
    /// and recording its seqno.
    fn committers(m: &Arc<Monitor>, order: &Arc<Mutex<Vec<i64>>>, count: i64) -> Vec<thread::JoinHandle<()>> {
        (1..=count)
            .rev()
            .map(|seqno| {
                let (m, order) = (m.clone(), order.clone());
                thread::spawn(move || {
                    m.enter(seqno, seqno - 1, None, None).unwrap();
                    order.lock().push(seqno);
                    m.leave(seqno);
                })
            })
            .collect()
    }

    #[test]
    fn commit_order_is_strict_under_concurrency() {
        let m = Arc::new(Monitor::new(0));
        let order = Arc::new(Mutex::new(Vec::new()));
        committers(&m, &order, 20).into_iter().for_each(|t| t.join().unwrap());
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

    /// A closed monitor sends away the waiters whose turn has not come, and
    /// every later one, while a turn that has come is still taken.
    #[test]
    fn close_ends_the_waits_that_would_never_end() {
        let m = Arc::new(Monitor::new(3));
        let waiter = {
            let m = m.clone();
            thread::spawn(move || m.enter(6, 5, None, None))
        };
        while m.sleeping() == 0 {
            thread::yield_now();
        }
        m.close();
        assert_eq!(waiter.join().unwrap(), Err(Interrupted::Closed));
        assert_eq!(m.enter(7, 6, None, None), Err(Interrupted::Closed), "a later wait does not start");
        assert_eq!(m.enter(4, 3, None, None), Ok(()), "a turn that has come is taken");
        assert_eq!(m.wait_left(3, None), Ok(()));
        m.reopen();
        assert_eq!(m.enter(6, 5, None, Some(Duration::from_millis(20))), Err(Interrupted::TimedOut), "waits again");
        m.close();
        m.reset(5);
        assert_eq!(m.enter(6, 5, None, None), Ok(()), "reset reopens");
    }

    /// Progress keeps a closing wait going (seqnos leave for twice the
    /// stall bound, each well within it); only a stall while closing ends
    /// it, and an open one never does.
    #[test]
    fn a_wait_gives_up_only_on_a_stall_while_closing() {
        let m = Arc::new(Monitor::new(0));
        let open = AtomicBool::new(false);
        let short = Duration::from_millis(50);
        assert_eq!(m.enter_unless_stalled(1, 0, None, &open, short), Ok(()), "its turn has come");
        let waiter = {
            let m = m.clone();
            thread::spawn(move || m.enter_unless_stalled(5, 4, None, &AtomicBool::new(false), short))
        };
        thread::sleep(short * 10);
        assert!(!waiter.is_finished(), "not closing: waits on");
        (1..=4).for_each(|s| m.leave(s));
        assert_eq!(waiter.join().unwrap(), Ok(()));

        let stall = Duration::from_secs(1);
        let waiter = {
            let m = m.clone();
            thread::spawn(move || m.enter_unless_stalled(45, 44, None, &AtomicBool::new(true), stall))
        };
        for s in 5..=44 {
            thread::sleep(stall / 20);
            m.leave(s);
        }
        assert_eq!(waiter.join().unwrap(), Ok(()), "seqnos kept leaving");
        let closing = AtomicBool::new(true);
        assert_eq!(m.enter_unless_stalled(47, 46, None, &closing, short), Err(Interrupted::Closed), "45 never leaves");
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
    fn waiters_in_any_order_with_timeouts_and_aborts_all_finish_and_deregister() {
        let m = Arc::new(Monitor::new(0));
        let order = Arc::new(Mutex::new(Vec::new()));
        let flag = Arc::new(AtomicBool::new(false));
        // 1..=40 commit in order; 100 and 101 wait for something that never
        // leaves (one times out, one is aborted); pauses come and go.
        let committers = committers(&m, &order, 40);
        let timed_out = {
            let m = m.clone();
            thread::spawn(move || m.enter(100, 99, None, Some(Duration::from_millis(50))))
        };
        let aborted = {
            let (m, flag) = (m.clone(), flag.clone());
            thread::spawn(move || m.enter(101, 100, Some(&flag), None))
        };
        m.pause(20);
        thread::sleep(Duration::from_millis(20));
        m.resume();
        committers.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(timed_out.join().unwrap(), Err(Interrupted::TimedOut));
        flag.store(true, Ordering::Release);
        m.interrupt();
        assert_eq!(aborted.join().unwrap(), Err(Interrupted::Aborted));
        assert_eq!(*order.lock(), (1..=40).collect::<Vec<_>>());
        assert_eq!(m.last_left(), 40);
        assert_eq!(m.sleeping(), 0, "every waiter removed itself");
    }

    #[test]
    fn one_thread_waits_on_two_monitors_in_turn() {
        // The per-thread condition variable serves different monitors.
        let (a, b) = (Arc::new(Monitor::new(0)), Arc::new(Monitor::new(0)));
        let t = {
            let (a, b) = (a.clone(), b.clone());
            thread::spawn(move || {
                a.enter(2, 1, None, None).unwrap();
                b.enter(2, 1, None, None).unwrap();
            })
        };
        // Blocked on `a` until 1 leaves it, then on `b`: each wait is seen
        // (the waiter registered), not assumed after a sleep.
        until(|| a.sleeping() == 1);
        assert_eq!(b.sleeping(), 0);
        a.leave(1);
        until(|| b.sleeping() == 1);
        assert_eq!(a.sleeping(), 0, "it left a's queue");
        assert!(!t.is_finished(), "2 cannot enter b before 1 leaves it");
        b.leave(1);
        t.join().unwrap();
        assert_eq!(b.sleeping(), 0);
    }

    /// Spins until `cond` holds (a condition, not a time: a slow machine
    /// only makes it take longer).
    fn until(cond: impl Fn() -> bool) {
        while !cond() {
            thread::yield_now();
        }
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
