//! The round trip of appends to each follower, as the leader's pipelined
//! links measure them ([`crate::transport::pipeline`]): from a request
//! written to its answer read.
//!
//! The send window ([`crate::send_window`]) needs it: a follower one round
//! trip away cannot have acknowledged what the leader appended within the
//! last round trip, however fast it receives, so those entries must not
//! count against it. Across a WAN they are most of what is unacknowledged
//! (at 50 ms and 1,300 commits/s, 65 entries), and a window that counted
//! them would cap the group at one window per round trip.
//!
//! An answer also waits behind the follower's disk and behind the requests
//! before it on the link, so one sample says little; the smallest of the
//! last [`SPAN`] or two is the link's own round trip. A follower that
//! stalls answers late, but it also answers promptly in between, so its
//! estimate stays near the link's and its lag still counts.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::sync::lock;
use crate::MemberId;

/// How long one span of samples lasts; an estimate covers the last one or two.
pub const SPAN: Duration = Duration::from_secs(10);

/// Per follower, the smallest recent round trip.
#[derive(Default)]
pub struct RoundTrips {
    per: Mutex<BTreeMap<MemberId, MinWindow>>,
}

impl RoundTrips {
    /// An answer from `member` came `took` after its request was written.
    pub fn record(&self, member: MemberId, took: Duration) {
        lock(&self.per).entry(member).or_default().record(took, Instant::now());
    }

    /// The link's round trip to `member`; None when no answer came lately.
    pub fn of(&self, member: MemberId) -> Option<Duration> {
        lock(&self.per).get(&member).and_then(|w| w.estimate(Instant::now()))
    }
}

/// The smallest sample of the current span and of the one before it.
#[derive(Clone, Copy, Debug, Default)]
pub struct MinWindow {
    /// When the current span began, and its smallest sample.
    current: Option<(Instant, Duration)>,
    /// The smallest sample of the span before, if it ended when this one began.
    previous: Option<Duration>,
}

impl MinWindow {
    pub fn record(&mut self, took: Duration, now: Instant) {
        match self.current {
            Some((start, least)) if now < start + SPAN => self.current = Some((start, least.min(took))),
            Some((start, least)) => {
                self.previous = (now < start + 2 * SPAN).then_some(least);
                self.current = Some((now, took));
            }
            None => self.current = Some((now, took)),
        }
    }

    /// None once no sample came for two spans: the link may have changed.
    pub fn estimate(&self, now: Instant) -> Option<Duration> {
        let (start, least) = self.current?;
        if now >= start + 2 * SPAN {
            return None;
        }
        Some(self.previous.map_or(least, |p| p.min(least)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_estimate_is_the_least_of_the_last_span_or_two() {
        let t0 = Instant::now();
        let mut w = MinWindow::default();
        assert_eq!(w.estimate(t0), None, "no sample yet");
        w.record(ms(52), t0);
        w.record(ms(50), t0 + ms(100));
        w.record(ms(90), t0 + ms(200));
        assert_eq!(w.estimate(t0 + ms(300)), Some(ms(50)), "a late answer does not raise it");
        // A new span: the old least still counts, until a second span passes.
        w.record(ms(60), t0 + SPAN + ms(1));
        assert_eq!(w.estimate(t0 + SPAN + ms(2)), Some(ms(50)));
        w.record(ms(61), t0 + 2 * SPAN + ms(2));
        assert_eq!(w.estimate(t0 + 2 * SPAN + ms(3)), Some(ms(60)), "50 is two spans old");
        assert_eq!(w.estimate(t0 + 4 * SPAN + ms(3)), None, "no answer for two spans");
    }

    #[test]
    fn a_span_after_a_silence_forgets_the_one_before() {
        let t0 = Instant::now();
        let mut w = MinWindow::default();
        w.record(ms(1), t0);
        w.record(ms(40), t0 + 3 * SPAN);
        assert_eq!(w.estimate(t0 + 3 * SPAN), Some(ms(40)), "the link may be another one now");
    }

    #[test]
    fn members_are_measured_apart() {
        let trips = RoundTrips::default();
        trips.record(1, ms(50));
        trips.record(2, ms(1));
        trips.record(1, ms(70));
        assert_eq!(trips.of(1), Some(ms(50)));
        assert_eq!(trips.of(2), Some(ms(1)));
        assert_eq!(trips.of(3), None);
    }
}
