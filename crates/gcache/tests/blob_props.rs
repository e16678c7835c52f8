//! Blobs under crashes and corruption: whatever happens, a read gives the old value, the
//! new value, `None`, or `LogError::Corrupt`; never other bytes.

use proptest::prelude::*;
use proptest::sample::Index;
use tandem_gcache::{read_blob, write_blob, LogError, MemStorage, Storage};

fn value() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..300)
}

/// The outcome of a read, checked against the values that may legitimately be there.
fn assert_allowed(read: Result<Option<Vec<u8>>, LogError>, allowed: &[Option<&Vec<u8>>]) {
    match read {
        Ok(got) => assert!(allowed.contains(&got.as_ref()), "read {got:?}, allowed {allowed:?}"),
        Err(LogError::Corrupt { index: 0, reason }) => assert!(reason.starts_with("blob ")),
        Err(error) => panic!("unexpected error {error}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Power loss after an unsynced replacement, cut anywhere, with any prefix of the
    /// directory operations kept.
    #[test]
    fn torn_replacement_gives_old_new_or_an_error(
        old in value(),
        new in value(),
        old_synced in any::<bool>(),
        cut in any::<Index>(),
        dir_ops in any::<Index>(),
    ) {
        let storage = MemStorage::new();
        write_blob(&storage, "vote", &old, old_synced).unwrap();
        write_blob(&storage, "vote", &new, false).unwrap();
        let kept = dir_ops.index(storage.pending_dir_ops() + 1);
        let crashed = storage.crash_keeping_dir_ops(kept, &mut |_: &str, synced, current| {
            synced + cut.index((current - synced + 1) as usize) as u64
        });
        assert_allowed(read_blob(&crashed, "vote"), &[Some(&old), Some(&new), None]);
    }

    /// A temp file left by an earlier write that crashed before its rename may hold a whole
    /// valid frame of a value never stored; it must not surface after a later crash.
    #[test]
    fn a_stale_temp_file_never_surfaces(
        old in value(),
        stale in value(),
        new in value(),
        cut in any::<Index>(),
        dir_ops in any::<Index>(),
    ) {
        let storage = MemStorage::new();
        write_blob(&storage, "vote", &old, true).unwrap();
        write_blob(&storage, "stale", &stale, true).unwrap();
        storage.rename("stale", "vote.tmp").unwrap();
        storage.sync_dir().unwrap();
        write_blob(&storage, "vote", &new, false).unwrap();
        let kept = dir_ops.index(storage.pending_dir_ops() + 1);
        let crashed = storage.crash_keeping_dir_ops(kept, &mut |_: &str, synced, current| {
            synced + cut.index((current - synced + 1) as usize) as u64
        });
        assert_allowed(read_blob(&crashed, "vote"), &[Some(&old), Some(&new)]);
    }

    /// A synced replacement is the new value after any crash.
    #[test]
    fn synced_replacement_survives_any_crash(
        old in value(),
        new in value(),
        cut in any::<Index>(),
    ) {
        let storage = MemStorage::new();
        write_blob(&storage, "vote", &old, false).unwrap();
        write_blob(&storage, "vote", &new, true).unwrap();
        let crashed = storage.crash(&mut |_: &str, synced, current| {
            synced + cut.index((current - synced + 1) as usize) as u64
        });
        prop_assert_eq!(read_blob(&crashed, "vote").unwrap(), Some(new));
    }

    /// A flipped byte anywhere in the blob file is always reported.
    #[test]
    fn flipped_blob_is_an_error(old in value(), byte in any::<Index>()) {
        let storage = MemStorage::new();
        write_blob(&storage, "vote", &old, true).unwrap();
        let len = storage.file_len("vote").unwrap();
        storage.flip_byte("vote", byte.index(len as usize) as u64);
        let result = read_blob(&storage, "vote");
        prop_assert!(matches!(result, Err(LogError::Corrupt { index: 0, .. })), "{:?}", result);
    }

    /// Random bytes where a blob should be: an error or, by a 2^-32 chance, a valid frame.
    #[test]
    fn garbage_blob_files_do_not_panic(garbage in proptest::collection::vec(any::<u8>(), 0..100)) {
        let storage = MemStorage::new();
        storage.create("vote").unwrap();
        storage.append("vote", &garbage).unwrap();
        let _ = read_blob(&storage, "vote");
    }
}
