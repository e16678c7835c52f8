use super::*;
use crate::format::RECORD_HEADER_LEN;
use crate::storage::MemStorage;
use crate::SegmentLog;

fn options(segment_bytes: u64) -> LogOptions {
    LogOptions { name: "log".into(), segment_bytes }
}

/// A synced log of records 1..=count with `payload(i)` payloads.
fn written(count: u64, segment_bytes: u64) -> (MemStorage, Vec<String>) {
    let storage = MemStorage::new();
    let mut log = SegmentLog::open(storage.clone(), options(segment_bytes)).unwrap().log;
    for index in 1..=count {
        log.append([(index, payload(index).as_slice())]).unwrap();
    }
    log.sync().unwrap();
    let names = log.segments().into_iter().map(|s| s.name).collect();
    (storage, names)
}

fn payload(index: u64) -> Vec<u8> {
    format!("payload {index:04}").into_bytes()
}

/// Every record here is header + 12 bytes.
const RECORD: u64 = RECORD_HEADER_LEN as u64 + 12;
const HEADER: u64 = SEGMENT_HEADER_LEN as u64;

fn reopen(storage: &MemStorage, segment_bytes: u64) -> (SegmentLog<MemStorage>, RecoveryReport) {
    let opened = SegmentLog::open(storage.clone(), options(segment_bytes)).unwrap();
    (opened.log, opened.recovery)
}

fn cut(storage: &MemStorage, name: &str, len: u64) {
    storage.truncate(name, len).unwrap();
}

#[test]
fn a_clean_log_reports_nothing() {
    let (storage, names) = written(30, 200);
    let (log, report) = reopen(&storage, 200);
    assert_eq!(report.segments, names.len());
    assert_eq!(report.records, 30);
    assert_eq!((report.truncated_bytes, report.damage, report.set_aside.len()), (0, None, 0));
    assert_eq!(log.last_index(), Some(30));
}

#[test]
fn a_torn_record_at_the_end_is_a_torn_tail() {
    let (storage, names) = written(10, 1 << 20);
    let len = HEADER + 10 * RECORD;
    for keep in [len - 1, len - RECORD + 1, len - RECORD + RECORD_HEADER_LEN as u64] {
        let storage = storage.crash(&mut |_: &str, _, current| current);
        cut(&storage, &names[0], keep);
        let (log, report) = reopen(&storage, 1 << 20);
        let offset = len - RECORD;
        let expected = Damage::TornTail { segment: names[0].clone(), offset };
        assert_eq!(report.damage, Some(expected), "keep {keep}");
        assert_eq!(report.truncated_bytes, keep - offset);
        assert_eq!(log.last_index(), Some(9));
        assert_eq!(storage.file_len(&names[0]), Some(offset), "the tail is cut on disk");
    }
}

#[test]
fn a_cut_at_a_record_boundary_is_clean() {
    let (storage, names) = written(10, 1 << 20);
    cut(&storage, &names[0], HEADER + 7 * RECORD);
    let (log, report) = reopen(&storage, 1 << 20);
    assert_eq!(report.damage, None);
    assert_eq!(log.last_index(), Some(7));
}

#[test]
fn a_zero_filled_tail_is_a_torn_tail() {
    let (storage, names) = written(5, 1 << 20);
    storage.append(&names[0], &[0u8; 100]).unwrap();
    let (log, report) = reopen(&storage, 1 << 20);
    let offset = HEADER + 5 * RECORD;
    assert_eq!(report.damage, Some(Damage::TornTail { segment: names[0].clone(), offset }));
    assert_eq!(report.truncated_bytes, 100);
    assert_eq!(log.last_index(), Some(5));
}

#[test]
fn garbage_after_the_last_record_is_corruption() {
    let (storage, names) = written(5, 1 << 20);
    storage.append(&names[0], &[0xAB; 100]).unwrap();
    let (_, report) = reopen(&storage, 1 << 20);
    let Some(Damage::Corrupt { segment, offset, reason }) = report.damage else { panic!() };
    assert_eq!((segment, offset), (names[0].clone(), HEADER + 5 * RECORD));
    assert!(reason.contains("bad magic"), "{reason}");
}

