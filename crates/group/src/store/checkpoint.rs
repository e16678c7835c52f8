//! Checkpoints of the replicated state, one about every segment of log.
//!
//! A checkpoint is the replica's state right after a log entry, labelled
//! with the replica's own position (the engine: its seqno). The log can be
//! replayed from any checkpoint, so the log is purged only up to one, and a
//! restart resumes from the newest checkpoint at or below the position of
//! the local data: everything after that is replayed, nothing skipped.
//! A checkpoint is written (and fsynced) before the log below it may go.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tandem_gcache::{list_blobs, read_blob, remove_blob, write_blob};

use super::disk::Disk;
use crate::raft::types::{LogId, StoredMembership};
use crate::sync::lock;

const PREFIX: &str = "checkpoint.";
const CHECKPOINT_VERSION: u8 = 1;

/// The replicated state after `log_id`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointRecord {
    pub log_id: Option<LogId>,
    pub membership: StoredMembership,
    /// The replica's position (`Replica::position`) after `log_id`.
    pub position: i64,
    /// When it was taken, in ms since the Unix epoch (how far back the log
    /// reaches in time).
    pub time_ms: u64,
    pub data: Vec<u8>,
}

impl CheckpointRecord {
    pub fn index(&self) -> u64 {
        self.log_id.map_or(0, |l| l.index)
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = vec![CHECKPOINT_VERSION];
        bincode::serialize_into(&mut out, self).expect("encode checkpoint");
        out
    }

    fn decode(bytes: &[u8]) -> Result<CheckpointRecord, String> {
        match bytes.split_first() {
            Some((&CHECKPOINT_VERSION, rest)) => bincode::deserialize(rest).map_err(|e| e.to_string()),
            Some((v, _)) => Err(format!("checkpoint version {v}, this build reads {CHECKPOINT_VERSION}")),
            None => Err("empty checkpoint".into()),
        }
    }
}

/// What is kept in memory about a checkpoint: enough to choose one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointInfo {
    pub index: u64,
    pub position: i64,
    pub time_ms: u64,
}

fn name(index: u64) -> String {
    format!("{PREFIX}{index:020}")
}

/// The checkpoints on disk, by log index.
pub struct Checkpoints {
    disk: Disk,
    known: Mutex<BTreeMap<u64, CheckpointInfo>>,
}

impl Checkpoints {
    /// Reads every checkpoint once; damaged ones are reported and removed
    /// (a checkpoint is a convenience as long as an older one and the log
    /// after it remain: the caller checks that one covers the log).
    pub fn load(disk: Disk) -> Checkpoints {
        let mut known = BTreeMap::new();
        for blob in list_blobs(&disk, PREFIX).unwrap_or_default() {
            match read_blob(&disk, &blob).map_err(|e| e.to_string()).and_then(|b| {
                b.ok_or_else(|| "vanished".to_string()).and_then(|bytes| CheckpointRecord::decode(&bytes))
            }) {
                Ok(r) => {
                    known.insert(
                        r.index(),
                        CheckpointInfo { index: r.index(), position: r.position, time_ms: r.time_ms },
                    );
                }
                Err(why) => {
                    log::warn!("Ignoring damaged checkpoint {blob} in {}: {why}", disk.describe());
                    let _ = remove_blob(&disk, &blob);
                }
            }
        }
        Checkpoints { disk, known: Mutex::new(known) }
    }

    pub fn write(&self, record: &CheckpointRecord) -> Result<(), String> {
        write_blob(&self.disk, &name(record.index()), &record.encode(), true).map_err(|e| e.to_string())?;
        let info = CheckpointInfo { index: record.index(), position: record.position, time_ms: record.time_ms };
        lock(&self.known).insert(info.index, info);
        Ok(())
    }

    pub fn read(&self, index: u64) -> Result<CheckpointRecord, String> {
        let bytes = read_blob(&self.disk, &name(index)).map_err(|e| e.to_string())?;
        CheckpointRecord::decode(&bytes.ok_or_else(|| format!("checkpoint at index {index} is missing"))?)
    }

