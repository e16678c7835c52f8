use super::*;
use crate::storage::MemStorage;
use proptest::prelude::*;

#[test]
fn names_carry_the_first_index_and_sort_in_index_order() {
    assert_eq!(segment_name("log", 1), "log.00000000000000000001.seg");
    assert_eq!(segment_name("log", u64::MAX), "log.18446744073709551615.seg");
    assert_eq!(parse_segment_name("log", "log.00000000000000000001.seg"), Some(1));
    assert_eq!(parse_segment_name("log", &segment_name("log", u64::MAX)), Some(u64::MAX));
    let mut names: Vec<String> = [1000, 9, 10, 1].iter().map(|&i| segment_name("a", i)).collect();
    names.sort();
    let parsed: Vec<u64> = names.iter().filter_map(|n| parse_segment_name("a", n)).collect();
    assert_eq!(parsed, vec![1, 9, 10, 1000]);
}

#[test]
fn look_alike_names_are_not_segments() {
    for name in [
        "log.0000000000000000001.seg",   // 19 digits
        "log.000000000000000000001.seg", // 21 digits
        "log.0000000000000000000x.seg",  // not a digit
        "log.99999999999999999999.seg",  // beyond u64
        "log.00000000000000000001.seg.damaged",
        "log.00000000000000000001.segx",
        "logx.00000000000000000001.seg",
        "other.00000000000000000001.seg",
        "log00000000000000000001.seg",
        "log.+0000000000000000001.seg",
        "log.",
        "",
    ] {
        assert_eq!(parse_segment_name("log", name), None, "{name:?}");
    }
}

#[test]
fn a_prefix_with_dots_still_parses() {
    assert_eq!(parse_segment_name("my.log", &segment_name("my.log", 5)), Some(5));
    assert_eq!(parse_segment_name("my", &segment_name("my.log", 5)), None);
}

#[test]
fn small_records_get_an_entry_every_64() {
    let mut segment = Segment::new("log", 100);
    assert_eq!(segment.next_index(), 100);
    assert!(!segment.holds(100));
    for index in 100..100 + 1000 {
        segment.push_record(index, RECORD_HEADER_LEN as u64 + 10);
    }
    assert_eq!(segment.index_entries(), 1000usize.div_ceil(64));
    assert_eq!(segment.entry_for(100), (100, SEGMENT_HEADER_LEN as u64));
    assert_eq!(segment.entry_for(163).0, 100);
    assert_eq!(segment.entry_for(164).0, 164);
    assert_eq!(segment.entry_for(1099).0, 100 + 64 * 15);
    assert_eq!(segment.last, Some(1099));
    assert_eq!(segment.bytes, SEGMENT_HEADER_LEN as u64 + 1000 * 38);
}

#[test]
fn large_records_get_an_entry_every_16_kib() {
    let mut segment = Segment::new("log", 1);
    for index in 1..=10 {
        segment.push_record(index, 10 * 1024);
    }
    // 10 KiB each: an entry at 1, then the 16 KiB rule fires every second record.
    assert_eq!(segment.index_entries(), 5);
    assert_eq!(segment.entry_for(2).0, 1);
    assert_eq!(segment.entry_for(3).0, 3);
}

#[test]
fn cut_after_forgets_later_entries() {
    let mut segment = Segment::new("log", 1);
    for index in 1..=200 {
        segment.push_record(index, 100);
    }
    let offset_of_101 = SEGMENT_HEADER_LEN as u64 + 100 * 100;
    segment.cut_after(100, offset_of_101);
    assert_eq!(segment.last, Some(100));
    assert_eq!(segment.bytes, offset_of_101);
    assert_eq!(segment.index_entries(), 2, "entries at 1 and 65");
    segment.push_record(101, 100);
    assert_eq!(segment.entry_for(101).0, 65);
    segment.cut_after(0, SEGMENT_HEADER_LEN as u64);
    assert_eq!(segment.last, None);
    assert_eq!(segment.index_entries(), 0);
}

#[test]
fn info_describes_the_file() {
    let mut segment = Segment::new("log", 7);
    segment.push_record(7, 30);
    let info = segment.info();
    assert_eq!(info.name, "log.00000000000000000007.seg");
    assert_eq!((info.first, info.last, info.bytes), (7, Some(7), SEGMENT_HEADER_LEN as u64 + 30));
}

proptest! {
    /// The walk from a sparse entry to any record is under 64 records and starts within
    /// 16 KiB, whatever the record sizes: what bounds a point read.
    #[test]
    fn walk_from_an_entry_is_bounded(sizes in proptest::collection::vec(0u64..40_000, 1..400)) {
        let mut segment = Segment::new("log", 1);
        let mut offsets = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            offsets.push(segment.bytes);
            segment.push_record(i as u64 + 1, RECORD_HEADER_LEN as u64 + size);
        }
        for (i, offset) in offsets.iter().enumerate() {
            let index = i as u64 + 1;
            let (entry, entry_offset) = segment.entry_for(index);
            prop_assert!(entry <= index && index - entry < SPARSE_EVERY_RECORDS);
            prop_assert_eq!(entry_offset, offsets[(entry - 1) as usize]);
            prop_assert!(offset - entry_offset < SPARSE_EVERY_BYTES);
        }
    }
}

