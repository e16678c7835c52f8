//! One member's durable group state in its own `MemStorage`, kept the way
//! the group's store keeps it on disk (`crates/group/src/store`):
//!
//! ```text
//!   log.<first>.seg ...   one checksummed record per Raft entry (SegmentLog)
//!   checkpoint.<index>    the replicated state after that entry (fsynced blob)
//!   purged                the index the log was purged up to (fsynced blob)
//!   committed             the last commit index heard of (blob, not fsynced)
//! ```
//!
//! Reopening after a crash runs the real gcache recovery and judges the
//! result as `store::open` does: a corrupt record, an unreadable blob, or a
//! log that the checkpoints cannot rebuild the state for makes the state
//! untrusted (the member starts over under a new identity); a torn tail is
//! cut and the state kept (what was torn had never been acknowledged).
//!
//! In memory we mirror the term of every entry (Raft's log matching needs
//! it on every replication step) and the memberships in the log.

use std::collections::BTreeMap;

use tandem_engine::types::Seqno;
use tandem_gcache::{
    list_blobs, read_blob, remove_blob, write_blob, Damage, LogOptions, MemStorage, SegmentInfo, SegmentLog,
};
use tandem_group::Membership;

use super::record::{Checkpoint, Event, Record};

const LOG_NAME: &str = "log";
const CHECKPOINT_PREFIX: &str = "checkpoint.";
const BLOB_PURGED: &str = "purged";
const BLOB_COMMITTED: &str = "committed";

pub struct Disk {
    log: SegmentLog<MemStorage>,
    /// The log was purged up to here (0: never); its term is `base_term`.
    base: u64,
    base_term: u64,
    /// Terms of the entries base+1..=last.
    terms: Vec<u64>,
    /// Entries up to here are fsynced (what a power loss cannot take).
    synced: u64,
    /// Memberships by index: those in the log, and the one in force at
    /// `base`.
    configs: BTreeMap<u64, Membership>,
    /// Checkpoints on disk: index -> position.
    checkpoints: BTreeMap<u64, Seqno>,
    /// The commit index read back at reopen (0 for a fresh disk).
    pub saved_commit: u64,
}

fn checkpoint_name(index: u64) -> String {
    format!("{CHECKPOINT_PREFIX}{index:020}")
}

fn options(segment_bytes: u64) -> LogOptions {
    LogOptions { name: LOG_NAME.into(), segment_bytes }
}

fn blob_u64(storage: &MemStorage, name: &str) -> Result<u64, String> {
    match read_blob(storage, name).map_err(|e| format!("{name}: {e}"))? {
        None => Ok(0),
        Some(bytes) => bincode::deserialize(&bytes).map_err(|e| format!("{name} is unreadable: {e}")),
    }
}

impl Disk {
    /// An empty directory: a new member.
    pub fn fresh(segment_bytes: u64) -> Disk {
        Disk::reopen(MemStorage::new(), segment_bytes).expect("an empty directory is trusted")
    }

    /// Opens what a crash left; `Err` says why it cannot be trusted. An
    /// unreadable `committed` blob reads as absent, as in `store::read_back`
    /// (it only speeds up a restart: the leader tells the commit index again).
    pub fn reopen(storage: MemStorage, segment_bytes: u64) -> Result<Disk, String> {
        let opened = SegmentLog::open(storage, options(segment_bytes)).map_err(|e| e.to_string())?;
        if let Some(Damage::Corrupt { segment, offset, reason }) = &opened.recovery.damage {
            return Err(format!("log damaged in {segment} at {offset}: {reason}"));
        }
        let log = opened.log;
        let storage = log.storage().clone();
        let base = blob_u64(&storage, BLOB_PURGED)?;
        let committed = blob_u64(&storage, BLOB_COMMITTED).unwrap_or(0);
        let checkpoints = load_checkpoints(&storage);
        check_coverage(&log, base, &checkpoints)?;
        let mut disk = Disk {
            log,
            base,
            base_term: 0,
            terms: vec![],
            synced: 0,
            configs: BTreeMap::new(),
            checkpoints,
            saved_commit: 0,
        };
        disk.rebuild_mirror()?;
        disk.saved_commit = committed.min(disk.last());
        Ok(disk)
    }

