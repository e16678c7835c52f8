//! Garbage and mangled files named like segments never make `open` panic. Whatever it
//! accepts reads back, and a second open finds nothing left to repair.

mod common;

use common::{append_all, options, payload};
use proptest::prelude::*;
use proptest::sample::Index;
use tandem_gcache::format::{self, SEGMENT_HEADER_LEN};
use tandem_gcache::{MemStorage, SegmentLog, Storage};

fn segment_name(first: u64) -> String {
    format!("log.{first:020}.seg")
}

/// Contents for a file named like a segment: pure noise, or a valid segment header and
/// some valid records followed by noise.
fn contents() -> impl Strategy<Value = (u64, Vec<u8>)> {
    let noise = proptest::collection::vec(any::<u8>(), 0..200);
    prop_oneof![
        (0u64..50, noise.clone()),
        (0u64..50, 0usize..5, noise, any::<bool>()).prop_map(|(first, records, noise, named_right)| {
            let mut bytes = format::encode_segment_header(if named_right { first } else { first + 1 }).to_vec();
            for index in first..first + records as u64 {
                format::encode_record(&mut bytes, index, &payload(index, 10, 0));
            }
            bytes.extend_from_slice(&noise);
            (first, bytes)
        }),
    ]
}

/// Opens, reads everything it kept, and checks that a second open is clean.
fn open_and_check(storage: &MemStorage) {
    let opened = SegmentLog::open(storage.clone(), options(1 << 20)).unwrap();
    let log = &opened.log;
    if let (Some(first), Some(last)) = (log.first_index(), log.last_index()) {
        for index in first..=last {
            log.read(index).unwrap();
        }
        assert_eq!(log.read_range(first, last, usize::MAX).unwrap().len() as u64, last - first + 1);
    }
    let again = SegmentLog::open(storage.clone(), options(1 << 20)).unwrap();
    assert_eq!(again.recovery.damage, None, "after {:?}", opened.recovery);
    assert_eq!(again.log.last_index(), log.last_index());
    assert_eq!(again.recovery.truncated_bytes, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn garbage_segment_files_do_not_panic_open(
        files in proptest::collection::vec(contents(), 0..6),
    ) {
        let storage = MemStorage::new();
        for (first, bytes) in &files {
            let name = segment_name(*first);
            storage.create(&name).unwrap();
            storage.append(&name, bytes).unwrap();
        }
        open_and_check(&storage);
    }

    /// A real log mangled several times over: flips, cuts, appended noise, a removed or
    /// duplicated segment.
    #[test]
    fn mangled_logs_do_not_panic_open(
        count in 1u64..60,
        damage in proptest::collection::vec(
            (0u8..5, any::<Index>(), any::<Index>(), any::<u8>()),
            1..6,
        ),
    ) {
        let storage = MemStorage::new();
        let mut log = SegmentLog::open(storage.clone(), options(300)).unwrap().log;
        let payloads: Vec<Vec<u8>> =
            (1..=count).map(|i| payload(i, (i % 30) as usize, 0)).collect();
        append_all(&mut log, 1, &payloads).unwrap();
        drop(log);
        for (kind, file, position, byte) in damage {
            let names = storage.list().unwrap();
            let Some(name) = names.get(file.index(names.len().max(1))).cloned() else { break };
            let len = storage.file_len(&name).unwrap();
            let offset = position.index(len as usize + 1) as u64;
            match kind {
                0 => { storage.flip_byte(&name, offset); }
                1 => storage.truncate(&name, offset).unwrap(),
                2 => storage.append(&name, &[byte; 17]).unwrap(),
                3 => storage.remove(&name).unwrap(),
                _ => {
                    let copy = segment_name(u64::from(byte));
                    storage.create(&copy).unwrap();
                    storage.append(&copy, &storage.file_bytes(&name).unwrap()).unwrap();
                }
            }
        }
        open_and_check(&storage);
    }
}

#[test]
fn a_file_with_only_a_header_and_noise_is_cut_to_nothing() {
    let storage = MemStorage::new();
    let mut bytes = format::encode_segment_header(3).to_vec();
    bytes.extend_from_slice(&[0xEE; 40]);
    storage.create(&segment_name(3)).unwrap();
    storage.append(&segment_name(3), &bytes).unwrap();
    let opened = SegmentLog::open(storage.clone(), options(100)).unwrap();
    assert_eq!(opened.log.last_index(), None);
    assert_eq!(opened.recovery.truncated_bytes, (SEGMENT_HEADER_LEN + 40) as u64);
    open_and_check(&storage);
}
