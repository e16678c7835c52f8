//! Reading a stopped (or running) member's durable state without touching
//! it: which member it is and how far its log reaches. Tools use it to find
//! the most advanced member to bootstrap from; opening the state for real
//! would cut torn tails and set untrusted state aside.

use std::path::Path;

use tandem_gcache::{read_blob, LogOptions, MemStorage, SegmentLog, Storage};

use super::identity::{assess, boot_id, IdentityRecord, LogCondition};
use super::{decode_entry, Disk, BLOB_IDENTITY, LOG_NAME};
use crate::MemberId;

/// What a member's durable state says about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateSummary {
    pub member: MemberId,
    pub cluster: String,
    pub incarnation: u32,
    /// (term, index) of the last whole entry of the log: Raft's measure of
    /// how up to date a member is. `None`: an empty log.
    pub last: Option<(u64, u64)>,
    /// Why the member would not reuse this state at its next start (it
    /// would join as a new member), if it would not.
    pub untrusted: Option<String>,
}

/// The state in `dir` with file suffix `name` (`gcache.name`); `Ok(None)`
/// when there is none. Reads only: a copy of the last segment is opened in
/// memory, so a torn tail is skipped here and cut only by the member itself.
/// Only the newest segments are read: damage further back is found when the
/// member opens its state.
pub fn inspect(dir: &Path, name: &str) -> Result<Option<StateSummary>, String> {
    let disk = Disk::files(dir, name).map_err(|e| format!("{}: {e}", dir.display()))?;
    let identity = match read_blob(&disk, BLOB_IDENTITY) {
        Ok(None) => return Ok(None),
        Ok(Some(bytes)) => IdentityRecord::decode(&bytes)?,
        Err(e) => return Err(format!("{}: {e}", disk.describe())),
    };
    let mut segments: Vec<String> = disk
        .list()
        .map_err(|e| format!("{}: {e}", disk.describe()))?
        .into_iter()
        .filter(|n| n.starts_with(&format!("{LOG_NAME}.")) && n.ends_with(".seg"))
        .collect();
    segments.sort();
    let (mut last, mut condition) = (None, LogCondition::Clean);
    // The newest segment may hold nothing whole yet: look further back.
    for segment in segments.iter().rev() {
        let (found, damaged) = last_entry_of(&disk, segment)?;
        if damaged {
            condition = LogCondition::Damaged;
        }
        if found.is_some() {
            last = found;
            break;
        }
    }
    let untrusted = assess(Some(&identity), condition, &identity.cluster, &identity.group_addr, &boot_id()).err();
    Ok(Some(StateSummary {
        member: identity.member,
        cluster: identity.cluster,
        incarnation: identity.incarnation,
        last,
        untrusted,
    }))
}

/// The (term, index) of the last whole entry in one segment, and whether
/// the segment is damaged (not merely torn at its end).
fn last_entry_of(disk: &Disk, segment: &str) -> Result<(Option<(u64, u64)>, bool), String> {
    let len = disk.len(segment).map_err(|e| format!("{segment}: {e}"))?;
    let mut bytes = vec![0; usize::try_from(len).map_err(|_| format!("{segment}: too large"))?];
    disk.read_at(segment, 0, &mut bytes).map_err(|e| format!("{segment}: {e}"))?;
    let copy = MemStorage::new();
    copy.create(segment).and_then(|()| copy.append(segment, &bytes)).map_err(|e| e.to_string())?;
    let options = LogOptions { name: LOG_NAME.into(), segment_bytes: len.max(1 << 20) };
    let opened = SegmentLog::open(copy, options).map_err(|e| format!("{segment}: {e}"))?;
    let damaged = matches!(opened.recovery.damage, Some(tandem_gcache::Damage::Corrupt { .. }));
    let Some(index) = opened.log.last_index() else {
        return Ok((None, damaged));
    };
    let entry = opened.log.read(index).map_err(|e| e.to_string()).and_then(|b| decode_entry(&b))?;
    Ok((Some((entry.log_id.leader_id.term, entry.log_id.index)), damaged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::open;
    use crate::store::tests::append as append_entries;
    use crate::LogSettings;

    fn settings(dir: &Path) -> LogSettings {
        LogSettings { dir: Some(dir.to_path_buf()), segment_bytes: 64 << 10, ..LogSettings::default() }
    }

    #[test]
    fn no_state_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(inspect(dir.path(), "galera.cache").unwrap(), None);
    }

    #[test]
    fn reports_the_member_and_its_last_entry_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let opened = open(&settings(dir.path()), "c", "127.0.0.1:1", None).unwrap();
        let member = opened.identity.member;
        let mut log = opened.log;
        append_entries(&mut log, 3000); // several segments
        drop(log);
        let before = listing(dir.path());
        let summary = inspect(dir.path(), "galera.cache").unwrap().expect("a state");
        assert_eq!(summary.member, member);
        assert_eq!(summary.cluster, "c");
        assert_eq!(summary.last, Some((1, 3000)));
        assert_eq!(summary.untrusted, None);
        assert_eq!(listing(dir.path()), before, "inspection writes nothing");
    }

    /// A member's state holding entries 1..=20; returns its last segment file.
    fn state_of_twenty_entries(dir: &Path) -> std::path::PathBuf {
        let opened = open(&settings(dir), "c", "127.0.0.1:1", None).unwrap();
        let mut log = opened.log;
        append_entries(&mut log, 20);
        drop(log);
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(".seg."))
            .max()
            .unwrap()
    }

    #[test]
    fn a_torn_tail_is_skipped_without_being_cut() {
        let dir = tempfile::tempdir().unwrap();
        let segment = state_of_twenty_entries(dir.path());
        let len = std::fs::metadata(&segment).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&segment).unwrap().set_len(len - 3).unwrap();
        let summary = inspect(dir.path(), "galera.cache").unwrap().unwrap();
        assert_eq!(summary.last, Some((1, 19)), "the torn last entry does not count");
        assert_eq!(summary.untrusted, None, "a torn tail is not damage");
        assert_eq!(std::fs::metadata(&segment).unwrap().len(), len - 3, "and is left for the member to cut");
    }

    #[test]
    fn a_flipped_byte_is_reported_as_untrusted() {
        let dir = tempfile::tempdir().unwrap();
        let segment = state_of_twenty_entries(dir.path());
        let mut bytes = std::fs::read(&segment).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&segment, bytes).unwrap();
        let summary = inspect(dir.path(), "galera.cache").unwrap().unwrap();
        assert!(summary.untrusted.is_some_and(|why| why.contains("damaged")));
    }

    fn listing(dir: &Path) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len()))
            .collect();
        out.sort();
        out
    }
}
