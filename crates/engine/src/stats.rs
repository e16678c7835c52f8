//! Counters behind the `wsrep_*` status variables.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum StatValue {
    Int(i64),
    Double(f64),
    Str(String),
}

#[derive(Default, Debug)]
pub struct Stats {
    pub replicated: AtomicU64,
    pub replicated_bytes: AtomicU64,
    pub repl_keys: AtomicU64,
    pub repl_keys_bytes: AtomicU64,
    pub repl_data_bytes: AtomicU64,
    pub received: AtomicU64,
    pub received_bytes: AtomicU64,
    pub local_commits: AtomicU64,
    pub local_cert_failures: AtomicU64,
    pub local_replays: AtomicU64,
    /// Local transactions an applier aborted (each counted once, at the
    /// abort the provider is asked for).
    pub local_bf_aborts: AtomicU64,
    pub causal_reads: AtomicU64,
    pub apply_waits: AtomicU64,
    /// Sum of (seqno - depends_on) over certified write-sets, and their count.
    pub deps_distance_sum: AtomicI64,
    pub deps_distance_n: AtomicI64,
    pub recv_queue_max: AtomicI64,
    /// Most write-set bytes the queue held since `FLUSH STATUS`.
    pub recv_queue_bytes_max: AtomicI64,
    /// Queue lengths seen by the appliers since `FLUSH STATUS`: sum, count, least.
    pub recv_queue_sum: AtomicI64,
    pub recv_queue_samples: AtomicI64,
    pub recv_queue_min: AtomicI64,
    /// Flow-control pauses this node asked for, and pauses ordered (its own included).
    pub flow_control_sent: AtomicU64,
    pub flow_control_recv: AtomicU64,
    pub desync_count: AtomicI64,
    /// Local commits, from the server's `certify` call (flow control and
    /// the group's round trip included) to the end of the commit.
    pub commit_latency: LatencyHistogram,
    /// Write-sets applied here, from their delivery to this node (queued
    /// for the appliers) to the end of their commit.
    pub apply_latency: LatencyHistogram,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn note_dependency(&self, distance: i64) {
        self.deps_distance_sum.fetch_add(distance, Relaxed);
        self.deps_distance_n.fetch_add(1, Relaxed);
    }

    /// The queue's level after every push and pop.
    pub fn note_queue_peak(&self, len: i64, bytes: i64) {
        self.recv_queue_max.fetch_max(len, Relaxed);
        self.recv_queue_bytes_max.fetch_max(bytes, Relaxed);
    }

    /// The queue's length as an applier takes work (the average and minimum).
    pub fn note_queue(&self, len: i64) {
        self.recv_queue_sum.fetch_add(len, Relaxed);
        // The first sample after a reset sets the minimum.
        if self.recv_queue_samples.fetch_add(1, Relaxed) == 0 {
            self.recv_queue_min.store(len, Relaxed);
        } else {
            self.recv_queue_min.fetch_min(len, Relaxed);
        }
    }

    /// (least, average) queue length since `FLUSH STATUS`.
    pub fn queue_min_avg(&self) -> (i64, f64) {
        let n = self.recv_queue_samples.load(Relaxed);
        if n == 0 {
            return (0, 0.0);
        }
        (self.recv_queue_min.load(Relaxed), self.recv_queue_sum.load(Relaxed) as f64 / n as f64)
    }

    /// `FLUSH STATUS`: Galera resets the averages and maxima, not the totals.
    pub fn reset(&self) {
        self.deps_distance_sum.store(0, Relaxed);
        self.deps_distance_n.store(0, Relaxed);
        self.recv_queue_max.store(0, Relaxed);
        self.recv_queue_bytes_max.store(0, Relaxed);
        self.recv_queue_sum.store(0, Relaxed);
        self.recv_queue_samples.store(0, Relaxed);
        self.recv_queue_min.store(0, Relaxed);
    }

    pub fn deps_distance(&self) -> f64 {
        let n = self.deps_distance_n.load(Relaxed);
        if n == 0 {
            0.0
        } else {
            self.deps_distance_sum.load(Relaxed) as f64 / n as f64
        }
    }
}

/// Upper bounds of the latency buckets, in seconds: from a loopback round
/// trip to a node stalled by flow control or a state transfer.
pub const LATENCY_BOUNDS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A distribution of durations that many threads add to without a lock.
/// Unlike the averages, `FLUSH STATUS` leaves it: a scraper computes rates
/// from its growth.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    /// One per bound, then one for what lies above the last.
    buckets: [AtomicU64; LATENCY_BOUNDS.len() + 1],
    sum_ns: AtomicU64,
}

/// What a `LatencyHistogram` held when it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencySnapshot {
    /// Per bucket of `LATENCY_BOUNDS`, then above it; not cumulative.
    pub counts: Vec<u64>,
    pub sum_seconds: f64,
}

impl LatencyHistogram {
    pub fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = LATENCY_BOUNDS.iter().position(|&bound| seconds <= bound).unwrap_or(LATENCY_BOUNDS.len());
        self.buckets[bucket].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// Each field is read on its own: a concurrent `observe` may show in a
    /// bucket and not yet in the sum, which a scraper cannot tell apart
    /// from the next scrape's timing.
    pub fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            counts: self.buckets.iter().map(|b| b.load(Relaxed)).collect(),
            sum_seconds: self.sum_ns.load(Relaxed) as f64 / 1e9,
        }
    }
}

pub fn get(c: &AtomicU64) -> i64 {
    c.load(Relaxed) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_lands_in_the_first_bucket_that_holds_it() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(50)); // below the first bound
        h.observe(Duration::from_micros(100)); // on a bound: "at or below"
        h.observe(Duration::from_micros(101));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60)); // above the last bound
        let snap = h.snapshot();
        assert_eq!(snap.counts.len(), LATENCY_BOUNDS.len() + 1);
        assert_eq!(snap.counts[0], 2);
        assert_eq!(snap.counts[1], 1);
        assert_eq!(snap.counts[LATENCY_BOUNDS.iter().position(|&b| b == 0.005).unwrap()], 1);
        assert_eq!(snap.counts[LATENCY_BOUNDS.len()], 1);
        assert_eq!(snap.counts.iter().sum::<u64>(), 5);
        let expected = 60.0 + 0.003 + 0.000101 + 0.0001 + 0.00005;
        assert!((snap.sum_seconds - expected).abs() < 1e-9, "{}", snap.sum_seconds);
    }

    #[test]
    fn flush_status_keeps_the_histograms() {
        let stats = Stats::default();
        stats.commit_latency.observe(Duration::from_millis(1));
        stats.reset();
        assert_eq!(stats.commit_latency.snapshot().counts.iter().sum::<u64>(), 1);
    }

    #[test]
    fn the_bounds_increase() {
        assert!(LATENCY_BOUNDS.windows(2).all(|w| w[0] < w[1]));
    }
}
