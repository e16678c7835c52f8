use super::*;

fn keep_all(_: &str, _: u64, current: u64) -> u64 {
    current
}

fn keep_synced(_: &str, synced: u64, _: u64) -> u64 {
    synced
}

fn contents(storage: &MemStorage, name: &str) -> Option<Vec<u8>> {
    storage.file_bytes(name)
}

/// A file created, written and synced, with its directory entry synced too.
fn durable_file(name: &str, data: &[u8]) -> MemStorage {
    let storage = MemStorage::new();
    storage.create(name).unwrap();
    storage.append(name, data).unwrap();
    storage.sync_file(name).unwrap();
    storage.sync_dir().unwrap();
    storage
}

#[test]
fn behaves_like_a_directory() {
    let storage = MemStorage::new();
    storage.create("b").unwrap();
    storage.create("a").unwrap();
    storage.append("a", b"hello").unwrap();
    assert_eq!(storage.list().unwrap(), vec!["a".to_string(), "b".to_string()]);
    assert_eq!(storage.len("a").unwrap(), 5);
    let mut buf = [0u8; 3];
    storage.read_at("a", 2, &mut buf).unwrap();
    assert_eq!(&buf, b"llo");
    let error = storage.read_at("a", 3, &mut buf).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    assert!(error.to_string().contains("mem:a"), "{error}");
    assert_eq!(storage.len("zz").unwrap_err().kind(), io::ErrorKind::NotFound);
    storage.rename("a", "b").unwrap();
    assert_eq!(contents(&storage, "b").unwrap(), b"hello");
    assert_eq!(storage.file_len("a"), None);
    storage.remove("b").unwrap();
    assert!(storage.list().unwrap().is_empty());
    assert_eq!(storage.remove("b").unwrap_err().kind(), io::ErrorKind::NotFound);
}

#[test]
fn read_at_an_absurd_offset_is_eof_not_a_panic() {
    let storage = durable_file("f", b"abc");
    let mut buf = [0u8; 2];
    let error = storage.read_at("f", u64::MAX, &mut buf).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
}

#[test]
fn kill_keeps_everything_written() {
    let storage = durable_file("f", b"synced");
    storage.append("f", b"+cache").unwrap();
    let after = storage.crash(&mut keep_all);
    assert_eq!(contents(&after, "f").unwrap(), b"synced+cache");
}

#[test]
fn power_loss_keeps_synced_bytes_and_the_chosen_prefix_of_the_rest() {
    let storage = durable_file("f", b"synced");
    storage.append("f", b"+cache").unwrap();
    let mut asked = Vec::new();
    let after = storage.crash(&mut |name: &str, synced: u64, current: u64| {
        asked.push((name.to_string(), synced, current));
        8
    });
    assert_eq!(asked, vec![("f".to_string(), 6, 12)]);
    assert_eq!(contents(&after, "f").unwrap(), b"synced+c");
    assert_eq!(contents(&storage.crash(&mut keep_synced), "f").unwrap(), b"synced");
}

#[test]
fn tear_answers_out_of_range_are_clamped() {
    let storage = durable_file("f", b"ab");
    storage.append("f", b"cd").unwrap();
    assert_eq!(contents(&storage.crash(&mut |_: &str, _, _| 0), "f").unwrap(), b"ab");
    assert_eq!(contents(&storage.crash(&mut |_: &str, _, _| 99), "f").unwrap(), b"abcd");
}

#[test]
fn fully_synced_files_are_not_offered_to_tear() {
    let storage = durable_file("f", b"ab");
    let mut calls = 0;
    let after = storage.crash(&mut |_: &str, _, current| {
        calls += 1;
        current
    });
    assert_eq!(calls, 0);
    assert_eq!(contents(&after, "f").unwrap(), b"ab");
}

#[test]
fn crash_leaves_the_original_untouched_and_the_survivor_fully_durable() {
    let storage = durable_file("f", b"ab");
    storage.append("f", b"cd").unwrap();
    let after = storage.crash(&mut keep_synced);
    assert_eq!(contents(&storage, "f").unwrap(), b"abcd");
    assert_eq!(after.synced_len("f"), Some(2));
    assert_eq!(after.pending_dir_ops(), 0);
    // A second crash of the survivor loses nothing more.
    let again = after.crash(&mut keep_synced);
    assert_eq!(contents(&again, "f").unwrap(), b"ab");
}

#[test]
fn unsynced_creation_is_undone_even_with_synced_data() {
    let storage = MemStorage::new();
    storage.create("f").unwrap();
    storage.append("f", b"data").unwrap();
    storage.sync_file("f").unwrap();
    assert_eq!(storage.pending_dir_ops(), 1);
    assert_eq!(storage.crash(&mut keep_all).file_len("f"), None);
    let kept = storage.crash_keeping_dir_ops(1, &mut keep_all);
    assert_eq!(contents(&kept, "f").unwrap(), b"data");
    storage.sync_dir().unwrap();
    assert_eq!(contents(&storage.crash(&mut keep_synced), "f").unwrap(), b"data");
}

