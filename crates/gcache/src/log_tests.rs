use super::*;
use crate::storage::MemStorage;
use crate::Damage;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// MemStorage that counts appends and fails chosen operations on demand.
#[derive(Clone, Default)]
struct Faulty {
    inner: MemStorage,
    appends: Arc<AtomicUsize>,
    fail_sync: Arc<AtomicBool>,
    fail_truncate: Arc<AtomicBool>,
    fail_create: Arc<AtomicBool>,
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

impl Storage for Faulty {
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn len(&self, name: &str) -> io::Result<u64> {
        self.inner.len(name)
    }
    fn create(&self, name: &str) -> io::Result<()> {
        if self.fail_create.load(Ordering::SeqCst) {
            return Err(injected("create"));
        }
        self.inner.create(name)
    }
    fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.inner.append(name, data)
    }
    fn read_at(&self, name: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(name, offset, buf)
    }
    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        if self.fail_truncate.load(Ordering::SeqCst) {
            return Err(injected("truncate"));
        }
        self.inner.truncate(name, len)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_file(&self, name: &str) -> io::Result<()> {
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(injected("fsync"));
        }
        self.inner.sync_file(name)
    }
    fn sync_dir(&self) -> io::Result<()> {
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(injected("fsync"));
        }
        self.inner.sync_dir()
    }
}

fn options(segment_bytes: u64) -> LogOptions {
    LogOptions { name: "log".into(), segment_bytes }
}

fn open<S: Storage>(storage: S, segment_bytes: u64) -> SegmentLog<S> {
    let opened = SegmentLog::open(storage, options(segment_bytes)).unwrap();
    assert_eq!(opened.recovery.damage, None);
    opened.log
}

fn payload(index: u64) -> Vec<u8> {
    format!("record-{index}").into_bytes()
}

fn append_range<S: Storage>(log: &mut SegmentLog<S>, range: std::ops::RangeInclusive<u64>) {
    let payloads: Vec<(u64, Vec<u8>)> = range.map(|i| (i, payload(i))).collect();
    log.append(payloads.iter().map(|(i, p)| (*i, p.as_slice()))).unwrap();
}

fn indexes(records: &[(u64, Vec<u8>)]) -> Vec<u64> {
    records.iter().map(|(index, _)| *index).collect()
}

#[test]
fn empty_log_has_no_indexes_and_no_files() {
    let storage = MemStorage::new();
    let opened = SegmentLog::open(storage.clone(), options(1024)).unwrap();
    let log = opened.log;
    assert_eq!((log.first_index(), log.last_index()), (None, None));
    assert_eq!(log.disk_bytes(), 0);
    assert!(log.segments().is_empty());
    assert!(storage.list().unwrap().is_empty());
    assert_eq!(opened.recovery.records, 0);
    assert!(matches!(log.read(0), Err(LogError::Missing(0))));
    assert!(matches!(log.read_range(0, 5, 10), Err(LogError::Missing(5))));
}

#[test]
fn appended_records_read_back() {
    let mut log = open(MemStorage::new(), 1 << 20);
    append_range(&mut log, 5..=300);
    assert_eq!((log.first_index(), log.last_index()), (Some(5), Some(300)));
    for index in 5..=300 {
        assert_eq!(log.read(index).unwrap(), payload(index), "{index}");
    }
    assert!(matches!(log.read(4), Err(LogError::Missing(4))));
    assert!(matches!(log.read(301), Err(LogError::Missing(301))));
}

#[test]
fn empty_payloads_and_empty_batches_are_fine() {
    let mut log = open(MemStorage::new(), 1 << 20);
    log.append(std::iter::empty()).unwrap();
    assert_eq!(log.last_index(), None);
    log.append([(1, &b""[..]), (2, &b""[..])]).unwrap();
    assert_eq!(log.read(2).unwrap(), b"");
}

#[test]
fn an_append_out_of_order_writes_nothing() {
    let storage = Faulty::default();
    let mut log = open(storage.clone(), 1 << 20);
    append_range(&mut log, 1..=3);
    let error = log.append([(4, &b"ok"[..]), (6, &b"gap"[..])]).unwrap_err();
    assert!(matches!(error, LogError::NotContiguous { expected: 5, got: 6 }), "{error}");
    assert_eq!(log.last_index(), Some(3));
    let error = log.append([(3, &b"again"[..])]).unwrap_err();
    assert!(matches!(error, LogError::NotContiguous { expected: 4, got: 3 }));
    assert_eq!(storage.appends.load(Ordering::SeqCst), 1);
    append_range(&mut log, 4..=4);
}