/// A segment file in `storage` holding records `first..first + payloads.len()`.
fn segment_file(payloads: &[&[u8]], first: u64) -> (MemStorage, Vec<u8>) {
    let storage = MemStorage::new();
    let mut bytes = format::encode_segment_header(first).to_vec();
    for (i, payload) in payloads.iter().enumerate() {
        format::encode_record(&mut bytes, first + i as u64, payload);
    }
    storage.create("s").unwrap();
    storage.append("s", &bytes).unwrap();
    (storage, bytes)
}

fn scan_all(storage: &MemStorage, end: u64, chunk: usize) -> (Vec<(u64, Vec<u8>)>, Step, u64) {
    let start = SEGMENT_HEADER_LEN as u64;
    let mut scanner = Scanner::new(storage, "s", start, end, chunk);
    let mut records = Vec::new();
    loop {
        match scanner.next().unwrap() {
            Step::Record(header) => {
                let payload = scanner.payload(&header).unwrap().unwrap().to_vec();
                records.push((header.index, payload));
                scanner.advance(&header);
            }
            other => return (records, other, scanner.offset()),
        }
    }
}

#[test]
fn scanner_reads_the_same_whatever_the_chunk_size() {
    let big = vec![7u8; 5000];
    let payloads: Vec<&[u8]> = vec![b"a", b"", &big, b"bcd", &big[..100]];
    let (storage, bytes) = segment_file(&payloads, 10);
    for chunk in [1, 7, 28, 100, 4096, 1 << 20] {
        let (records, step, offset) = scan_all(&storage, bytes.len() as u64, chunk);
        assert_eq!(step, Step::End, "chunk {chunk}");
        assert_eq!(offset, bytes.len() as u64);
        let indexes: Vec<u64> = records.iter().map(|(i, _)| *i).collect();
        assert_eq!(indexes, vec![10, 11, 12, 13, 14]);
        for ((_, got), want) in records.iter().zip(&payloads) {
            assert_eq!(&got[..], *want);
        }
    }
}

#[test]
fn scanner_reports_torn_records_at_their_start() {
    let (storage, bytes) = segment_file(&[b"first", b"second"], 1);
    let second = (SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 5) as u64;
    for end in second + 1..bytes.len() as u64 {
        let (records, step, offset) = scan_all(&storage, end, 64);
        assert_eq!(records.len(), 1, "end {end}");
        assert_eq!((step, offset), (Step::Torn, second), "end {end}");
    }
}

#[test]
fn scanner_reports_invalid_headers_and_bad_payloads() {
    let (storage, bytes) = segment_file(&[b"first", b"second"], 1);
    let second = (SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 5) as u64;
    storage.flip_byte("s", second + 9);
    let (records, step, offset) = scan_all(&storage, bytes.len() as u64, 64);
    assert_eq!(records.len(), 1);
    assert_eq!((step, offset), (Step::Invalid(Invalid::HeaderChecksum), second));
    storage.flip_byte("s", second + 9);
    storage.flip_byte("s", bytes.len() as u64 - 1);
    let mut scanner = Scanner::new(&storage, "s", second, bytes.len() as u64, 64);
    let Step::Record(header) = scanner.next().unwrap() else { panic!("header is intact") };
    assert_eq!(scanner.payload(&header).unwrap(), Err(Invalid::PayloadChecksum));
}

#[test]
fn scanner_never_reads_past_end_for_a_huge_declared_length() {
    // A header that checks but declares more than the file holds is a torn record, found
    // without allocating the declared length.
    let storage = MemStorage::new();
    let mut bytes = format::encode_segment_header(1).to_vec();
    let mut record = Vec::new();
    format::encode_record(&mut record, 1, &vec![0u8; 1 << 20]);
    bytes.extend_from_slice(&record[..RECORD_HEADER_LEN + 10]);
    storage.create("s").unwrap();
    storage.append("s", &bytes).unwrap();
    let (records, step, _) = scan_all(&storage, bytes.len() as u64, 64);
    assert!(records.is_empty());
    assert_eq!(step, Step::Torn);
}

#[test]
fn zeros_to_end_finds_zero_filled_tails_only() {
    let storage = MemStorage::new();
    storage.create("z").unwrap();
    storage.append("z", &[1, 2, 0, 0, 0]).unwrap();
    storage.append("z", &vec![0u8; SCAN_CHUNK + 3]).unwrap();
    let len = storage.len("z").unwrap();
    assert!(zeros_to_end(&storage, "z", 2, len).unwrap());
    assert!(!zeros_to_end(&storage, "z", 1, len).unwrap());
    assert!(zeros_to_end(&storage, "z", len, len).unwrap());
    storage.flip_byte("z", len - 1);
    assert!(!zeros_to_end(&storage, "z", 2, len).unwrap());
}

#[test]
fn a_span_reaches_from_an_entry_to_the_next() {
    let mut segment = Segment::new("log", 1);
    for index in 1..=100 {
        segment.push_record(index, 50);
    }
    assert_eq!(segment.span_len(1), 64 * 50);
    assert_eq!(segment.span_len(64), 64 * 50);
    assert_eq!(segment.span_len(65), 36 * 50, "the last span ends at the end of the file");
}