    /// Terms and memberships from the base checkpoint and the records.
    fn rebuild_mirror(&mut self) -> Result<(), String> {
        if self.base > 0 {
            let cp = self.read_checkpoint(self.base)?;
            self.base_term = cp.term;
            self.configs.extend(cp.config.map(|c| (self.base, c)));
        }
        let Some(last) = self.log.last_index().filter(|&l| l > self.base) else {
            self.synced = self.base;
            return Ok(());
        };
        for (index, bytes) in self.log.read_range(self.base + 1, last, usize::MAX).map_err(|e| e.to_string())? {
            let record = Record::decode(&bytes)?;
            self.note(index, &record);
        }
        self.synced = self.last();
        Ok(())
    }

    fn note(&mut self, index: u64, record: &Record) {
        assert_eq!(index, self.last() + 1, "records come in index order");
        self.terms.push(record.term);
        self.note_config(index, record);
    }

    fn note_config(&mut self, index: u64, record: &Record) {
        if let Event::Membership(m) = &record.event {
            self.configs.insert(index, m.clone());
        }
    }

    pub fn storage(&self) -> &MemStorage {
        self.log.storage()
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn last(&self) -> u64 {
        self.base + self.terms.len() as u64
    }

    /// The term at `index`, if the log can tell (the base counts: its term
    /// came with its checkpoint; index 0 is the empty prefix).
    pub fn term_at(&self, index: u64) -> Option<u64> {
        if index == self.base {
            return Some(self.base_term);
        }
        if index < self.base || index > self.last() {
            return None;
        }
        Some(self.terms[(index - self.base - 1) as usize])
    }

    pub fn last_term(&self) -> u64 {
        self.term_at(self.last()).expect("the last index has a term")
    }

    /// What this member has acknowledged: fsynced entries, or (without
    /// `gcache.fsync`) every entry written to the OS.
    pub fn acked(&self, fsync: bool) -> u64 {
        if fsync {
            self.synced.min(self.last())
        } else {
            self.last()
        }
    }

    /// The membership in force now, and at `index`.
    pub fn config(&self) -> Option<&Membership> {
        self.configs.values().next_back()
    }

    /// Where the membership in force was appended (or the base).
    pub fn config_index(&self) -> Option<u64> {
        self.configs.keys().next_back().copied()
    }

    pub fn config_at(&self, index: u64) -> Option<&Membership> {
        self.configs.range(..=index).next_back().map(|(_, m)| m)
    }

    /// Appends encoded records (the leader's bytes, as replicated).
    pub fn append(&mut self, records: &[(u64, Vec<u8>)]) -> Result<(), String> {
        let first = self.last() + 1;
        let items = records.iter().enumerate().map(|(i, (_, b))| (first + i as u64, b.as_slice()));
        self.log.append(items).map_err(|e| e.to_string())?;
        for (i, (term, bytes)) in records.iter().enumerate() {
            self.terms.push(*term);
            if Record::is_membership(bytes) {
                self.note_config(first + i as u64, &Record::decode(bytes)?);
            }
        }
        Ok(())
    }

    /// Raft's conflict resolution: drops every entry after `index`
    /// (durably, before it returns).
    pub fn truncate_after(&mut self, index: u64) -> Result<(), String> {
        assert!(index >= self.base, "nothing at or below the purge point is ever cut");
        self.log.truncate_after(Some(index)).map_err(|e| e.to_string())?;
        self.terms.truncate((index - self.base) as usize);
        self.synced = self.synced.min(index);
        self.configs.retain(|&i, _| i <= index);
        Ok(())
    }

    pub fn sync(&mut self) -> Result<(), String> {
        self.log.sync().map_err(|e| e.to_string())?;
        self.synced = self.last();
        Ok(())
    }

    /// Records from..=to, encoded, checksum-verified by the gcache.
    pub fn read_range(&self, from: u64, to: u64) -> Result<Vec<(u64, Vec<u8>)>, String> {
        self.log.read_range(from, to, usize::MAX).map_err(|e| e.to_string())
    }

    /// Saved at most once a second and not fsynced, as the store does.
    pub fn save_commit(&mut self, commit: u64) -> Result<(), String> {
        let bytes = bincode::serialize(&commit).expect("encode an index");
        write_blob(self.storage(), BLOB_COMMITTED, &bytes, false).map_err(|e| e.to_string())
    }

    // ---- checkpoints ------------------------------------------------------

    /// On disk (fsynced) before anything may rely on it.
    pub fn write_checkpoint(&mut self, cp: &Checkpoint) -> Result<(), String> {
        write_blob(self.storage(), &checkpoint_name(cp.index), &cp.encode(), true).map_err(|e| e.to_string())?;
        self.checkpoints.insert(cp.index, cp.position);
        Ok(())
    }

    pub fn read_checkpoint(&self, index: u64) -> Result<Checkpoint, String> {
        let bytes = read_blob(self.storage(), &checkpoint_name(index)).map_err(|e| e.to_string())?;
        Checkpoint::decode(&bytes.ok_or_else(|| format!("checkpoint {index} is missing"))?)
    }

    pub fn has_checkpoints(&self) -> bool {
        !self.checkpoints.is_empty()
    }

    /// `checkpoint::choose_resume`: the newest at or below the data's
    /// position (nothing after it is skipped), else the newest.
    pub fn choose_resume(&self, at: Option<Seqno>) -> Option<(u64, Seqno)> {
        let below = at.and_then(|at| self.checkpoints.iter().rev().find(|(_, &p)| p <= at));
        below.or(self.checkpoints.iter().next_back()).map(|(&i, &p)| (i, p))
    }

    /// What the leader sends a follower that lacks the purged log: its
    /// oldest checkpoint (`get_current_snapshot`).
    pub fn oldest_checkpoint(&self) -> Option<u64> {
        self.checkpoints.keys().next().copied()
    }

    // ---- purge and snapshot install ---------------------------------------

    /// The purger: over `budget_bytes`, purge up to a checkpoint at or below
    /// what the application released (`store::purge::purge_target`), and
    /// never past what the state machine applied (openraft purges up to a
    /// snapshot of the applied state).
    pub fn purge_if_over(&mut self, budget_bytes: u64, released: Seqno, applied: u64) -> Result<Option<u64>, String> {
        let candidates: Vec<(u64, Seqno)> = self.checkpoints.range(..=applied).map(|(&i, &p)| (i, p)).collect();
        let Some(index) = purge_target(&self.log.segments(), &candidates, self.base, budget_bytes, released) else {
            return Ok(None);
        };
        self.purge(index)?;
        Ok(Some(index))
    }

    /// The purge point first (fsynced), then the log, then the checkpoints
    /// below the new base: a crash never leaves a log that starts after its
    /// purge point without a checkpoint there.
    fn purge(&mut self, index: u64) -> Result<(), String> {
        assert!(index > self.base && index <= self.last(), "purge within the log");
        let term = self.term_at(index).expect("in the log");
        let bytes = bincode::serialize(&index).expect("encode an index");
        write_blob(self.storage(), BLOB_PURGED, &bytes, true).map_err(|e| e.to_string())?;
        self.log.purge_upto(index).map_err(|e| e.to_string())?;
        self.terms.drain(..(index - self.base) as usize);
        self.base = index;
        self.base_term = term;
        let in_force = self.config_at(index).cloned();
        self.configs.retain(|&i, _| i > index);
        self.configs.extend(in_force.map(|c| (index, c)));
        self.forget_checkpoints_below(index);
        Ok(())
    }

    fn forget_checkpoints_below(&mut self, index: u64) {
        let gone: Vec<u64> = self.checkpoints.range(..index).map(|(&i, _)| i).collect();
        for i in gone {
            remove_blob(self.storage(), &checkpoint_name(i)).expect("remove a checkpoint");
            self.checkpoints.remove(&i);
        }
    }

    /// A follower that lacks what the leader purged: the leader's checkpoint
    /// replaces the whole log (`install_snapshot`, then `purge` past the end).
    pub fn install(&mut self, cp: &Checkpoint) -> Result<(), String> {
        self.write_checkpoint(cp)?;
        let bytes = bincode::serialize(&cp.index).expect("encode an index");
        write_blob(self.storage(), BLOB_PURGED, &bytes, true).map_err(|e| e.to_string())?;
        self.log.truncate_after(None).map_err(|e| e.to_string())?;
        self.terms.clear();
        self.base = cp.index;
        self.base_term = cp.term;
        self.synced = cp.index;
        self.configs.clear();
        self.configs.extend(cp.config.clone().map(|c| (cp.index, c)));
        self.forget_checkpoints_below(cp.index);
        Ok(())
    }

    /// Names of the segment files (where a flipped byte can land).
    pub fn segment_names(storage: &MemStorage) -> Vec<String> {
        let mut names: Vec<String> = tandem_gcache::Storage::list(storage)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.starts_with(LOG_NAME) && n.ends_with(".seg"))
            .collect();
        names.sort();
        names
    }
}

