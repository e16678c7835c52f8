//! What the log keeps in RAM and how much it reads: a sparse index far smaller than the
//! record count, open reading each byte once, point reads reading one sparse span.

mod common;

use common::{options, Counting};
use tandem_gcache::{MemStorage, SegmentLog};

const RECORDS: u64 = 200_000;

fn big_log() -> (Counting<MemStorage>, SegmentLog<Counting<MemStorage>>) {
    let storage = Counting::new(MemStorage::new());
    let mut log = SegmentLog::open(storage.clone(), options(1 << 20)).unwrap().log;
    let payload = [0x5Au8; 12];
    for start in (1..=RECORDS).step_by(1000) {
        log.append((start..start + 1000).map(|i| (i, &payload[..]))).unwrap();
    }
    log.sync().unwrap();
    (storage, log)
}

#[test]
fn index_holds_far_fewer_entries_than_records() {
    let (storage, log) = big_log();
    assert_eq!(log.last_index(), Some(RECORDS));
    let entries = log.index_entries() as u64;
    assert!(entries <= RECORDS / 64 + log.segments().len() as u64, "{entries} entries");
    assert!(entries * 50 < RECORDS, "{entries} entries for {RECORDS} records");
    let reopened = SegmentLog::open(storage.inner.clone(), options(1 << 20)).unwrap().log;
    assert_eq!(reopened.index_entries() as u64, entries, "open rebuilds the same sparse index");
}

#[test]
fn open_reads_every_byte_once() {
    let (storage, log) = big_log();
    let disk = log.disk_bytes();
    drop(log);
    let counting = Counting::new(storage.inner.clone());
    let opened = SegmentLog::open(counting.clone(), options(1 << 20)).unwrap();
    assert_eq!(opened.recovery.records, RECORDS);
    assert_eq!(counting.bytes_read(), disk, "payloads are not read twice");
}

#[test]
fn a_point_read_reads_a_bounded_window() {
    let (storage, log) = big_log();
    for index in [1, 63, 64, 65, 12_345, RECORDS] {
        let before = storage.bytes_read();
        log.read(index).unwrap();
        let read = storage.bytes_read() - before;
        // One span of at most 64 records of 40 bytes, in one read.
        assert!(read <= 64 * 40, "read {read} bytes for record {index}");
    }
}

#[test]
fn appends_are_one_write_per_call() {
    let (storage, log) = big_log();
    let segments = log.segments().len() as u64;
    // 200 calls of 1000 records; a call that crossed into a new segment wrote twice.
    let appends = storage.appends.load(std::sync::atomic::Ordering::SeqCst);
    assert!(appends >= RECORDS / 1000 && appends < RECORDS / 1000 + segments, "{appends}");
}
