//! Flip ANY byte of any segment file. Reopening detects it as `Damage::Corrupt` exactly at
//! the record (or segment header) holding the byte, with every record before it intact; an
//! already open log answers `LogError::Corrupt` for that record. A payload is never
//! returned altered, and a flip in already-purged space never disturbs the rest.

mod common;

use common::{append_all, assert_matches_history, options, payload, History};
use proptest::prelude::*;
use proptest::sample::Index;
use tandem_gcache::format::{self, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use tandem_gcache::{Damage, LogError, MemStorage, SegmentInfo, SegmentLog};

/// A synced log of records `1..=sizes.len()`, purged up to `purge`.
fn build(sizes: &[usize], segment_bytes: u64, purge: u64) -> (MemStorage, History, u64) {
    let storage = MemStorage::new();
    let mut log = SegmentLog::open(storage.clone(), options(segment_bytes)).unwrap().log;
    let payloads: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &len)| payload(i as u64 + 1, len, 7)).collect();
    append_all(&mut log, 1, &payloads).unwrap();
    log.purge_upto(purge).unwrap();
    log.sync().unwrap();
    let history = payloads.into_iter().enumerate().map(|(i, p)| (i as u64 + 1, p)).collect();
    let first = log.first_index().unwrap();
    (storage, history, first)
}

/// What holds the byte at `offset` of a segment file.
#[derive(Debug, PartialEq)]
enum Owner {
    SegmentHeader,
    /// The record with this index, starting at this offset.
    Record(u64, u64),
}

fn owner(storage: &MemStorage, info: &SegmentInfo, offset: u64) -> Owner {
    if offset < SEGMENT_HEADER_LEN as u64 {
        return Owner::SegmentHeader;
    }
    let bytes = storage.file_bytes(&info.name).unwrap();
    let mut start = SEGMENT_HEADER_LEN;
    loop {
        let header = format::decode_record_header(&bytes[start..]).unwrap();
        let end = start + header.record_len() as usize;
        if (offset as usize) < end {
            return Owner::Record(header.index, start as u64);
        }
        start = end;
    }
}

/// Flips the byte, reopens, and checks the cut is exactly at the byte's owner.
fn check_reopen(storage: &MemStorage, history: &History, segments: &[SegmentInfo], at: (usize, u64)) {
    let (which, offset) = at;
    let info = &segments[which];
    let owner = owner(storage, info, offset);
    let damaged = storage.crash(&mut |_: &str, _, current| current);
    assert!(damaged.flip_byte(&info.name, offset));
    let opened = SegmentLog::open(damaged, options(0)).unwrap();
    let Some(Damage::Corrupt { segment, offset: at, reason }) = &opened.recovery.damage else {
        panic!("flip at {}:{offset} ({owner:?}) gave {:?}", info.name, opened.recovery.damage);
    };
    assert_eq!(segment, &info.name);
    let (expected_at, expected_last) = match owner {
        Owner::SegmentHeader => (0, info.first.checked_sub(1)),
        Owner::Record(index, start) => (start, index.checked_sub(1)),
    };
    assert_eq!(*at, expected_at, "{reason}");
    let expected_last = expected_last.filter(|&last| last >= segments[0].first);
    assert_eq!(opened.log.last_index(), expected_last, "{reason}");
    assert_matches_history(&opened.log, history);
}

/// Flips the byte under an open log and reads everything: the right bytes or an error.
fn check_open_log(storage: &MemStorage, history: &History, segments: &[SegmentInfo], at: (usize, u64)) {
    let (which, offset) = at;
    let info = &segments[which];
    let owner = owner(storage, info, offset);
    let log = SegmentLog::open(storage.clone(), options(0)).unwrap().log;
    let (first, last) = (log.first_index().unwrap(), log.last_index().unwrap());
    assert!(storage.flip_byte(&info.name, offset));
    for index in first..=last {
        match log.read(index) {
            Ok(bytes) => assert_eq!(Some(&bytes), history.get(&index), "read {index} altered"),
            Err(LogError::Corrupt { reason, .. }) => {
                assert!(reason.contains(&info.name), "{reason}")
            }
            Err(error) => panic!("read {index}: {error}"),
        }
    }
    if let Owner::Record(index, _) = owner {
        if index >= first {
            assert!(matches!(log.read(index), Err(LogError::Corrupt { .. })), "{index} not detected");
        }
    }
    match log.read_range(first, last, usize::MAX) {
        Ok(records) => {
            for (index, bytes) in records {
                assert_eq!(Some(&bytes), history.get(&index), "range read {index} altered");
            }
        }
        Err(error) => assert!(matches!(error, LogError::Corrupt { .. }), "{error}"),
    }
    storage.flip_byte(&info.name, offset); // undo, for the next offset
}

/// Every byte of every segment of a small log with a partly purged first segment.
#[test]
fn every_byte_of_every_segment() {
    let sizes: Vec<usize> = (0..24).map(|i| [0, 5, 40, 13][i % 4]).collect();
    let (storage, history, first) = build(&sizes, 200, 3);
    let log = SegmentLog::open(storage.clone(), options(0)).unwrap().log;
    let segments = log.segments();
    assert!(segments.len() >= 3 && segments[0].first < first, "{segments:?}");
    let mut flips = 0;
    for (which, info) in segments.iter().enumerate() {
        for offset in 0..info.bytes {
            check_reopen(&storage, &history, &segments, (which, offset));
            check_open_log(&storage, &history, &segments, (which, offset));
            flips += 1;
        }
    }
    assert_eq!(flips, log.disk_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_flipped_byte_is_detected_never_returned(
        sizes in proptest::collection::vec(prop_oneof![4 => 0usize..50, 1 => 50usize..5000], 1..80),
        segment_bytes in prop_oneof![Just(0u64), 64u64..2000, Just(1u64 << 20)],
        purge in 0u64..40,
        file in any::<Index>(),
        byte in any::<Index>(),
    ) {
        let (storage, history, _) = build(&sizes, segment_bytes, purge);
        let log = SegmentLog::open(storage.clone(), options(0)).unwrap().log;
        let segments = log.segments();
        let which = file.index(segments.len());
        let offset = byte.index(segments[which].bytes as usize) as u64;
        check_reopen(&storage, &history, &segments, (which, offset));
        check_open_log(&storage, &history, &segments, (which, offset));
    }
}

#[test]
fn record_layout_assumed_by_these_tests() {
    // `owner` walks files with the public format module; keep it honest.
    let mut bytes = Vec::new();
    format::encode_record(&mut bytes, 5, b"abc");
    assert_eq!(bytes.len(), RECORD_HEADER_LEN + 3);
    assert_eq!(format::decode_record_header(&bytes).unwrap().index, 5);
}
