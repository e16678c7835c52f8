//! How the state transfer a joiner waits for ended: the server reports the
//! state it received (`sst_received`), or the donor reports that it could
//! not send it (ordered `TransferFailed`). The join task waits here.
//!
//! A leaf of the shell's lock order (node.rs): nothing else is taken while
//! its lock is held, so the waiter checks whether its donor is still a
//! member between two waits, not inside one.

use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::types::Gtid;

/// Ok: the state arrived at this position. Err: the code of the failure.
pub(crate) type Outcome = Result<Gtid, i32>;

#[derive(Default)]
pub(crate) struct TransferEnd {
    outcome: Mutex<Option<Outcome>>,
    reported: Condvar,
}

impl TransferEnd {
    /// The server's report, which replaces any other.
    pub(crate) fn report(&self, outcome: Outcome) {
        *self.outcome.lock() = Some(outcome);
        self.reported.notify_all();
    }

    /// The donor could not send the state: the end, unless the server has
    /// reported already.
    pub(crate) fn donor_failed(&self, code: i32) {
        self.outcome.lock().get_or_insert(Err(code));
        self.reported.notify_all();
    }

    /// Wakes the waiter to look at the node again (it is closing).
    pub(crate) fn wake(&self) {
        self.reported.notify_all();
    }

    /// Waits at most `at_most` for the end, and takes it.
    pub(crate) fn wait(&self, at_most: Duration) -> Option<Outcome> {
        let mut outcome = self.outcome.lock();
        if outcome.is_none() {
            self.reported.wait_for(&mut outcome, at_most);
        }
        outcome.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Uuid;
    use std::sync::Arc;

    #[test]
    fn the_servers_report_wins_and_a_donors_failure_does_not_replace_it() {
        let end = TransferEnd::default();
        let at = Gtid { uuid: Uuid([1; 16]), seqno: 9 };
        assert_eq!(end.wait(Duration::ZERO), None);
        end.report(Ok(at));
        end.donor_failed(-110);
        assert_eq!(end.wait(Duration::ZERO), Some(Ok(at)));
        assert_eq!(end.wait(Duration::ZERO), None, "taken");
        end.donor_failed(-110);
        end.report(Err(-5));
        assert_eq!(end.wait(Duration::ZERO), Some(Err(-5)));
    }

    #[test]
    fn a_waiter_wakes_on_a_report() {
        let end = Arc::new(TransferEnd::default());
        let waiter = {
            let end = end.clone();
            std::thread::spawn(move || end.wait(Duration::from_secs(600)))
        };
        // However the two threads meet, the waiter gets the report: it is
        // either there before the wait, or wakes the wait.
        end.donor_failed(-3);
        assert_eq!(waiter.join().unwrap(), Some(Err(-3)));
    }
}
