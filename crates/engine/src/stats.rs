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
    pub causal_reads: AtomicU64,
    pub apply_waits: AtomicU64,
    /// Sum of (seqno - depends_on) over certified write-sets, and their count.
    pub deps_distance_sum: AtomicI64,
    pub deps_distance_n: AtomicI64,
    pub recv_queue_max: AtomicI64,
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

    pub fn note_queue(&self, len: i64) {
        self.recv_queue_max.fetch_max(len, Relaxed);
    }

    /// `FLUSH STATUS`: Galera resets the averages and maxima, not the totals.
    pub fn reset(&self) {
        self.deps_distance_sum.store(0, Relaxed);
        self.deps_distance_n.store(0, Relaxed);
        self.recv_queue_max.store(0, Relaxed);
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