/// Damaged checkpoints are dropped, not used (`Checkpoints::load`).
fn load_checkpoints(storage: &MemStorage) -> BTreeMap<u64, Seqno> {
    let mut known = BTreeMap::new();
    for name in list_blobs(storage, CHECKPOINT_PREFIX).unwrap_or_default() {
        let read = read_blob(storage, &name).map_err(|e| e.to_string());
        match read.and_then(|b| Checkpoint::decode(&b.ok_or("vanished")?)) {
            Ok(cp) => {
                known.insert(cp.index, cp.position);
            }
            Err(_) => {
                let _ = remove_blob(storage, &name);
            }
        }
    }
    known
}

/// `store::coverage_problem`: the log must start right after the purge
/// point, and a checkpoint must cover what was purged.
fn check_coverage(log: &SegmentLog<MemStorage>, base: u64, checkpoints: &BTreeMap<u64, Seqno>) -> Result<(), String> {
    if let (Some(first), Some(_)) = (log.first_index(), log.last_index()) {
        if first > base + 1 {
            return Err(format!("the log starts at index {first}, after its purge point {base}"));
        }
    }
    if base > 0 && checkpoints.keys().next_back().is_none_or(|&i| i < base) {
        return Err(format!("no checkpoint covers the purged log (up to index {base})"));
    }
    Ok(())
}