#[test]
fn index_u64_max_is_refused() {
    let mut log = open(MemStorage::new(), 1 << 20);
    assert!(matches!(log.append([(u64::MAX, &b""[..])]), Err(LogError::NotContiguous { .. })));
    log.append([(u64::MAX - 1, &b"last"[..])]).unwrap();
    assert_eq!(log.read(u64::MAX - 1).unwrap(), b"last");
    assert!(matches!(
        log.append([(u64::MAX, &b""[..])]),
        Err(LogError::NotContiguous { expected: u64::MAX, got: u64::MAX })
    ));
}

#[test]
fn oversized_payload_is_refused_before_anything_is_written() {
    let storage = Faulty::default();
    let mut log = open(storage.clone(), 1 << 20);
    // Zeroed allocations are lazily mapped: this costs no real memory.
    let huge = vec![0u8; MAX_PAYLOAD + 1];
    let error = log.append([(1, &b"fine"[..]), (2, &huge[..])]).unwrap_err();
    assert!(matches!(error, LogError::TooLarge(len) if len == MAX_PAYLOAD + 1));
    assert_eq!(storage.appends.load(Ordering::SeqCst), 0);
    assert_eq!(log.last_index(), None);
}

#[test]
fn one_write_per_append_and_per_segment_touched() {
    let storage = Faulty::default();
    let mut log = open(storage.clone(), 1 << 20);
    append_range(&mut log, 1..=1000);
    assert_eq!(storage.appends.load(Ordering::SeqCst), 1);
    append_range(&mut log, 1001..=1001);
    assert_eq!(storage.appends.load(Ordering::SeqCst), 2);

    let storage = Faulty::default();
    let mut log = open(storage.clone(), 1000);
    append_range(&mut log, 1..=100); // ~4.4 KB: five segments
    let segments = log.segments().len();
    assert!(segments >= 4, "{segments}");
    assert_eq!(storage.appends.load(Ordering::SeqCst), segments);
}

#[test]
fn segments_roll_over_at_segment_bytes() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 500);
    for index in 1..=100 {
        append_range(&mut log, index..=index);
    }
    let segments = log.segments();
    assert!(segments.len() > 5);
    let mut next = 1;
    for info in &segments {
        assert_eq!(info.first, next);
        assert_eq!(info.name, segment::segment_name("log", info.first));
        assert_eq!(storage.file_len(&info.name), Some(info.bytes));
        // Sealed once at least segment_bytes: at most one record beyond.
        assert!(info.bytes < 500 + 50, "{info:?}");
        next = info.last.unwrap() + 1;
    }
    assert_eq!(next, 101);
    assert_eq!(log.disk_bytes(), segments.iter().map(|s| s.bytes).sum::<u64>());
    for index in 1..=100 {
        assert_eq!(log.read(index).unwrap(), payload(index));
    }
}

#[test]
fn read_range_honours_bounds_and_max_bytes() {
    let mut log = open(MemStorage::new(), 300);
    append_range(&mut log, 1..=50); // payloads of 8-9 bytes, many segments
    let all = log.read_range(1, 50, usize::MAX).unwrap();
    assert_eq!(indexes(&all), (1..=50).collect::<Vec<_>>());
    for (index, bytes) in &all {
        assert_eq!(bytes, &payload(*index));
    }
    // 8-byte payloads for 1..=9: 20 bytes of budget hold two.
    assert_eq!(indexes(&log.read_range(3, 50, 20).unwrap()), vec![3, 4]);
    assert_eq!(indexes(&log.read_range(3, 50, 16).unwrap()), vec![3, 4]);
    assert_eq!(indexes(&log.read_range(3, 50, 15).unwrap()), vec![3]);
    assert_eq!(indexes(&log.read_range(3, 50, 0).unwrap()), vec![3], "at least one");
    assert_eq!(indexes(&log.read_range(7, 7, 0).unwrap()), vec![7]);
    assert!(log.read_range(9, 8, 100).unwrap().is_empty());
    assert!(matches!(log.read_range(0, 3, 100), Err(LogError::Missing(0))));
    assert!(matches!(log.read_range(3, 51, 100), Err(LogError::Missing(51))));
}