#[test]
fn corruption_in_a_sealed_segment_sets_later_segments_aside() {
    let (storage, names) = written(40, 200);
    assert!(names.len() >= 4);
    let offset = HEADER + RECORD + 30; // payload of the second record of segment 1
    storage.flip_byte(&names[1], offset);
    let (log, report) = reopen(&storage, 200);
    let Some(Damage::Corrupt { segment, offset: at, reason }) = &report.damage else { panic!() };
    assert_eq!((segment, *at), (&names[1], HEADER + RECORD));
    assert!(reason.contains("payload checksum"), "{reason}");
    let expected: Vec<String> = names[2..].iter().map(|n| format!("{n}.damaged")).collect();
    assert_eq!(report.set_aside, expected);
    let segment_1 = log.segments()[1].clone();
    assert_eq!(log.segments().len(), 2);
    assert_eq!(log.last_index(), Some(segment_1.first));
    for aside in &expected {
        assert!(storage.file_len(aside).is_some(), "{aside} kept for inspection");
    }
    assert_eq!(report.segments, 2);
    // The repair is durable: a power loss right after open changes nothing.
    let after = storage.crash(&mut |_: &str, synced, _| synced);
    let (again, report) = reopen(&after, 200);
    assert_eq!((again.last_index(), report.damage), (log.last_index(), None));
}

#[test]
fn corruption_in_the_first_record_of_a_segment_sets_it_aside_whole() {
    let (storage, names) = written(40, 200);
    storage.flip_byte(&names[2], HEADER + 3);
    let (log, report) = reopen(&storage, 200);
    assert!(matches!(&report.damage, Some(Damage::Corrupt { segment, offset, .. })
        if *segment == names[2] && *offset == HEADER));
    assert_eq!(log.segments().len(), 2);
    assert_eq!(report.set_aside[0], format!("{}.damaged", names[2]));
    assert_eq!(report.set_aside.len(), names.len() - 2);
}

#[test]
fn a_missing_middle_segment_is_an_index_gap() {
    let (storage, names) = written(40, 200);
    storage.remove(&names[1]).unwrap();
    let (log, report) = reopen(&storage, 200);
    let Some(Damage::Corrupt { segment, offset: 0, reason }) = &report.damage else { panic!() };
    assert_eq!(segment, &names[2]);
    assert!(reason.contains("index gap"), "{reason}");
    assert_eq!(log.segments().len(), 1);
    assert_eq!(report.set_aside.len(), names.len() - 2);
}

#[test]
fn a_missing_first_segment_is_fine() {
    let (storage, names) = written(40, 200);
    storage.remove(&names[0]).unwrap();
    let (log, report) = reopen(&storage, 200);
    assert_eq!(report.damage, None);
    assert_eq!(log.last_index(), Some(40));
}

#[test]
fn a_segment_under_the_wrong_name_is_corruption() {
    let (storage, names) = written(40, 200);
    let last = names.last().unwrap();
    let wrong = crate::segment::segment_name("log", 999);
    storage.rename(last, &wrong).unwrap();
    let (_, report) = reopen(&storage, 200);
    let Some(Damage::Corrupt { segment, reason, .. }) = &report.damage else { panic!() };
    assert_eq!(segment, &wrong);
    assert!(reason.contains("header names first index"), "{reason}");
}

#[test]
fn a_short_or_garbage_header_in_the_last_segment() {
    let (storage, names) = written(40, 200);
    let last = names.last().unwrap().clone();
    let copy = storage.crash(&mut |_: &str, _, c| c);
    cut(&copy, &last, 10);
    let (log, report) = reopen(&copy, 200);
    assert_eq!(report.damage, Some(Damage::TornTail { segment: last.clone(), offset: 0 }));
    assert_eq!(report.truncated_bytes, 10);
    assert!(copy.file_len(&last).is_none(), "a torn segment file is removed");
    assert_eq!(log.segments().len(), names.len() - 1);
    let copy = storage.crash(&mut |_: &str, _, c| c);
    copy.flip_byte(&last, 2);
    let (_, report) = reopen(&copy, 200);
    assert!(matches!(report.damage, Some(Damage::Corrupt { offset: 0, .. })));
    assert_eq!(report.set_aside, vec![format!("{last}.damaged")]);
}

#[test]
fn a_short_sealed_segment_is_corruption() {
    let (storage, names) = written(40, 200);
    cut(&storage, &names[1], 5);
    let (_, report) = reopen(&storage, 200);
    let Some(Damage::Corrupt { segment, reason, .. }) = &report.damage else { panic!() };
    assert_eq!(segment, &names[1]);
    assert!(reason.contains("shorter than its 24-byte header"), "{reason}");
}

