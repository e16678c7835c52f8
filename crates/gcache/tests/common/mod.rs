//! Helpers shared by the integration tests: deterministic payloads, a reference history of
//! what the log should hold, and a storage wrapper that counts I/O.
#![allow(dead_code)] // each test binary uses its own subset

pub mod model;

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tandem_gcache::{LogError, LogOptions, SegmentLog, Storage};

pub fn options(segment_bytes: u64) -> LogOptions {
    LogOptions { name: "log".into(), segment_bytes }
}

/// A payload that differs per index and per `generation`, so that a record coming back
/// from before a truncation (same index, older generation) is told apart.
pub fn payload(index: u64, len: usize, generation: u64) -> Vec<u8> {
    let seed = index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ generation.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (0..len).map(|i| (seed.rotate_left((i % 64) as u32) as u8) ^ (i as u8)).collect()
}

/// Appends `payloads` as records `start..`.
pub fn append_all<S: Storage>(log: &mut SegmentLog<S>, start: u64, payloads: &[Vec<u8>]) -> Result<(), LogError> {
    log.append(payloads.iter().enumerate().map(|(i, p)| (start + i as u64, p.as_slice())))
}

/// The records the log holds on disk, purged or not, by index: the reference every record
/// the log ever returns must match.
pub type History = BTreeMap<u64, Vec<u8>>;

/// Asserts that `log` holds a contiguous range of records, each equal to `history`'s, and
/// returns that range.
pub fn assert_matches_history<S: Storage>(log: &SegmentLog<S>, history: &History) -> Option<(u64, u64)> {
    let (Some(first), Some(last)) = (log.first_index(), log.last_index()) else {
        assert_eq!(log.first_index(), None, "first without last");
        assert_eq!(log.last_index(), None, "last without first");
        return None;
    };
    if first > last {
        assert_eq!(first, last + 1, "an empty log continues right after its last index");
        return Some((first, last));
    }
    let records = log.read_range(first, last, usize::MAX).unwrap();
    assert_eq!(records.len() as u64, last - first + 1, "read_range returns the whole range");
    for (index, bytes) in records {
        let expected = history.get(&index);
        assert_eq!(Some(&bytes), expected, "record {index} differs from what was appended");
    }
    Some((first, last))
}

/// Wraps a storage, counting bytes read and appends made.
#[derive(Clone)]
pub struct Counting<S> {
    pub inner: S,
    pub bytes_read: Arc<AtomicU64>,
    pub appends: Arc<AtomicU64>,
}

impl<S: Storage> Counting<S> {
    pub fn new(inner: S) -> Self {
        Counting { inner, bytes_read: Arc::default(), appends: Arc::default() }
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::SeqCst)
    }
}

impl<S: Storage> Storage for Counting<S> {
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn len(&self, name: &str) -> io::Result<u64> {
        self.inner.len(name)
    }
    fn create(&self, name: &str) -> io::Result<()> {
        self.inner.create(name)
    }
    fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.inner.append(name, data)
    }
    fn read_at(&self, name: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.bytes_read.fetch_add(buf.len() as u64, Ordering::SeqCst);
        self.inner.read_at(name, offset, buf)
    }
    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        self.inner.truncate(name, len)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_file(&self, name: &str) -> io::Result<()> {
        self.inner.sync_file(name)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.inner.sync_dir()
    }
}