#[test]
fn truncate_after_inside_a_segment_and_append_again() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 1 << 20);
    append_range(&mut log, 1..=200);
    log.truncate_after(Some(150)).unwrap();
    assert_eq!(log.last_index(), Some(150));
    assert!(matches!(log.read(151), Err(LogError::Missing(151))));
    log.append([(151, &b"new"[..])]).unwrap();
    assert_eq!(log.read(151).unwrap(), b"new");
    assert_eq!(log.read(150).unwrap(), payload(150));
    let reopened = open(storage, 1 << 20);
    assert_eq!(reopened.last_index(), Some(151));
    assert_eq!(reopened.read(151).unwrap(), b"new");
}

#[test]
fn truncate_after_across_segments_removes_later_files() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 400);
    append_range(&mut log, 1..=100);
    let before = log.segments();
    let keep = before[1].last.unwrap(); // exactly at a segment boundary
    log.truncate_after(Some(keep)).unwrap();
    assert_eq!(log.segments(), before[..2].to_vec());
    assert_eq!(storage.list().unwrap().len(), 2);
    log.truncate_after(Some(keep - 1)).unwrap();
    assert_eq!(log.last_index(), Some(keep - 1));
    assert_eq!(log.segments().len(), 2);
    log.truncate_after(None).unwrap();
    assert_eq!((log.first_index(), log.last_index()), (None, None));
    assert!(storage.list().unwrap().is_empty());
    log.append([(7, &b"anywhere"[..])]).unwrap();
    assert_eq!(log.first_index(), Some(7));
}

#[test]
fn truncate_after_bounds() {
    let mut log = open(MemStorage::new(), 1 << 20);
    log.truncate_after(Some(3)).unwrap(); // empty log: nothing after anything
    log.truncate_after(None).unwrap();
    append_range(&mut log, 10..=20);
    log.truncate_after(Some(20)).unwrap();
    log.truncate_after(Some(99)).unwrap();
    assert_eq!(log.last_index(), Some(20));
    assert!(matches!(log.truncate_after(Some(8)), Err(LogError::Missing(8))));
    log.truncate_after(Some(9)).unwrap();
    assert_eq!((log.first_index(), log.last_index()), (None, None));
}

#[test]
fn truncate_after_is_durable_when_it_returns() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 400);
    append_range(&mut log, 1..=100);
    log.sync().unwrap();
    log.truncate_after(Some(42)).unwrap();
    // Power loss right away, keeping nothing unsynced: the old records must not return.
    let after = storage.crash(&mut |_: &str, synced, _| synced);
    let reopened = open(after, 400);
    assert_eq!(reopened.last_index(), Some(42));
}

#[test]
fn purge_is_logical_then_segment_granular() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 400);
    append_range(&mut log, 1..=100);
    let segments = log.segments();
    let second_first = segments[1].first;
    log.purge_upto(second_first + 2).unwrap();
    assert_eq!(log.first_index(), Some(second_first + 3));
    assert!(matches!(log.read(second_first + 2), Err(LogError::Missing(_))));
    assert_eq!(log.read(second_first + 3).unwrap(), payload(second_first + 3));
    assert_eq!(log.segments(), segments[1..].to_vec(), "only the wholly purged file goes");
    assert_eq!(log.disk_bytes(), segments[1..].iter().map(|s| s.bytes).sum::<u64>());
    log.purge_upto(5).unwrap(); // behind the purge point: nothing
    assert_eq!(log.first_index(), Some(second_first + 3));
    log.sync().unwrap();
    let reopened = open(storage, 400);
    assert_eq!(reopened.first_index(), Some(second_first), "lower after reopen, never higher");
}

#[test]
fn purging_everything_keeps_the_last_segment_and_the_continuation() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 400);
    append_range(&mut log, 1..=100);
    log.purge_upto(1000).unwrap(); // clamped to last
    assert_eq!((log.first_index(), log.last_index()), (Some(101), Some(100)));
    assert_eq!(log.segments().len(), 1);
    assert!(matches!(log.read(100), Err(LogError::Missing(100))));
    assert!(log.read_range(101, 100, 10).unwrap().is_empty());
    assert!(matches!(log.append([(5, &b""[..])]), Err(LogError::NotContiguous { .. })));
    append_range(&mut log, 101..=101);
    assert_eq!(log.read(101).unwrap(), payload(101));
    log.sync().unwrap();
    let reopened = open(storage, 400);
    assert_eq!(reopened.last_index(), Some(101));
}

