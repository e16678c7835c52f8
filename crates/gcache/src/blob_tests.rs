use super::*;
use crate::storage::MemStorage;

#[test]
fn write_then_read_then_replace() {
    let storage = MemStorage::new();
    assert_eq!(read_blob(&storage, "vote").unwrap(), None);
    write_blob(&storage, "vote", b"term 3", true).unwrap();
    assert_eq!(read_blob(&storage, "vote").unwrap().as_deref(), Some(&b"term 3"[..]));
    write_blob(&storage, "vote", b"term 4", false).unwrap();
    assert_eq!(read_blob(&storage, "vote").unwrap().as_deref(), Some(&b"term 4"[..]));
    write_blob(&storage, "empty", b"", true).unwrap();
    assert_eq!(read_blob(&storage, "empty").unwrap(), Some(Vec::new()));
    assert_eq!(storage.list().unwrap(), vec!["empty".to_string(), "vote".to_string()]);
}

#[test]
fn a_synced_write_survives_power_loss() {
    let storage = MemStorage::new();
    write_blob(&storage, "vote", b"v1", true).unwrap();
    let after = storage.crash(&mut |_: &str, synced, _| synced);
    assert_eq!(read_blob(&after, "vote").unwrap().as_deref(), Some(&b"v1"[..]));
}

#[test]
fn an_unsynced_write_leaves_the_old_value_or_an_error_after_power_loss() {
    let storage = MemStorage::new();
    write_blob(&storage, "vote", b"old", true).unwrap();
    write_blob(&storage, "vote", b"new", false).unwrap();
    // Nothing of the rename survives: the old value.
    let none = storage.crash(&mut |_: &str, _, current| current);
    assert_eq!(read_blob(&none, "vote").unwrap().as_deref(), Some(&b"old"[..]));
    // The rename survives but the data did not: a torn blob is an error, not bytes.
    let ops = storage.pending_dir_ops();
    let torn = storage.crash_keeping_dir_ops(ops, &mut |_: &str, synced, _| synced);
    let error = read_blob(&torn, "vote").unwrap_err();
    let LogError::Corrupt { index: 0, reason } = &error else { panic!("{error}") };
    assert!(reason.starts_with("blob vote: "), "{reason}");
}

#[test]
fn a_flipped_byte_is_reported_at_every_offset() {
    let storage = MemStorage::new();
    write_blob(&storage, "id", b"member-identity", true).unwrap();
    let len = storage.file_len("id").unwrap();
    for offset in 0..len {
        storage.flip_byte("id", offset);
        assert!(matches!(read_blob(&storage, "id"), Err(LogError::Corrupt { index: 0, .. })), "flip at {offset}");
        storage.flip_byte("id", offset);
    }
    assert!(read_blob(&storage, "id").unwrap().is_some());
}

#[test]
fn a_truncated_blob_is_reported_at_every_length() {
    let storage = MemStorage::new();
    write_blob(&storage, "id", b"identity", true).unwrap();
    let len = storage.file_len("id").unwrap();
    for cut in 0..len {
        let copy = MemStorage::new();
        copy.create("id").unwrap();
        copy.append("id", &storage.file_bytes("id").unwrap()[..cut as usize]).unwrap();
        assert!(matches!(read_blob(&copy, "id"), Err(LogError::Corrupt { .. })), "cut {cut}");
    }
}

/// A directory whose one file claims a length no blob can have, and cannot be read.
struct HugeFile;

impl Storage for HugeFile {
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(vec!["big".into()])
    }
    fn len(&self, _: &str) -> io::Result<u64> {
        Ok((BLOB_HEADER_LEN + MAX_PAYLOAD) as u64 + 1)
    }
    fn create(&self, _: &str) -> io::Result<()> {
        unimplemented!()
    }
    fn append(&self, _: &str, _: &[u8]) -> io::Result<()> {
        unimplemented!()
    }
    fn read_at(&self, _: &str, _: u64, _: &mut [u8]) -> io::Result<()> {
        panic!("a file too large to be a blob must not be read");
    }
    fn truncate(&self, _: &str, _: u64) -> io::Result<()> {
        unimplemented!()
    }
    fn remove(&self, _: &str) -> io::Result<()> {
        unimplemented!()
    }
    fn rename(&self, _: &str, _: &str) -> io::Result<()> {
        unimplemented!()
    }
    fn sync_file(&self, _: &str) -> io::Result<()> {
        unimplemented!()
    }
    fn sync_dir(&self) -> io::Result<()> {
        unimplemented!()
    }
}

#[test]
fn a_file_too_large_to_be_a_blob_is_refused_before_reading() {
    let error = read_blob(&HugeFile, "big").unwrap_err();
    assert!(matches!(&error, LogError::Corrupt { index: 0, .. }));
    assert!(error.to_string().contains("larger than any blob"), "{error}");
}

#[test]
fn remove_is_idempotent_and_durable() {
    let storage = MemStorage::new();
    write_blob(&storage, "vote", b"v", true).unwrap();
    remove_blob(&storage, "vote").unwrap();
    remove_blob(&storage, "vote").unwrap();
    assert_eq!(read_blob(&storage, "vote").unwrap(), None);
    let after = storage.crash(&mut |_: &str, synced, _| synced);
    assert_eq!(read_blob(&after, "vote").unwrap(), None);
}

#[test]
fn list_filters_by_prefix_sorted_and_skips_temp_files() {
    let storage = MemStorage::new();
    for name in ["checkpoint.0003", "checkpoint.0001", "vote", "checkpoint.0002"] {
        write_blob(&storage, name, name.as_bytes(), false).unwrap();
    }
    storage.create("checkpoint.0004.tmp").unwrap(); // an unfinished write
    let listed = list_blobs(&storage, "checkpoint.").unwrap();
    assert_eq!(listed, vec!["checkpoint.0001", "checkpoint.0002", "checkpoint.0003"]);
    assert_eq!(list_blobs(&storage, "").unwrap().len(), 4);
    assert!(list_blobs(&storage, "nothing").unwrap().is_empty());
}

#[test]
fn temp_and_bad_names_are_refused() {
    let storage = MemStorage::new();
    for name in ["x.tmp", "", "a/b", ".."] {
        let error = write_blob(&storage, name, b"", false).unwrap_err();
        assert!(matches!(&error, LogError::Io(e) if e.kind() == io::ErrorKind::InvalidInput));
        assert!(read_blob(&storage, name).is_err());
        assert!(remove_blob(&storage, name).is_err());
    }
}

#[test]
fn a_stale_temp_file_does_not_disturb_the_next_write() {
    let storage = MemStorage::new();
    storage.create("vote.tmp").unwrap();
    storage.append("vote.tmp", b"garbage from a crash").unwrap();
    write_blob(&storage, "vote", b"v", true).unwrap();
    assert_eq!(read_blob(&storage, "vote").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(storage.list().unwrap(), vec!["vote"]);
}

#[test]
fn checkpoint_sized_blobs_round_trip() {
    let storage = MemStorage::new();
    let checkpoint: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    write_blob(&storage, "checkpoint.1", &checkpoint, true).unwrap();
    assert_eq!(read_blob(&storage, "checkpoint.1").unwrap().unwrap(), checkpoint);
}
