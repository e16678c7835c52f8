//! Bytes appended per second over the last minute: how fast the log fills,
//! hence how long a node may stay down and still catch up by IST.

use tokio::time::Instant;

const BUCKETS: usize = 60;

#[derive(Debug)]
pub struct AppendRate {
    origin: Instant,
    /// (second since origin, bytes appended in it), one per second.
    buckets: [(u64, u64); BUCKETS],
}

impl Default for AppendRate {
    fn default() -> Self {
        AppendRate { origin: Instant::now(), buckets: [(u64::MAX, 0); BUCKETS] }
    }
}

impl AppendRate {
    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    pub fn add(&mut self, now: Instant, bytes: u64) {
        let s = self.second(now);
        let slot = &mut self.buckets[(s % BUCKETS as u64) as usize];
        if slot.0 != s {
            *slot = (s, 0);
        }
        slot.1 += bytes;
    }

    /// Average over the last minute (or since the start, if shorter).
    pub fn per_second(&self, now: Instant) -> u64 {
        let s = self.second(now);
        let window = (s + 1).min(BUCKETS as u64);
        let total: u64 = self
            .buckets
            .iter()
            .filter(|(at, _)| *at != u64::MAX && *at + BUCKETS as u64 > s && *at <= s)
            .map(|(_, b)| b)
            .sum();
        total / window
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn averages_over_the_last_minute_and_forgets_older_seconds() {
        let mut r = AppendRate::default();
        let t0 = r.origin;
        for s in 0..10 {
            r.add(t0 + Duration::from_secs(s), 1000);
        }
        assert_eq!(r.per_second(t0 + Duration::from_secs(9)), 1000);
        assert_eq!(r.per_second(t0 + Duration::from_secs(59)), 10_000 / 60);
        assert_eq!(r.per_second(t0 + Duration::from_secs(200)), 0, "a minute of silence");
    }
}