#[test]
fn purge_on_an_empty_log_is_a_no_op() {
    let mut log = open(MemStorage::new(), 400);
    log.purge_upto(10).unwrap();
    assert_eq!(log.first_index(), None);
}

#[test]
fn truncate_into_purged_but_present_records_keeps_the_continuation() {
    let mut log = open(MemStorage::new(), 1 << 20);
    append_range(&mut log, 1..=50);
    log.purge_upto(30).unwrap();
    log.truncate_after(Some(30)).unwrap();
    assert_eq!((log.first_index(), log.last_index()), (Some(31), Some(30)));
    append_range(&mut log, 31..=31);
    assert_eq!(log.read(31).unwrap(), payload(31));
}

#[test]
fn sync_makes_appends_survive_power_loss() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 300);
    append_range(&mut log, 1..=40);
    log.sync().unwrap();
    append_range(&mut log, 41..=60);
    let after = storage.crash(&mut |_: &str, synced, _| synced);
    let reopened = open(after, 300);
    assert_eq!(reopened.last_index(), Some(40));
    let kill = storage.crash(&mut |_: &str, _, current| current);
    let opened = SegmentLog::open(kill, options(300)).unwrap();
    assert_eq!(opened.log.last_index(), Some(40), "new segments were never dir-synced");
}

#[test]
fn kill_keeps_unsynced_appends_in_the_same_segment() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 1 << 20);
    append_range(&mut log, 1..=10);
    log.sync().unwrap();
    append_range(&mut log, 11..=20);
    let kill = storage.crash(&mut |_: &str, _, current| current);
    assert_eq!(open(kill, 1 << 20).last_index(), Some(20));
}

#[test]
fn a_flipped_byte_after_open_is_an_error_naming_file_and_offset() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 1 << 20);
    append_range(&mut log, 1..=10);
    let name = log.segments()[0].name.clone();
    let len = storage.file_len(&name).unwrap();
    storage.flip_byte(&name, len - 1); // last payload byte of record 10
    let error = log.read(10).unwrap_err();
    let LogError::Corrupt { index, reason } = &error else { panic!("{error}") };
    assert_eq!(*index, 10);
    assert!(reason.contains(&name) && reason.contains("offset"), "{reason}");
    assert!(reason.contains("payload checksum"), "{reason}");
    assert_eq!(log.read(9).unwrap(), payload(9));
    assert!(matches!(log.read_range(5, 10, 1000), Err(LogError::Corrupt { index: 10, .. })));
    storage.flip_byte(&name, len - 1);
    assert_eq!(log.read(10).unwrap(), payload(10));
    // A damaged header on the walk from the sparse entry is caught too.
    storage.flip_byte(&name, (format::SEGMENT_HEADER_LEN + 9) as u64);
    assert!(matches!(log.read(5), Err(LogError::Corrupt { index: 1, .. })));
    assert!(matches!(log.truncate_after(Some(3)), Err(LogError::Corrupt { .. })));
}

#[test]
fn full_storage_cuts_the_failed_write_and_keeps_the_log_usable() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 1 << 20);
    append_range(&mut log, 1..=10);
    storage.set_capacity(Some(storage.file_len(&log.segments()[0].name).unwrap() + 5));
    let error = log.append([(11, &b"does not fit"[..])]).unwrap_err();
    assert!(matches!(&error, LogError::Io(e) if e.kind() == io::ErrorKind::StorageFull));
    assert_eq!(log.last_index(), Some(10));
    assert_eq!(log.disk_bytes(), storage.file_len(&log.segments()[0].name).unwrap());
    storage.set_capacity(None);
    append_range(&mut log, 11..=11);
    log.sync().unwrap();
    assert_eq!(open(storage, 1 << 20).read(11).unwrap(), payload(11));
}

#[test]
fn full_storage_while_starting_a_segment_removes_it() {
    let storage = MemStorage::new();
    let mut log = open(storage.clone(), 100);
    append_range(&mut log, 1..=3);
    let used: u64 = log.disk_bytes();
    storage.set_capacity(Some(used + 10));
    assert!(log.append([(4, &b"x"[..])]).is_err());
    assert_eq!(log.segments().len(), storage.list().unwrap().len());
    assert_eq!(log.last_index(), Some(3));
    storage.set_capacity(None);
    append_range(&mut log, 4..=4);
}

