//! The core scenarios on a real directory (FsStorage in a temp dir): the model test, kill
//! -9, a torn tail and a flipped byte made with std::fs behind the log's back, blobs, and
//! concurrent readers.

mod common;

use common::model::{op, run};
use common::{append_all, assert_matches_history, options, payload, History};
use proptest::prelude::*;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use tandem_gcache::format::RECORD_HEADER_LEN;
use tandem_gcache::{list_blobs, read_blob, remove_blob, write_blob, Damage, FsStorage, LogError, SegmentLog};

fn temp_storage() -> (tempfile::TempDir, FsStorage) {
    let dir = tempfile::tempdir().unwrap();
    let storage = FsStorage::new(dir.path().join("gcache")).unwrap();
    (dir, storage)
}

/// A log of records 1..=count on disk, synced up to `synced` (records after are only
/// written), with the history to check against.
fn written(storage: &FsStorage, count: u64, synced: u64) -> History {
    let mut log = SegmentLog::open(storage.clone(), options(2000)).unwrap().log;
    let payloads: Vec<Vec<u8>> = (1..=count).map(|i| payload(i, (i % 90) as usize, 0)).collect();
    append_all(&mut log, 1, &payloads[..synced as usize]).unwrap();
    log.sync().unwrap();
    append_all(&mut log, synced + 1, &payloads[synced as usize..]).unwrap();
    (1..=count).zip(payloads).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn log_matches_model_on_a_real_directory(ops in proptest::collection::vec(op(), 1..40)) {
        let (_dir, storage) = temp_storage();
        run(storage, 400, &ops);
    }
}

#[test]
fn kill_keeps_every_write_that_returned() {
    let (_dir, storage) = temp_storage();
    let history = written(&storage, 300, 100);
    // The process "dies": the log is dropped without sync; the files stay as written.
    let fresh = FsStorage::new(storage.dir()).unwrap();
    let opened = SegmentLog::open(fresh, options(2000)).unwrap();
    assert_eq!(opened.recovery.damage, None);
    assert_eq!(assert_matches_history(&opened.log, &history), Some((1, 300)));
}

#[test]
fn torn_tail_at_every_cut_of_the_last_record() {
    let (_dir, storage) = temp_storage();
    let history = written(&storage, 40, 40);
    let log = SegmentLog::open(storage.clone(), options(2000)).unwrap().log;
    let last = log.segments().last().unwrap().clone();
    let path = storage.dir().join(&last.name);
    // Record 40 has a 40-byte payload (see `written`) behind its 28-byte header.
    let record_start = last.bytes - (RECORD_HEADER_LEN + 40) as u64;
    for cut in record_start + 1..last.bytes {
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(cut).unwrap();
        let opened = SegmentLog::open(FsStorage::new(storage.dir()).unwrap(), options(2000)).unwrap();
        let expected = Damage::TornTail { segment: last.name.clone(), offset: record_start };
        assert_eq!(opened.recovery.damage, Some(expected), "cut {cut}");
        assert_eq!(opened.recovery.truncated_bytes, cut - record_start);
        assert_eq!(assert_matches_history(&opened.log, &history), Some((1, 39)));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), record_start, "cut on disk");
        // Put the record back for the next cut.
        let mut log = opened.log;
        log.append([(40, history[&40].as_slice())]).unwrap();
        log.sync().unwrap();
    }
}

#[test]
fn flipped_byte_on_disk_is_detected_by_read_and_by_open() {
    let (_dir, storage) = temp_storage();
    let history = written(&storage, 200, 200);
    let log = SegmentLog::open(storage.clone(), options(2000)).unwrap().log;
    let segment = log.segments()[1].clone();
    let path = storage.dir().join(&segment.name);
    // The last payload byte of the segment's last record.
    let offset = segment.bytes - 1;
    let file = OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).unwrap();
    file.write_all_at(&[!byte[0]], offset).unwrap();
    let damaged = segment.last.unwrap();
    assert!(matches!(log.read(damaged), Err(LogError::Corrupt { index, .. }) if index == damaged));
    assert_eq!(log.read(damaged - 1).unwrap(), history[&(damaged - 1)]);
    drop(log);
    let opened = SegmentLog::open(FsStorage::new(storage.dir()).unwrap(), options(2000)).unwrap();
    assert!(matches!(&opened.recovery.damage, Some(Damage::Corrupt { segment: s, .. })
            if *s == segment.name));
    assert_eq!(opened.log.last_index(), Some(damaged - 1));
    assert!(!opened.recovery.set_aside.is_empty());
    for aside in &opened.recovery.set_aside {
        assert!(storage.dir().join(aside).exists(), "{aside}");
    }
    assert_matches_history(&opened.log, &history);
}

#[test]
fn truncate_purge_and_reopen_on_disk() {
    let (_dir, storage) = temp_storage();
    let history = written(&storage, 500, 500);
    let mut log = SegmentLog::open(storage.clone(), options(2000)).unwrap().log;
    let files_before = std::fs::read_dir(storage.dir()).unwrap().count();
    log.purge_upto(250).unwrap();
    log.truncate_after(Some(400)).unwrap();
    log.sync().unwrap();
    let files_after = std::fs::read_dir(storage.dir()).unwrap().count();
    assert!(files_after < files_before, "{files_after} < {files_before}");
    let on_disk: u64 =
        std::fs::read_dir(storage.dir()).unwrap().map(|entry| entry.unwrap().metadata().unwrap().len()).sum();
    assert_eq!(log.disk_bytes(), on_disk);
    drop(log);
    let opened = SegmentLog::open(FsStorage::new(storage.dir()).unwrap(), options(2000)).unwrap();
    let (first, last) = assert_matches_history(&opened.log, &history).unwrap();
    assert!(first <= 251 && last == 400, "{first}..={last}");
}

#[test]
fn blobs_on_disk() {
    let (_dir, storage) = temp_storage();
    assert_eq!(read_blob(&storage, "vote").unwrap(), None);
    write_blob(&storage, "vote", b"term 1", true).unwrap();
    write_blob(&storage, "vote", b"term 2", true).unwrap();
    write_blob(&storage, "checkpoint.2", &vec![9u8; 100_000], false).unwrap();
    write_blob(&storage, "checkpoint.1", b"", true).unwrap();
    assert_eq!(read_blob(&storage, "vote").unwrap().as_deref(), Some(&b"term 2"[..]));
    assert_eq!(list_blobs(&storage, "checkpoint.").unwrap(), vec!["checkpoint.1", "checkpoint.2"]);
    // A blob damaged on disk is reported, not returned.
    let path = storage.dir().join("vote");
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(b"X", 22).unwrap();
    assert!(matches!(read_blob(&storage, "vote"), Err(LogError::Corrupt { index: 0, .. })));
    remove_blob(&storage, "vote").unwrap();
    assert_eq!(read_blob(&storage, "vote").unwrap(), None);
    assert!(!path.exists());
}

#[test]
fn readers_share_the_log_across_threads() {
    let (_dir, storage) = temp_storage();
    let history = written(&storage, 2000, 2000);
    let log = SegmentLog::open(storage, options(2000)).unwrap().log;
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let (log, history) = (&log, &history);
            scope.spawn(move || {
                for index in (1 + thread..=2000).step_by(4) {
                    assert_eq!(&log.read(index).unwrap(), &history[&index]);
                }
                let range = log.read_range(1, 2000, usize::MAX).unwrap();
                assert_eq!(range.len(), 2000);
            });
        }
    });
}
