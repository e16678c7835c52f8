//! The `last_seen` of local write-sets on their way through the group, and
//! the position this node may report as safe to purge the certification
//! index up to.
//!
//! The invariant: once `safe` has returned `s`, no write-set that enters
//! later has a `last_seen` below `s`. A progress report ordered before such
//! a write-set would otherwise purge the index past it, and the write-set
//! would fail certification against nothing. Both read the applied position
//! inside the same lock for that: reading it before taking the lock lets a
//! report slip in between (seen as a certification failure on a single node
//! under sysbench).

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::types::Seqno;

#[derive(Default)]
pub(crate) struct InFlight {
    /// By `last_seen`, how many write-sets are in flight with it.
    counts: Mutex<BTreeMap<Seqno, usize>>,
}

impl InFlight {
    /// A write-set enters: reads its `last_seen` from `position` (the
    /// applied position) under the lock. Returns `last_seen` and the lowest
    /// `last_seen` in flight, itself included.
    pub(crate) fn enter(&self, position: impl FnOnce() -> Seqno) -> (Seqno, Seqno) {
        let mut counts = self.counts.lock();
        let last_seen = position();
        *counts.entry(last_seen).or_default() += 1;
        (last_seen, *counts.keys().next().unwrap_or(&last_seen))
    }

    /// The write-set that entered with `last_seen` got its answer.
    pub(crate) fn leave(&self, last_seen: Seqno) {
        let mut counts = self.counts.lock();
        if let Some(n) = counts.get_mut(&last_seen) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&last_seen);
            }
        }
    }

    /// No write-set entering from now on will have seen less than this:
    /// the applied position (read from `position` under the lock), or the
    /// lowest `last_seen` in flight if that is lower.
    pub(crate) fn safe(&self, position: impl FnOnce() -> Seqno) -> Seqno {
        let counts = self.counts.lock();
        let committed = position();
        counts.keys().next().map_or(committed, |&s| s.min(committed))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn safe_is_the_lowest_last_seen_in_flight_or_the_position() {
        let f = InFlight::default();
        assert_eq!(f.safe(|| 10), 10);
        assert_eq!(f.enter(|| 7), (7, 7));
        assert_eq!(f.enter(|| 9), (9, 7));
        assert_eq!(f.enter(|| 7), (7, 7));
        assert_eq!(f.safe(|| 12), 7);
        f.leave(7);
        assert_eq!(f.safe(|| 12), 7, "one write-set with last_seen 7 is still in flight");
        f.leave(7);
        assert_eq!(f.safe(|| 12), 9);
        f.leave(9);
        f.leave(9); // an unknown leave changes nothing
        assert_eq!(f.safe(|| 12), 12);
    }

    /// The race the lock closes: a report that starts while a write-set is
    /// reading its position must wait for it, and then count it. Were the
    /// position read outside the lock, the report would see nothing in
    /// flight and return the newer position, 105, at once.
    #[test]
    fn a_report_cannot_pass_a_write_set_that_is_reading_its_position() {
        let f = Arc::new(InFlight::default());
        let reported = Arc::new(AtomicBool::new(false));
        let mut report = None;
        let (last_seen, _) = f.enter(|| {
            report = Some({
                let (f, reported) = (f.clone(), reported.clone());
                std::thread::spawn(move || {
                    let safe = f.safe(|| 105);
                    reported.store(true, Ordering::SeqCst);
                    safe
                })
            });
            // The applied position moves on to 105 while the report runs.
            std::thread::sleep(Duration::from_millis(100));
            assert!(!reported.load(Ordering::SeqCst), "the report did not wait for the write-set");
            100
        });
        let safe = report.expect("spawned").join().expect("report thread");
        assert!(safe <= last_seen, "reported {safe}, past the in-flight last_seen {last_seen}");
    }
}
