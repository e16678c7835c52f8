//! How a node leaves the group: the clean stop (`disconnect`), and the
//! leave of a node whose data is no longer the group's (voted inconsistent,
//! or an apply that failed with no error to vote on).
//!
//! The final view follows through `recv()`: a synced node's appliers first
//! apply what the group ordered before it left (see `disconnect`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::node::Node;
use crate::types::{Gtid, Seqno, Uuid};

/// How long a clean stop waits for the group to let this member go.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);

/// After how long a step of the clean stop is reported as stalled, and
/// then how often again.
const STALL_REPORT: Duration = Duration::from_secs(5);

/// Runs `step` of the clean stop and, while it takes longer than
/// `STALL_REPORT`, says so in the log every `STALL_REPORT`: a stop that
/// does not end must say where it waits (a clean stop under load once
/// hung before the leave began, and its log said nothing). A note, not a
/// warning: a slow step is not by itself an error (MTR's
/// galera_shutdown_nonprim fails on a warning).
fn stalls_reported<R>(what: &str, step: impl FnOnce() -> R) -> R {
    watched(STALL_REPORT, step, |secs| log::info!("Clean stop: {what} has taken {secs} s so far"))
}

/// Runs `step`, calling `report` with the seconds taken so far each
/// `every` it goes on. The watcher thread ends with the step; where no
/// thread can be started, the step runs unwatched (a stop goes on
/// without its reports rather than fail).
fn watched<R>(every: Duration, step: impl FnOnce() -> R, report: impl Fn(u64) + Sync) -> R {
    let done = (Mutex::new(false), Condvar::new());
    std::thread::scope(|scope| {
        let watcher = std::thread::Builder::new().name("tandem-stop-watch".into()).spawn_scoped(scope, || {
            let started = Instant::now();
            let mut finished = done.0.lock();
            while !*finished {
                if done.1.wait_for(&mut finished, every).timed_out() && !*finished {
                    report(started.elapsed().as_secs());
                }
            }
        });
        if let Err(e) = watcher {
            log::info!("Clean stop: not watched for stalls (no thread: {e})");
        }
        let result = step();
        *done.0.lock() = true;
        done.1.notify_all();
        result
    })
}

impl Node {
    /// Leaves the group; the final view follows through `recv()`.
    pub fn disconnect(&self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.core.lock().close();
        self.inner.transfer.wake();
        self.inner.waiters.wake_all();
        self.inner.flow.wake_all();
        stalls_reported("stopping the ticker", || self.stop_ticker());
        stalls_reported("leaving the group", || self.leave_group());
        self.inner.votes_changed.notify_all();
        let undecided = self.inner.core.lock().undecided_failure();
        let voted_out = self.is_inconsistent();
        if let (Some(seqno), true) = (undecided, voted_out) {
            // Already leaving as inconsistent (said so at error level): a
            // later failure's open vote changes nothing.
            log::info!("Leaving with the vote on seqno {seqno} undecided; this node is inconsistent already");
        } else if let Some(seqno) = undecided {
            log::error!(
                "Leaving while the vote on seqno {seqno} this node failed is not decided: assuming inconsistency; \
                 a full state transfer replaces this node's data at its next start"
            );
            self.inner.inconsistency.mark(seqno);
        }
        self.save_state();
        // A synced node's final view goes behind what the group ordered
        // before it left: its appliers apply that (flow control keeps it
        // short), so the local clients ordered among it commit. (With the
        // final view first they waited for seqnos nobody would apply, for
        // good, and the clean stop of a loaded node never ended.) A node
        // catching up or donating (a backlog flow control does not bound)
        // stops at once: a client ordered behind it is rolled back, and
        // the next start applies the rest by IST.
        let drain = self.inner.core.lock().state() == crate::core::LocalState::Synced
            && !crate::injected::active(crate::injected::Defect::EndsBeforeItsBacklog);
        if self.inner.queue.push_final(drain) {
            log::info!("Applying what the group ordered before this node left, then the final view");
        }
    }

