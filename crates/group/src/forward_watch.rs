//! Whether a follower's forwarding link still carries its payloads.
//!
//! The leader answers only what it does not take (`forward`), so a link
//! whose connection went dead while both members live (a middlebox forgot
//! it, or the path black-holes that one connection while others work)
//! swallows what is written to it and says nothing. The writes succeed
//! until the socket's buffer is full, which at a few hundred bytes a
//! payload takes minutes of a node's writes; every one of them is lost, and
//! each client waits for its own timeout. The simulation found it: after
//! links that broke at random, a follower's writer ran on for 50 s of
//! simulated time with nothing ordered (`flaky_links_under_load`).
//!
//! Every member applies every ordered payload, its own included, so a
//! follower sees its payloads come back. While some written to the link are
//! not back, and none came back for `patience` (twice the request timeout),
//! the link is taken for stalled: `forward::send` closes it, which loses
//! nothing a live leader still reads (it hands back, or reads to the end and
//! closes), gives up what a dead connection holds, and opens a new one for
//! what follows. The check runs when the next payload is to be written: a
//! payload written last to a connection that died is lost like any payload
//! in flight on a broken connection, and its client's retry finds the link
//! stalled.
//!
//! The count of own payloads applied includes some this link never carried
//! (the tail of an earlier link, or payloads of the member's own time as
//! leader). They can only make the link look healthier than it is, never
//! stalled when it is not. A link taken for stalled by mistake (a leader
//! that orders none of it for `patience`, and then does not close it within
//! the request timeout) is given up like any link whose leader does not
//! close in time: what that leader appends of it later may come after what
//! the next link carries. The patience is long for that reason.

use std::time::Duration;

use tokio::time::Instant;

/// One link's payloads, against the member's own payloads applied.
#[derive(Clone, Copy, Debug)]
pub struct Watch {
    /// Payloads written to the link.
    written: u64,
    /// The member's own payloads applied when the link opened.
    applied_at_open: u64,
    /// The count last seen, and since when: the last sign of progress.
    applied_seen: u64,
    progress_at: Instant,
}

impl Watch {
    /// A link opened at `now`, with `applied` own payloads applied so far.
    pub fn new(now: Instant, applied: u64) -> Watch {
        Watch { written: 0, applied_at_open: applied, applied_seen: applied, progress_at: now }
    }

    /// Written to the link but not (or not yet) seen applied.
    pub fn unconfirmed(&self, applied: u64) -> u64 {
        self.written.saturating_sub(applied.saturating_sub(self.applied_at_open))
    }

    /// `count` payloads written at `now`. A write to a link with nothing
    /// unconfirmed starts the wait for them now, not at the last progress.
    pub fn wrote(&mut self, count: u64, now: Instant, applied: u64) {
        self.seen(now, applied);
        if self.unconfirmed(applied) == 0 {
            self.progress_at = now;
        }
        self.written += count;
    }

    /// Whether, at `now`, payloads written wait unconfirmed and none was
    /// applied for `patience`.
    pub fn stalled(&mut self, now: Instant, applied: u64, patience: Duration) -> Option<Stall> {
        self.seen(now, applied);
        let waiting = self.unconfirmed(applied);
        let quiet = now.saturating_duration_since(self.progress_at);
        (waiting > 0 && quiet >= patience).then_some(Stall { waiting, quiet })
    }

    fn seen(&mut self, now: Instant, applied: u64) {
        if applied != self.applied_seen {
            self.applied_seen = applied;
            self.progress_at = now;
        }
    }
}

/// A stalled link: how many payloads wait, and for how long none came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    pub waiting: u64,
    pub quiet: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENCE: Duration = Duration::from_secs(2);

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    /// The stall the simulation found: payloads go in, none comes back.
    #[test]
    fn a_link_that_swallows_payloads_is_stalled_after_the_patience() {
        let t0 = Instant::now();
        let mut w = Watch::new(t0, 40);
        for ms in 0..3_000 {
            w.wrote(1, at(t0, ms), 40);
            if ms < 2_000 {
                assert_eq!(w.stalled(at(t0, ms), 40, PATIENCE), None, "at {ms} ms");
            }
        }
        let stall = w.stalled(at(t0, 3_000), 40, PATIENCE).expect("stalled");
        assert_eq!(stall, Stall { waiting: 3_000, quiet: Duration::from_secs(3) });
    }

    /// A slow leader that still orders now and then is never stalled,
    /// however far behind it is.
    #[test]
    fn a_link_whose_payloads_come_back_slowly_is_not_stalled() {
        let t0 = Instant::now();
        let mut w = Watch::new(t0, 0);
        let mut applied = 0;
        for ms in 0..20_000u64 {
            w.wrote(10, at(t0, ms), applied);
            if ms % 1_500 == 0 {
                applied += 1;
            }
            assert_eq!(w.stalled(at(t0, ms), applied, PATIENCE), None, "at {ms} ms");
        }
        assert!(w.unconfirmed(applied) > 190_000, "far behind, yet not stalled");
    }

    /// An idle link (everything came back) is never stalled, and the wait
    /// for a new write starts at that write, not at the last progress.
    #[test]
    fn the_wait_starts_at_the_first_unconfirmed_write() {
        let t0 = Instant::now();
        let mut w = Watch::new(t0, 0);
        w.wrote(5, t0, 0);
        assert_eq!(w.stalled(at(t0, 100), 5, PATIENCE), None, "all five back");
        assert_eq!(w.stalled(at(t0, 60_000), 5, PATIENCE), None, "idle for a minute");
        w.wrote(1, at(t0, 60_000), 5);
        assert_eq!(w.stalled(at(t0, 61_999), 5, PATIENCE), None);
        assert_eq!(
            w.stalled(at(t0, 62_000), 5, PATIENCE),
            Some(Stall { waiting: 1, quiet: PATIENCE }),
            "two seconds after the write"
        );
    }

    /// Own payloads applied that this link never carried (an earlier
    /// link's tail) only make it look healthier.
    #[test]
    fn payloads_from_before_the_link_never_make_it_stalled() {
        let t0 = Instant::now();
        let mut w = Watch::new(t0, 100);
        w.wrote(3, t0, 100);
        assert_eq!(w.unconfirmed(102), 1);
        assert_eq!(w.unconfirmed(250), 0, "more came back than it carried");
        assert_eq!(w.stalled(at(t0, 10_000), 250, PATIENCE), None);
    }
}
