//! Counters behind the `wsrep_*` status variables.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

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

pub fn get(c: &AtomicU64) -> i64 {
    c.load(Relaxed) as i64
}