#[test]
fn unsynced_removal_and_rename_are_undone_in_order() {
    let storage = durable_file("a", b"A");
    storage.create("b").unwrap();
    storage.append("b", b"B").unwrap();
    storage.sync_file("b").unwrap();
    storage.sync_dir().unwrap();
    storage.remove("a").unwrap();
    storage.rename("b", "a").unwrap();
    assert_eq!(storage.pending_dir_ops(), 2);
    let none = storage.crash(&mut keep_all);
    assert_eq!(contents(&none, "a").unwrap(), b"A");
    assert_eq!(contents(&none, "b").unwrap(), b"B");
    let first = storage.crash_keeping_dir_ops(1, &mut keep_all);
    assert_eq!(first.list().unwrap(), vec!["b".to_string()]);
    let both = storage.crash_keeping_dir_ops(2, &mut keep_all);
    assert_eq!(both.list().unwrap(), vec!["a".to_string()]);
    assert_eq!(contents(&both, "a").unwrap(), b"B");
    // Asking for more operations than there are keeps them all.
    assert_eq!(storage.crash_keeping_dir_ops(9, &mut keep_all).list().unwrap(), vec!["a"]);
}

#[test]
fn unsynced_truncation_of_synced_bytes_is_undone_by_a_power_loss() {
    let storage = durable_file("f", b"0123456789");
    storage.truncate("f", 4).unwrap();
    storage.append("f", b"xy").unwrap();
    assert_eq!(contents(&storage, "f").unwrap(), b"0123xy");
    let mut asked = 0;
    let after = storage.crash(&mut |_: &str, _, current| {
        asked += 1;
        current
    });
    assert_eq!(asked, 0, "the file comes back as last synced, whatever tear would say");
    assert_eq!(contents(&after, "f").unwrap(), b"0123456789");
    assert_eq!(contents(&storage.kill(), "f").unwrap(), b"0123xy", "kill -9 loses nothing");
    storage.sync_file("f").unwrap();
    assert_eq!(contents(&storage.crash(&mut keep_synced), "f").unwrap(), b"0123xy");
}

#[test]
fn kill_keeps_every_write_truncation_and_directory_operation() {
    let storage = durable_file("a", b"0123");
    storage.truncate("a", 2).unwrap();
    storage.create("b").unwrap();
    storage.append("b", b"new").unwrap();
    storage.rename("b", "c").unwrap();
    let killed = storage.kill();
    assert_eq!(killed.list().unwrap(), vec!["a".to_string(), "c".to_string()]);
    assert_eq!(contents(&killed, "a").unwrap(), b"01");
    assert_eq!(contents(&killed, "c").unwrap(), b"new");
}

#[test]
fn two_truncations_before_a_sync_restore_the_synced_bytes_in_order() {
    let storage = durable_file("f", b"0123456789");
    storage.truncate("f", 6).unwrap();
    storage.truncate("f", 2).unwrap();
    storage.append("f", b"x").unwrap();
    let after = storage.crash(&mut keep_synced);
    assert_eq!(contents(&after, "f").unwrap(), b"0123456789");
}

#[test]
fn truncation_of_unsynced_bytes_only_is_a_plain_cut() {
    let storage = durable_file("f", b"ab");
    storage.append("f", b"cdef").unwrap();
    storage.truncate("f", 3).unwrap();
    let after = storage.crash(&mut keep_all);
    assert_eq!(contents(&after, "f").unwrap(), b"abc");
}

#[test]
fn create_of_an_existing_file_empties_it_in_place() {
    let storage = durable_file("f", b"old");
    storage.create("f").unwrap();
    assert_eq!(storage.file_len("f"), Some(0));
    assert_eq!(storage.pending_dir_ops(), 0, "O_TRUNC is not a directory operation");
    // Like any unsynced truncation of synced bytes, a power loss brings the old bytes back.
    assert_eq!(contents(&storage.crash(&mut keep_synced), "f").unwrap(), b"old");
    assert_eq!(contents(&storage.kill(), "f").unwrap(), b"");
}

#[test]
fn flip_byte_corrupts_current_and_synced_bytes() {
    let storage = durable_file("f", b"abc");
    assert!(storage.flip_byte("f", 1));
    assert_eq!(contents(&storage, "f").unwrap(), vec![b'a', !b'b', b'c']);
    assert_eq!(contents(&storage.crash(&mut keep_synced), "f").unwrap()[1], !b'b');
    assert!(!storage.flip_byte("f", 3));
    assert!(!storage.flip_byte("f", u64::MAX));
    assert!(!storage.flip_byte("nope", 0));
}

#[test]
fn clones_share_files() {
    let storage = MemStorage::new();
    let clone = storage.clone();
    storage.create("f").unwrap();
    clone.append("f", b"x").unwrap();
    assert_eq!(storage.file_len("f"), Some(1));
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<MemStorage>();
}

#[test]
fn capacity_makes_appends_short_and_fail() {
    let storage = durable_file("f", b"abc");
    storage.set_capacity(Some(5));
    let error = storage.append("f", b"defg").unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::StorageFull);
    assert_eq!(contents(&storage, "f").unwrap(), b"abcde", "a short write lands");
    storage.truncate("f", 3).unwrap();
    storage.set_capacity(None);
    storage.append("f", b"defg").unwrap();
    assert_eq!(storage.file_len("f"), Some(7));
}

#[test]
fn sync_dir_frees_unreachable_inodes() {
    let storage = durable_file("f", b"abc");
    storage.remove("f").unwrap();
    assert_eq!(storage.lock().inodes.len(), 1, "a crash could still bring it back");
    storage.sync_dir().unwrap();
    assert!(storage.lock().inodes.is_empty());
    assert!(storage.crash(&mut keep_all).list().unwrap().is_empty());
}

#[test]
fn truncate_can_grow_with_zeros_like_ftruncate() {
    let storage = durable_file("f", b"ab");
    storage.truncate("f", 4).unwrap();
    assert_eq!(contents(&storage, "f").unwrap(), vec![b'a', b'b', 0, 0]);
}