#[test]
fn a_torn_record_in_a_sealed_segment_is_corruption() {
    let (storage, names) = written(40, 200);
    let len = storage.file_len(&names[1]).unwrap();
    cut(&storage, &names[1], len - 3);
    let (_, report) = reopen(&storage, 200);
    let Some(Damage::Corrupt { reason, .. }) = &report.damage else { panic!() };
    assert!(reason.contains("incomplete record"), "{reason}");
}

#[test]
fn a_header_only_last_segment_is_removed_quietly() {
    let (storage, names) = written(10, 1 << 20);
    let next = crate::segment::segment_name("log", 11);
    storage.create(&next).unwrap();
    storage.append(&next, &format::encode_segment_header(11)).unwrap();
    let (mut log, report) = reopen(&storage, 1 << 20);
    assert_eq!(report.damage, None);
    assert_eq!(log.segments().len(), names.len());
    assert!(storage.file_len(&next).is_none());
    log.append([(11, &b"eleven"[..])]).unwrap();
}

#[test]
fn a_lone_header_only_segment_leaves_an_empty_log() {
    let storage = MemStorage::new();
    let name = crate::segment::segment_name("log", 5);
    storage.create(&name).unwrap();
    storage.append(&name, &format::encode_segment_header(5)).unwrap();
    let (mut log, report) = reopen(&storage, 100);
    assert_eq!((report.segments, report.records, report.damage), (0, 0, None));
    assert_eq!(log.first_index(), None);
    log.append([(1, &b"anywhere"[..])]).unwrap();
}

#[test]
fn a_record_with_the_wrong_index_is_corruption() {
    // Records 1, 2 then a second copy of 2: a valid record in the wrong place.
    let storage = MemStorage::new();
    let name = crate::segment::segment_name("log", 1);
    let mut bytes = format::encode_segment_header(1).to_vec();
    for index in [1, 2, 2] {
        format::encode_record(&mut bytes, index, b"x");
    }
    storage.create(&name).unwrap();
    storage.append(&name, &bytes).unwrap();
    let (log, report) = reopen(&storage, 100);
    let Some(Damage::Corrupt { reason, offset, .. }) = &report.damage else { panic!() };
    assert_eq!(*offset, HEADER + 2 * (RECORD_HEADER_LEN as u64 + 1));
    assert_eq!(reason, "record index 2 where 3 expected");
    assert_eq!(log.last_index(), Some(2));
}

#[test]
fn other_files_in_the_directory_are_left_alone() {
    let (storage, names) = written(10, 1 << 20);
    for other in ["vote", "log.1.seg", "log.00000000000000000001.seg.damaged", "other.seg"] {
        storage.create(other).unwrap();
        storage.append(other, b"not a segment").unwrap();
    }
    let (log, report) = reopen(&storage, 1 << 20);
    assert_eq!(report.damage, None);
    assert_eq!(log.segments().len(), names.len());
    assert_eq!(storage.list().unwrap().len(), names.len() + 4);
}

#[test]
fn a_read_error_during_open_is_an_error_not_a_panic() {
    #[derive(Clone)]
    struct Unreadable(MemStorage);
    impl Storage for Unreadable {
        fn list(&self) -> std::io::Result<Vec<String>> {
            self.0.list()
        }
        fn len(&self, name: &str) -> std::io::Result<u64> {
            self.0.len(name)
        }
        fn create(&self, name: &str) -> std::io::Result<()> {
            self.0.create(name)
        }
        fn append(&self, name: &str, data: &[u8]) -> std::io::Result<()> {
            self.0.append(name, data)
        }
        fn read_at(&self, _: &str, _: u64, _: &mut [u8]) -> std::io::Result<()> {
            Err(std::io::Error::other("injected EIO"))
        }
        fn truncate(&self, name: &str, len: u64) -> std::io::Result<()> {
            self.0.truncate(name, len)
        }
        fn remove(&self, name: &str) -> std::io::Result<()> {
            self.0.remove(name)
        }
        fn rename(&self, a: &str, b: &str) -> std::io::Result<()> {
            self.0.rename(a, b)
        }
        fn sync_file(&self, name: &str) -> std::io::Result<()> {
            self.0.sync_file(name)
        }
        fn sync_dir(&self) -> std::io::Result<()> {
            self.0.sync_dir()
        }
    }
    let (storage, _) = written(10, 1 << 20);
    let error = SegmentLog::open(Unreadable(storage), options(1 << 20)).err().unwrap();
    assert!(error.to_string().contains("injected EIO"), "{error}");
}