    pub fn list(&self) -> Vec<CheckpointInfo> {
        lock(&self.known).values().copied().collect()
    }

    pub fn oldest(&self) -> Option<CheckpointInfo> {
        lock(&self.known).values().next().copied()
    }

    pub fn newest(&self) -> Option<CheckpointInfo> {
        lock(&self.known).values().next_back().copied()
    }

    /// The log up to `index` is gone: keeps the newest checkpoint at or
    /// below it (replay starts there) and removes the older ones.
    pub fn forget_below(&self, index: u64) {
        let base = lock(&self.known).range(..=index).next_back().map(|(i, _)| *i);
        let Some(base) = base else { return };
        let gone: Vec<u64> = lock(&self.known).range(..base).map(|(i, _)| *i).collect();
        for i in gone {
            if let Err(e) = remove_blob(&self.disk, &name(i)) {
                log::warn!("Could not remove checkpoint {} in {}: {e}", name(i), self.disk.describe());
                continue;
            }
            lock(&self.known).remove(&i);
        }
    }
}

/// The checkpoint to resume from: the newest at or below the position of
/// the local data (nothing after it is skipped), else the newest (the data
/// will need a state transfer anyway, so replay as little as possible).
pub fn choose_resume(checkpoints: &[CheckpointInfo], resume_at: Option<i64>) -> Option<CheckpointInfo> {
    let below = resume_at.and_then(|at| checkpoints.iter().rev().find(|c| c.position <= at));
    below.or(checkpoints.last()).copied()
}

#[cfg(test)]
mod tests {
    use tandem_gcache::MemStorage;

    use super::*;

    fn info(index: u64, position: i64) -> CheckpointInfo {
        CheckpointInfo { index, position, time_ms: 0 }
    }

    #[test]
    fn resume_from_the_newest_checkpoint_not_past_the_data() {
        let cps = [info(10, 100), info(20, 200), info(30, 300)];
        assert_eq!(choose_resume(&cps, Some(250)), Some(info(20, 200)));
        assert_eq!(choose_resume(&cps, Some(300)), Some(info(30, 300)));
        assert_eq!(choose_resume(&cps, Some(99)), Some(info(30, 300)), "too old: transfer, replay least");
        assert_eq!(choose_resume(&cps, None), Some(info(30, 300)));
        assert_eq!(choose_resume(&[], Some(5)), None);
    }

    fn record(index: u64, position: i64) -> CheckpointRecord {
        let leader = openraft::impls::leader_id_adv::LeaderId { term: 1, node_id: 1 };
        CheckpointRecord {
            log_id: Some(LogId::new(leader, index)),
            membership: StoredMembership::default(),
            position,
            time_ms: 7,
            data: vec![index as u8; 3],
        }
    }

    #[test]
    fn checkpoints_survive_a_reload_and_are_forgotten_by_range() {
        let disk = Disk::Mem(MemStorage::new());
        let cps = Checkpoints::load(disk.clone());
        for i in [5, 10, 15] {
            cps.write(&record(i, i as i64 * 10)).unwrap();
        }
        let again = Checkpoints::load(disk.clone());
        assert_eq!(again.list().iter().map(|c| c.index).collect::<Vec<_>>(), vec![5, 10, 15]);
        assert_eq!(again.read(10).unwrap().data, vec![10; 3]);
        again.forget_below(12);
        let left: Vec<u64> = Checkpoints::load(disk).list().iter().map(|c| c.index).collect();
        assert_eq!(left, vec![10, 15], "the base of the replay (10) stays");
    }

    #[test]
    fn a_damaged_checkpoint_is_dropped_not_used() {
        let mem = MemStorage::new();
        let disk = Disk::Mem(mem.clone());
        let cps = Checkpoints::load(disk.clone());
        cps.write(&record(5, 50)).unwrap();
        cps.write(&record(9, 90)).unwrap();
        assert!(mem.flip_byte(&name(9), 25));
        let again = Checkpoints::load(disk);
        assert_eq!(again.list().iter().map(|c| c.index).collect::<Vec<_>>(), vec![5]);
        assert!(again.read(9).is_err());
    }
}
