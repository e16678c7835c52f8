//! Running a group future on the caller's own thread.
//!
//! A call from one of mariadbd's threads into the group usually hands a task
//! to the group runtime and waits on a channel for its answer: one wake-up
//! of a group worker to start it, one of the caller to finish. A causal read
//! pays that on every read, about a tenth of a follower's read on the
//! 2-core development machine. Driving the future with `block_on` on the
//! caller's thread saves the first: the caller writes its request to the
//! socket itself and is woken once, by the answer.
//!
//! The cost is a rule: no `block_on` may outlive the runtime, as a timer
//! polled after the runtime stopped panics. The [`Gate`] counts the callers
//! inside; stopping the group first tells them to give up (`Closed`, as a
//! task dropped by the runtime would answer) and waits until none is left.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;
// Tokio's clock, as everywhere in the group: a simulation drives it.
use tokio::time::Instant;

use crate::sync::lock;
use crate::GroupError;

/// The count is an atomic, not a mutex's: a causal read passes the gate on
/// every read, and a condvar's notify is a syscall whether anyone waits or
/// not. Only once the group is closing does the last leaver take the mutex
/// and signal, so `close` still waits on an event rather than polling.
pub struct Gate {
    /// Callers inside `run`.
    inside: AtomicUsize,
    /// Set by `close` before it reads `inside`; a leaver reads it after it
    /// counted itself out (both SeqCst), so one of the two sees the other.
    closing: AtomicBool,
    /// Held by `close` while it waits; taken by the last leaver to signal.
    waiting: Mutex<()>,
    /// Signalled as the last caller inside leaves a closing gate.
    emptied: Condvar,
    /// Set once, when the group stops: tells the callers inside to give up.
    stopping: watch::Sender<bool>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            inside: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            waiting: Mutex::new(()),
            emptied: Condvar::new(),
            stopping: watch::Sender::new(false),
        }
    }
}

/// Counts a caller out of the gate, however it leaves.
struct Inside<'a>(&'a Gate);

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let gate = self.0;
        if gate.inside.fetch_sub(1, Ordering::SeqCst) == 1 && gate.closing.load(Ordering::SeqCst) {
            // Taking the mutex first: `close` holds it from its check of the
            // count until it sleeps, so this signal cannot fall in between.
            let _waiting = lock(&gate.waiting);
            gate.emptied.notify_all();
        }
    }
}

impl Gate {
    /// Runs `fut` on this thread, for at most `timeout`. `closed` is the
    /// group's flag, set before [`Gate::close`]: a caller that comes in after
    /// it is turned away, one already inside is told to give up. Not for a
    /// thread inside a runtime (`block_on` panics there): the caller checks.
    pub fn run<T>(
        &self,
        handle: &Handle,
        closed: &AtomicBool,
        timeout: Duration,
        fut: impl Future<Output = Result<T, GroupError>>,
    ) -> Result<T, GroupError> {
        // Counted before the flag is read: `close` sets the flag before it
        // counts, so either it waits for this caller or this caller sees it.
        self.inside.fetch_add(1, Ordering::SeqCst);
        let _inside = Inside(self);
        if closed.load(Ordering::SeqCst) {
            return Err(GroupError::Closed);
        }
        let mut stopping = self.stopping.subscribe();
        handle.block_on(async move {
            tokio::select! {
                biased;
                answer = tokio::time::timeout(timeout, fut) => answer
                    .unwrap_or_else(|_| Err(GroupError::Other(format!("timed out after {timeout:?}")))),
                _ = stopping.wait_for(|stopping| *stopping) => Err(GroupError::Closed),
            }
        })
    }

    /// Callers inside now.
    pub fn inside(&self) -> usize {
        self.inside.load(Ordering::SeqCst)
    }