/// `store::purge::purge_target`, over this model's checkpoints (index,
/// position): the checkpoint to purge up to, when over budget and allowed.
fn purge_target(
    segments: &[SegmentInfo],
    checkpoints: &[(u64, Seqno)],
    purged_upto: u64,
    budget_bytes: u64,
    released: Seqno,
) -> Option<u64> {
    let total: u64 = segments.iter().map(|s| s.bytes).sum();
    if total <= budget_bytes {
        return None;
    }
    let candidates: Vec<u64> =
        checkpoints.iter().filter(|&&(i, p)| i > purged_upto && p <= released).map(|&(i, _)| i).collect();
    let kept = |index: u64| -> u64 {
        segments.iter().filter(|s| s.last.is_none_or(|last| last > index)).map(|s| s.bytes).sum()
    };
    let enough = candidates.iter().find(|&&i| kept(i) <= budget_bytes);
    enough.or(candidates.last()).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEGMENT: u64 = 512;

    fn record(term: u64, n: u8) -> (u64, Vec<u8>) {
        (term, Record { term, event: Event::Message { origin: 1, payload: vec![n; 100] } }.encode())
    }

    /// `n` entries of term 1, fsynced up to `synced`, a checkpoint after
    /// each fourth (position = index).
    fn disk_with(n: u8, synced: u8) -> Disk {
        let mut disk = Disk::fresh(SEGMENT);
        for i in 1..=n {
            disk.append(&[record(1, i)]).unwrap();
            if i == synced {
                disk.sync().unwrap();
            }
            if i % 4 == 0 {
                let cp = Checkpoint { index: i as u64, term: 1, position: i as Seqno, config: None, state: vec![] };
                disk.write_checkpoint(&cp).unwrap();
            }
        }
        disk
    }

    #[test]
    fn a_power_loss_cuts_only_the_unsynced_tail_and_the_state_is_kept() {
        let disk = disk_with(10, 6);
        let after = disk.storage().crash(&mut |_, synced, _| synced);
        let reopened = Disk::reopen(after, SEGMENT).expect("a torn tail is trusted");
        // Sealing a segment fsyncs it too: more than the last sync may stay.
        assert!(
            (6..10).contains(&reopened.last()),
            "fsynced entries stay, the unsynced tail goes: {}",
            reopened.last()
        );
        assert_eq!(reopened.term_at(6), Some(1));
    }

    #[test]
    fn a_flipped_byte_makes_the_state_untrusted() {
        let disk = disk_with(10, 10);
        let storage = disk.storage().kill();
        let first = Disk::segment_names(&storage)[0].clone();
        assert!(storage.flip_byte(&first, 100));
        let why = Disk::reopen(storage, SEGMENT).err().expect("corruption is never trusted");
        assert!(why.contains("damaged"), "{why}");
    }

    #[test]
    fn a_torn_commit_pointer_reads_as_absent() {
        let mut disk = disk_with(8, 8);
        disk.save_commit(8).unwrap();
        // A checkpoint makes the pointer's rename durable, not its bytes.
        let cp = Checkpoint { index: 8, term: 1, position: 9, config: None, state: vec![] };
        disk.write_checkpoint(&cp).unwrap();
        let after = disk.storage().crash(&mut |name, synced, current| {
            if name == BLOB_COMMITTED {
                3
            } else {
                current.max(synced)
            }
        });
        let kept = Disk::reopen(after, SEGMENT).expect("the pointer only speeds up a restart");
        assert_eq!((kept.saved_commit, kept.last()), (0, 8));
    }

    #[test]
    fn a_purge_keeps_the_checkpoint_it_stops_at_and_survives_a_reopen() {
        let mut disk = disk_with(20, 20);
        assert_eq!(disk.purge_if_over(0, 13, 20).unwrap(), Some(12), "the newest checkpoint at or below 13");
        assert_eq!(disk.choose_resume(Some(15)), Some((12, 12)));
        let reopened = Disk::reopen(disk.storage().kill(), SEGMENT).unwrap();
        assert_eq!((reopened.base(), reopened.last(), reopened.term_at(12)), (12, 20, Some(1)));
        assert_eq!(reopened.choose_resume(Some(3)), Some((20, 20)), "nothing at or below: the newest");
    }

    #[test]
    fn a_snapshot_replaces_the_whole_log() {
        let mut disk = disk_with(6, 6);
        let cp = Checkpoint { index: 30, term: 2, position: 25, config: None, state: vec![] };
        disk.install(&cp).unwrap();
        assert_eq!((disk.base(), disk.last(), disk.last_term()), (30, 30, 2));
        disk.append(&[record(2, 31)]).unwrap();
        let reopened = Disk::reopen(disk.storage().kill(), SEGMENT).unwrap();
        assert_eq!((reopened.base(), reopened.last(), reopened.choose_resume(Some(100))), (30, 31, Some((30, 25))));
    }
}
