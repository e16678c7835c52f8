//! The durable store: openraft's storage contract, and when an identity is
//! kept across a restart or the member starts anew.

use std::path::Path;
use std::sync::{Arc, Mutex};

use openraft::storage::RaftLogStorage;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::{EntryPayload, StorageError};
use tandem_gcache::{read_blob, write_blob};

use super::identity::IdentityRecord;
use super::*;
use crate::raft::state_machine::StateMachine;
use crate::raft::types::{AppPayload, Bytes, GroupTypes};
use crate::{Connectivity, Ordered, Replica};

struct NullReplica;

impl Replica for NullReplica {
    fn apply(&mut self, _event: Ordered<'_>) {}
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _snapshot: &[u8]) -> Result<(), String> {
        Ok(())
    }
    fn connectivity(&mut self, _now: Connectivity) {}
    fn position(&self) -> i64 {
        0
    }
}

fn settings(dir: Option<&Path>) -> LogSettings {
    LogSettings {
        dir: dir.map(Path::to_path_buf),
        cache_bytes: 1 << 20,
        segment_bytes: 64 << 10,
        ..LogSettings::default()
    }
}

struct Builder;

impl StoreBuilder<GroupTypes, DurableLog, StateMachine> for Builder {
    async fn build(&self) -> Result<((), DurableLog, StateMachine), StorageError<GroupTypes>> {
        let opened = open(&settings(None), "c", "127.0.0.1:1", None).expect("in-memory store");
        let replica: Box<dyn Replica> = Box::new(NullReplica);
        let sm = StateMachine::resume(Arc::new(Mutex::new(replica)), opened.checkpoints.clone(), 1 << 20, None)
            .expect("state machine");
        Ok(((), opened.log, sm))
    }
}

/// openraft's own conformance suite for log stores and state machines.
#[test]
fn passes_the_openraft_storage_suite() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(Suite::test_all(Builder)).expect("storage suite");
}

fn entry(term: u64, index: u64, len: usize) -> crate::raft::types::Entry {
    let leader = openraft::impls::leader_id_adv::LeaderId { term, node_id: 1 };
    crate::raft::types::Entry {
        log_id: LogId::new(leader, index),
        payload: EntryPayload::Normal(AppPayload { origin: 1, bytes: Bytes::from(vec![index as u8; len]) }),
    }
}

/// Appends entries 1..=n through openraft's interface.
pub(super) fn append(log: &mut DurableLog, n: u64) {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let entries: Vec<_> = (1..=n).map(|i| entry(1, i, 100)).collect();
        log.append(entries, openraft::storage::IOFlushed::noop()).await.unwrap();
    });
}

const ADDR: &str = "127.0.0.1:4567";

#[test]
fn a_member_keeps_its_identity_and_log_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    assert!(!first.restored);
    let (member, uuid) = (first.identity.member, first.identity.uuid);
    let mut log = first.log;
    append(&mut log, 50);
    drop(log);
    let second = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    assert!(second.restored);
    assert_eq!((second.identity.member, second.identity.uuid, second.identity.incarnation), (member, uuid, 2));
    assert_eq!(second.log.vote_and_last().1.map(|l| l.index), Some(50), "the log came back");
}

/// A directory and a given in-memory one at once: refused, naming both,
/// rather than one of them silently unused.
#[test]
fn a_directory_and_a_given_memory_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let both = LogSettings { memory: Some(crate::GivenDisk(MemStorage::new())), ..settings(Some(dir.path())) };
    let err = open(&both, "c", "127.0.0.1:1", None).err().expect("refused");
    let text = err.to_string();
    assert!(text.contains(&dir.path().display().to_string()) && text.contains("LogSettings::memory"), "{text}");
    let alone = LogSettings { memory: Some(crate::GivenDisk(MemStorage::new())), ..settings(None) };
    assert!(open(&alone, "c", "127.0.0.1:1", None).is_ok(), "the given memory alone is used");
}

#[test]
fn another_cluster_or_address_gets_a_new_identity() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    let member = first.identity.member;
    drop(first);
    let other = open(&settings(Some(dir.path())), "other", ADDR, None).unwrap();
    assert!(!other.restored);
    assert_ne!(other.identity.member, member);
    let moved = open(&settings(Some(dir.path())), "other", "127.0.0.1:9999", None).unwrap();
    assert!(!moved.restored);
}

#[test]
fn a_reboot_without_fsync_voids_the_identity_and_moves_the_state_aside() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_path_buf();
    let first = open(&settings(Some(&state)), "c", ADDR, None).unwrap();
    let mut log = first.log;
    append(&mut log, 10);
    drop(log);
    // As if written before a reboot of the machine.
    let disk = Disk::files(&state, "galera.cache").unwrap();
    let mut record = IdentityRecord::decode(&read_blob(&disk, BLOB_IDENTITY).unwrap().unwrap()).unwrap();
    record.boot_id = "an-earlier-boot".into();
    write_blob(&disk, BLOB_IDENTITY, &record.encode(), true).unwrap();
    let again = open(&settings(Some(&state)), "c", ADDR, None).unwrap();
    assert!(!again.restored);
    assert_eq!(again.log.vote_and_last().1, None, "starts with an empty log");
    assert!(dir.path().join(format!("{UNTRUSTED}{BLOB_IDENTITY}.galera.cache")).exists(), "kept for inspection");
    assert!(dir.path().join(format!("{BLOB_IDENTITY}.galera.cache")).exists(), "and a new identity");
}