#[test]
fn failed_create_leaves_the_log_as_it_was() {
    let storage = Faulty::default();
    let mut log = open(storage.clone(), 100);
    append_range(&mut log, 1..=3);
    storage.fail_create.store(true, Ordering::SeqCst);
    assert!(log.append([(4, &b"x"[..])]).is_err());
    assert_eq!(log.last_index(), Some(3));
    storage.fail_create.store(false, Ordering::SeqCst);
    append_range(&mut log, 4..=4);
}

#[test]
fn a_failed_fsync_refuses_writes_until_reopen() {
    let storage = Faulty::default();
    let mut log = open(storage.clone(), 1 << 20);
    append_range(&mut log, 1..=3);
    storage.fail_sync.store(true, Ordering::SeqCst);
    assert!(log.sync().is_err());
    storage.fail_sync.store(false, Ordering::SeqCst);
    let error = log.sync().unwrap_err();
    assert!(error.to_string().contains("refuses writes until reopened"), "{error}");
    assert!(log.append([(4, &b"x"[..])]).is_err());
    assert!(log.truncate_after(None).is_err());
    assert!(log.purge_upto(1).is_err());
    assert_eq!(log.read(3).unwrap(), payload(3), "reads still work");
    assert!(format!("{log:?}").contains("fsync failed"));
    let mut reopened = open(storage, 1 << 20);
    append_range(&mut reopened, 4..=4);
}

#[test]
fn an_undo_that_fails_breaks_the_log() {
    let storage = Faulty::default();
    let mut log = open(storage.clone(), 1 << 20);
    append_range(&mut log, 1..=3);
    storage.inner.set_capacity(Some(log.disk_bytes() + 3));
    storage.fail_truncate.store(true, Ordering::SeqCst);
    assert!(log.append([(4, &b"xxxxxxxx"[..])]).is_err());
    assert!(log.append([(4, &b"x"[..])]).is_err(), "broken");
    storage.fail_truncate.store(false, Ordering::SeqCst);
    storage.inner.set_capacity(None);
    // The reopen cuts the partial write as a torn tail.
    let opened = SegmentLog::open(storage, options(1 << 20)).unwrap();
    assert!(matches!(opened.recovery.damage, Some(Damage::TornTail { .. })));
    assert_eq!(opened.log.last_index(), Some(3));
}

#[test]
fn memory_holds_a_sparse_index_only() {
    let mut log = open(MemStorage::new(), 1 << 20);
    let batch: Vec<(u64, Vec<u8>)> = (1..=10_000).map(|i| (i, vec![1u8; 10])).collect();
    log.append(batch.iter().map(|(i, p)| (*i, p.as_slice()))).unwrap();
    assert!(log.index_entries() <= 10_000 / 64 + log.segments().len());
    assert!(log.index_entries() >= 10_000 / 64);
}

#[test]
fn opened_logs_debug_print_without_the_storage() {
    let opened = SegmentLog::open(MemStorage::new(), options(100)).unwrap();
    let printed = format!("{opened:?}");
    assert!(printed.contains("last_index: None") && printed.contains("damage: None"), "{printed}");
}

#[test]
fn bad_log_names_are_refused() {
    let error = SegmentLog::open(MemStorage::new(), LogOptions { name: "a/b".into(), segment_bytes: 1 }).err().unwrap();
    assert!(matches!(&error, LogError::Io(e) if e.kind() == io::ErrorKind::InvalidInput));
    assert_eq!(LogOptions::default().name, "log");
}

#[test]
fn two_logs_share_a_storage_without_seeing_each_other() {
    let storage = MemStorage::new();
    let mut a = SegmentLog::open(storage.clone(), LogOptions { name: "a".into(), segment_bytes: 100 }).unwrap().log;
    let mut b = SegmentLog::open(storage.clone(), LogOptions { name: "b".into(), segment_bytes: 100 }).unwrap().log;
    append_range(&mut a, 1..=10);
    append_range(&mut b, 50..=60);
    let a = SegmentLog::open(storage.clone(), a.options().clone()).unwrap();
    assert_eq!((a.log.first_index(), a.log.last_index()), (Some(1), Some(10)));
    assert_eq!(b.storage().list().unwrap().len(), storage.list().unwrap().len());
}