    /// Leaves the group and stops this member of it. The handle is taken
    /// out first: the group's threads read `group` while it leaves (a guard
    /// in the `if let` would live through the leave, and the runtime would
    /// wait on it: the clean stop of a leader under load deadlocked so).
    fn leave_group(&self) {
        if crate::injected::active(crate::injected::Defect::HoldsGroupAcrossLeave) {
            self.leave_holding_group();
        }
        let group = self.inner.group.lock().take();
        if let Some(group) = group {
            if let Err(e) = group.leave(LEAVE_TIMEOUT) {
                // Several members stopping at once race to leave; the last voter
                // cannot be removed. Nothing an operator must act on.
                log::info!("Leaving the group: {e}");
            }
            group.shutdown();
        }
    }

    /// The defect `HoldsGroupAcrossLeave` (negative tests only): the leave
    /// as it deadlocked, the guard living through it.
    #[allow(clippy::significant_drop_in_scrutinee)]
    fn leave_holding_group(&self) {
        if let Some(group) = self.inner.group.lock().as_ref() {
            let _ = group.leave(LEAVE_TIMEOUT);
        }
    }

    /// Joins the ticker; it sees `closing` within one tick. Never from the
    /// ticker itself (it only runs commands, which never stop the node).
    pub(crate) fn stop_ticker(&self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.outbox.wake();
        self.inner.ticker.join();
    }

    /// This node's outcome on `seqno` lost the vote: it leaves the cluster,
    /// as Galera's does, and grastate.dat says its data must be replaced.
    /// The server stays up, disconnected, until restarted. The leave runs on
    /// its own thread: this may be the group's delivery thread, which a
    /// leave waits on.
    pub(crate) fn leave_inconsistent(&self, seqno: Seqno, mine: crate::voting::Code, winner: crate::voting::Code) {
        let gtid = Gtid { uuid: self.inner.core.lock().group_uuid(), seqno };
        if mine == crate::voting::SUCCESS {
            log::error!("Vote 0 (success) on {gtid} is inconsistent with group. Leaving cluster.");
        } else {
            log::error!(
                "Inconsistency detected: Inconsistent by consensus on {gtid} (this node voted {mine:016x}, the \
                 group {winner:016x}). Leaving cluster; a full state transfer replaces this node's data at its \
                 next start."
            );
        }
        self.leave_as_inconsistent(seqno);
    }

    /// The server failed to apply `seqno` and gave no error the group could
    /// vote on: this node's data is no longer the group's. It leaves as one
    /// voted out does (Galera: "Node consistency compromised, leaving
    /// cluster"), rather than stay a member that applies nothing.
    pub(crate) fn leave_after_failed_apply(&self, seqno: Seqno, source: Uuid) {
        let gtid = Gtid { uuid: self.inner.core.lock().group_uuid(), seqno };
        log::error!(
            "Failed to apply write-set {gtid} from {source}: node consistency compromised, leaving cluster; a full \
             state transfer replaces this node's data at its next start."
        );
        self.leave_as_inconsistent(seqno);
    }

    fn leave_as_inconsistent(&self, seqno: Seqno) {
        if !self.inner.inconsistency.mark(seqno) {
            return; // already leaving
        }
        self.inner.votes_changed.notify_all();
        let node = self.clone();
        self.inner.inconsistency.leave(move || node.disconnect());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn a_step_that_goes_on_is_reported_until_it_ends_and_a_quick_one_never() {
        let reports = AtomicUsize::new(0);
        let report = |_secs| {
            reports.fetch_add(1, Ordering::SeqCst);
        };
        assert_eq!(watched(Duration::from_secs(60), || 7, report), 7);
        assert_eq!(reports.load(Ordering::SeqCst), 0, "a step shorter than the period is not reported");
        // A step that lasts until it was reported (10 s at most: a
        // watcher that never reports fails the test, not hangs it).
        let slow = || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while reports.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        watched(Duration::from_millis(20), slow, report);
        // (Nothing reports after the step: the watcher is a scoped thread,
        // joined before `watched` returns, so there is nothing to check.)
        assert!(reports.load(Ordering::SeqCst) >= 1, "a step longer than the period was not reported");
    }
}