#[test]
fn a_sound_state_is_set_aside_when_the_caller_starts_anew() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    let member = first.identity.member;
    let mut log = first.log;
    append(&mut log, 10);
    drop(log);
    let again = open(&settings(Some(dir.path())), "c", ADDR, Some("a new history")).unwrap();
    assert!(!again.restored);
    assert_ne!(again.identity.member, member, "a new member");
    assert_eq!(again.log.vote_and_last().1, None, "with an empty log");
    let kept = std::fs::read_dir(dir.path())
        .unwrap()
        .any(|e| e.unwrap().file_name().to_string_lossy().starts_with(&format!("{UNTRUSTED}{LOG_NAME}.")));
    assert!(kept, "the old log is kept for inspection");
}

#[test]
fn a_torn_commit_pointer_is_ignored_and_the_state_kept() {
    // It is written without fsync: a power loss may leave garbage.
    let dir = tempfile::tempdir().unwrap();
    let first = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    let member = first.identity.member;
    let mut log = first.log;
    append(&mut log, 10);
    drop(log);
    let committed = dir.path().join(format!("{BLOB_COMMITTED}.galera.cache"));
    std::fs::write(&committed, b"\x07torn").unwrap();
    let again = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    assert!(again.restored, "the state is trusted");
    assert_eq!(again.identity.member, member);
    assert_eq!(again.log.vote_and_last().1.map(|l| l.index), Some(10), "the log came back");
}

#[test]
fn a_damaged_log_voids_the_identity() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    let mut log = first.log;
    append(&mut log, 2000); // several segments
    drop(log);
    let segment = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".seg.galera.cache"))
        .min()
        .unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[200] ^= 0xff;
    std::fs::write(&segment, bytes).unwrap();
    let again = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    assert!(!again.restored, "a flipped byte in the middle is not a torn tail");
}

#[test]
fn a_purged_log_without_a_checkpoint_voids_the_identity() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    let mut log = first.log;
    append(&mut log, 100);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(log.purge(entry(1, 40, 0).log_id)).unwrap();
    drop(log);
    let again = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    assert!(!again.restored, "nothing could rebuild the state before index 41");
}

/// What a member catching up reads from another's log (`crate::catch_up`):
/// committed entries only, bounded by bytes but at least one, nothing from
/// a purged or uncommitted index; and what it appends comes back after a
/// restart, committed, so that openraft replays it at start.
#[test]
fn a_catching_up_member_reads_committed_entries_and_keeps_what_it_appends() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let donor = open(&settings(None), "c", ADDR, None).unwrap();
    let mut log = donor.log;
    append(&mut log, 50);
    let committed = |i| Some(LogId::new(openraft::impls::leader_id_adv::LeaderId { term: 1, node_id: 1 }, i));
    rt.block_on(log.save_committed(committed(40))).unwrap();
    assert_eq!(log.committed_range(), (Some(1), committed(40)));
    let (all, said) = log.committed_entries(30, 1 << 20).unwrap();
    assert_eq!((all.len(), said), (11, committed(40)), "30..=40: nothing past the commit");
    let (two, _) = log.committed_entries(30, 1).unwrap();
    assert_eq!(two.len(), 2, "the asker's own last entry and a new one, however small the budget");
    assert_eq!(log.committed_entries(40, 1 << 20).unwrap().0.len(), 1, "nothing new past the commit");
    let indexes: Vec<u64> = all.iter().map(|b| decode_entry(b).unwrap().log_id.index).collect();
    assert_eq!(indexes, (30..=40).collect::<Vec<_>>(), "as stored, in order");
    let three = all[1..4].iter().map(Vec::len).sum::<usize>();
    assert_eq!(log.committed_entries(30, three).unwrap().0, all[..4], "no more than the budget after the first");
    assert!(log.committed_entries(41, 1 << 20).unwrap().0.is_empty(), "41 is not committed");

    let dir = tempfile::tempdir().unwrap();
    let joiner = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    let mut mine = joiner.log;
    append(&mut mine, 30);
    let fetched: Vec<_> = all[1..].iter().map(|b| decode_entry(b).unwrap()).collect();
    mine.append_caught_up(fetched).unwrap();
    drop(mine);
    let again = open(&settings(Some(dir.path())), "c", ADDR, None).unwrap();
    let mut mine = again.log;
    assert_eq!(mine.vote_and_last().1, committed(40), "the caught-up entries came back");
    assert_eq!(rt.block_on(mine.read_committed()).unwrap(), committed(40), "as committed");
}