    /// Tells the callers inside to give up and waits until they have left,
    /// at most `bound`. Call with the runtime still running (they need it
    /// to see the news), after setting the group's `closed` flag.
    pub fn close(&self, bound: Duration) -> Closed {
        self.closing.store(true, Ordering::SeqCst);
        self.stopping.send_replace(true);
        let deadline = Instant::now() + bound;
        let mut waiting = lock(&self.waiting);
        loop {
            if self.inside.load(Ordering::SeqCst) == 0 {
                return Closed::Emptied;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let (still_waiting, wait) = match self.emptied.wait_timeout(waiting, left) {
                Ok(woken) => woken,
                Err(poisoned) => poisoned.into_inner(),
            };
            if wait.timed_out() {
                break;
            }
            waiting = still_waiting;
        }
        match self.inside() {
            0 => Closed::EmptiedUnsignalled,
            n => Closed::StillInside(n),
        }
    }
}

/// How [`Gate::close`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Closed {
    /// Every caller left, and `close` saw it when it happened.
    Emptied,
    /// Every caller left, but `close` saw it only when its bound ran out:
    /// the last leaver's signal was lost (a defect; nothing is left inside).
    EmptiedUnsignalled,
    /// So many callers were still inside when the bound ran out.
    StillInside(usize),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime")
    }

    #[test]
    fn a_caller_gets_its_answer_or_a_timeout() {
        let rt = runtime();
        let (gate, closed) = (Gate::default(), AtomicBool::new(false));
        let answer = gate.run(rt.handle(), &closed, Duration::from_secs(5), async { Ok(7) });
        assert_eq!(answer.expect("answered"), 7);
        let never = gate.run(rt.handle(), &closed, Duration::from_millis(20), std::future::pending::<Result<(), _>>());
        assert!(matches!(never, Err(GroupError::Other(ref e)) if e.contains("timed out")), "{never:?}");
        assert_eq!(gate.inside(), 0, "both callers left");
    }

    #[test]
    fn closing_turns_away_new_callers_and_sends_those_inside_home_before_the_runtime_stops() {
        let rt = runtime();
        let gate = Arc::new(Gate::default());
        let closed = Arc::new(AtomicBool::new(false));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let caller = {
            let (gate, closed, handle) = (gate.clone(), closed.clone(), rt.handle().clone());
            std::thread::spawn(move || {
                gate.run(&handle, &closed, Duration::from_secs(600), async move {
                    entered_tx.send(()).expect("test waits");
                    // A timer, as a read's own deadlines are: polled after the
                    // runtime stopped, it would panic.
                    tokio::time::sleep(Duration::from_secs(600)).await;
                    Ok(())
                })
            })
        };
        entered_rx.recv().expect("caller is inside");
        closed.store(true, Ordering::SeqCst);
        assert_eq!(gate.close(Duration::from_secs(10)), Closed::Emptied, "the caller inside left");
        assert!(matches!(caller.join().expect("no panic"), Err(GroupError::Closed)));
        let late = gate.run(rt.handle(), &closed, Duration::from_secs(5), async { Ok(()) });
        assert!(matches!(late, Err(GroupError::Closed)), "{late:?}");
        rt.shutdown_timeout(Duration::from_secs(1));
    }

    #[test]
    fn close_sees_the_last_of_many_callers_leave_without_a_lost_signal() {
        // Callers come and go as fast as they can while the gate closes: the
        // last leaver's signal must reach `close` whichever side of its check
        // of the count it falls on, or `close` would sleep out its bound.
        for _ in 0..20 {
            let rt = runtime();
            let gate = Arc::new(Gate::default());
            let closed = Arc::new(AtomicBool::new(false));
            let callers: Vec<_> = (0..4)
                .map(|_| {
                    let (gate, closed, handle) = (gate.clone(), closed.clone(), rt.handle().clone());
                    std::thread::spawn(move || -> Result<(), GroupError> {
                        loop {
                            gate.run(&handle, &closed, Duration::from_secs(600), async {
                                tokio::task::yield_now().await;
                                Ok(())
                            })?;
                        }
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(5));
            closed.store(true, Ordering::SeqCst);
            assert_eq!(gate.close(Duration::from_secs(60)), Closed::Emptied, "woken as the last caller left");
            for caller in callers {
                assert!(matches!(caller.join().expect("no panic"), Err(GroupError::Closed)));
            }
            assert_eq!(gate.inside(), 0);
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}
