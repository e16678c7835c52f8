//! A member's durable state: its identity, Raft vote and log (the gcache),
//! and checkpoints of the replicated state, in one directory.
//!
//! ```text
//!   <gcache.dir>/ (the data directory by default), each name ending in .<gcache.name>:
//!     identity.galera.cache                     member id, uuid, incarnation, cluster, address, boot id
//!     vote.galera.cache                         Raft vote (fsynced)
//!     committed.galera.cache, purged...         Raft log pointers
//!     group.galera.cache                        the live group the state last belonged to
//!     log.<first index>.seg.galera.cache ...    the log, one checksummed record per entry
//!     checkpoint.<index>.galera.cache ...       the replicated state after that entry
//! ```
//!
//! Opening judges whether the state can be trusted (`identity.rs`); if not,
//! its files are set aside as `untrusted.*` and the member starts anew.

pub mod checkpoint;
mod disk;
pub mod identity;
pub mod inspect;
pub mod log_store;
pub mod purge;
pub mod purger;
mod rate;

use std::sync::Arc;

use tandem_gcache::{read_blob, write_blob, Damage, LogOptions, MemStorage, SegmentLog, Storage};

use self::checkpoint::Checkpoints;
pub use self::disk::Disk;
use self::identity::{assess, boot_id, IdentityRecord, LogCondition};
use self::log_store::{DurableLog, Recovered};
use crate::raft::types::{Entry, LogId, Vote};
use crate::{GroupError, LogSettings};

pub const BLOB_IDENTITY: &str = "identity";
pub const BLOB_VOTE: &str = "vote";
pub const BLOB_COMMITTED: &str = "committed";
pub const BLOB_PURGED: &str = "purged";
/// The group uuid of the last primary component the member was in (see
/// `crate::moved_on`).
pub const BLOB_GROUP: &str = "group";
/// The voters of the last primary component the member was in (see
/// `crate::moved_on`).
pub const BLOB_VOTERS: &str = "voters";
pub(crate) const LOG_NAME: &str = "log";
/// Recent entries kept in memory, at most. What reads them is the tail:
/// the leader's replication of what it just appended, and the state
/// machine's apply of what was just committed; a member further behind
/// reads the log's segments (from the page cache, as a rule). Each node
/// held 32 MiB of them after any burst of writes, on the heap (Galera keeps
/// its recent write-sets in its mapped gcache file instead), for no gain:
/// 8 MiB is thousands of ordinary write-sets, or eight 1 MiB fragments of
/// a streamed transaction.
const RECENT_MAX_BYTES: u64 = 8 << 20;

pub fn encode_entry(e: &Entry) -> Vec<u8> {
    bincode::serialize(e).expect("encode a log entry")
}

pub fn decode_entry(bytes: &[u8]) -> Result<Entry, String> {
    bincode::deserialize(bytes).map_err(|e| format!("unreadable log entry: {e}"))
}

/// A member's durable state, opened and judged.
pub struct Opened {
    pub identity: IdentityRecord,
    /// The identity was kept from an earlier process.
    pub restored: bool,
    pub log: DurableLog,
    pub checkpoints: Arc<Checkpoints>,
    pub disk: Disk,
    /// The live group this state last belonged to, if it was ever saved.
    pub group: Option<[u8; 16]>,
    /// The voters of the last primary component this state was in, if saved.
    pub voters: Option<Vec<crate::MemberId>>,
}

/// What was read back, before judging it.
struct Found {
    identity: Option<IdentityRecord>,
    log: SegmentLog<Disk>,
    condition: LogCondition,
    problems: Vec<String>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    group: Option<[u8; 16]>,
    voters: Option<Vec<crate::MemberId>>,
    purged: Option<LogId>,
    last: Option<LogId>,
    checkpoints: Checkpoints,
}

fn config_err(dir: &str, e: impl std::fmt::Display) -> GroupError {
    GroupError::Config(format!("cannot use the group log in {dir}: {e}"))
}

fn disk_for(settings: &LogSettings) -> Result<Disk, GroupError> {
    if let Some(given) = &settings.memory {
        // Both set is a caller's mistake: one of the two would be ignored,
        // and with it every write meant for it.
        if let Some(dir) = &settings.dir {
            return Err(config_err(
                &dir.display().to_string(),
                "a given in-memory directory (LogSettings::memory) is set too; use one of the two",
            ));
        }
        return Ok(Disk::Mem(given.0.clone()));
    }
    match &settings.dir {
        Some(dir) => Disk::files(dir, &settings.name).map_err(|e| config_err(&dir.display().to_string(), e)),
        None => Ok(Disk::Mem(MemStorage::new())),
    }
}

/// Opens the state in `settings.dir` (memory if none) for a member of
/// `cluster` reached at `group_addr`; `discard` gives the caller's reason
/// not to reuse it even if it is sound.
pub fn open(
    settings: &LogSettings,
    cluster: &str,
    group_addr: &str,
    discard: Option<&str>,
) -> Result<Opened, GroupError> {
    let disk = disk_for(settings)?;
    let boot = boot_id();
    let found = read_back(&disk, settings)?;
    let verdict = match discard {
        Some(why) => Err(why.to_string()),
        None => assess(found.identity.as_ref(), found.condition, cluster, group_addr, &boot),
    };
    let (identity, restored, found, disk) = match (verdict, found.identity.clone()) {
        (Ok(()), Some(old)) => (old.next_incarnation(&boot, settings.fsync), true, found, disk),
        (Ok(()), None) => unreachable!("no identity is never trusted"),
        (Err(why), old) => {
            let had_state = old.is_some() || found.log.last_index().is_some();
            let disk = if had_state {
                // Asked for by the operator (a new cluster from data with no
                // position) is news, not a problem: MTR's log check and
                // monitoring treat warnings as trouble.
                let level = if discard.is_some() { log::Level::Info } else { log::Level::Warn };
                set_aside(&disk, settings, &why, &found.problems, level)?
            } else {
                disk
            };
            let found = read_back(&disk, settings)?;
            (IdentityRecord::fresh(cluster, group_addr, &boot, settings.fsync), false, found, disk)
        }
    };
    write_blob(&disk, BLOB_IDENTITY, &identity.encode(), true).map_err(|e| config_err(&disk.describe(), e))?;
    let checkpoints = Arc::new(found.checkpoints);
    let recovered = Recovered {
        log: found.log,
        disk: disk.clone(),
        vote: found.vote,
        committed: found.committed,
        purged: found.purged,
        last: found.last,
    };
    let recent = (settings.cache_bytes / 16).min(RECENT_MAX_BYTES) as usize;
    let log = DurableLog::new(recovered, checkpoints.clone(), settings.fsync, recent);
    Ok(Opened { identity, restored, log, checkpoints, disk, group: found.group, voters: found.voters })
}

fn blob<T: serde::de::DeserializeOwned>(disk: &Disk, name: &str, problems: &mut Vec<String>) -> Option<T> {
    match read_blob(disk, name) {
        Ok(Some(bytes)) => match bincode::deserialize(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                problems.push(format!("{name} is unreadable: {e}"));
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            problems.push(format!("{name}: {e}"));
            None
        }
    }
}

/// Reads everything back and notes what is wrong with it.
fn read_back(disk: &Disk, settings: &LogSettings) -> Result<Found, GroupError> {
    let where_ = disk.describe();
    let options = LogOptions { name: LOG_NAME.into(), segment_bytes: settings.segment_bytes };
    let opened = SegmentLog::open(disk.clone(), options).map_err(|e| config_err(&where_, e))?;
    let mut problems = vec![];
    let mut condition = match &opened.recovery.damage {
        None => LogCondition::Clean,
        Some(Damage::TornTail { segment, offset }) => {
            log::info!("Group log in {where_}: cut an incomplete last record in {segment} at offset {offset}");
            LogCondition::TornTail
        }
        Some(Damage::Corrupt { segment, offset, reason }) => {
            log::error!("Group log in {where_} is damaged in {segment} at offset {offset}: {reason}; it was cut there");
            problems.push(format!("damaged at {segment}:{offset}"));
            LogCondition::Damaged
        }
    };
    let identity = match read_blob(disk, BLOB_IDENTITY) {
        Ok(b) => b.and_then(|bytes| IdentityRecord::decode(&bytes).map_err(|e| problems.push(e)).ok()),
        Err(e) => {
            problems.push(format!("identity: {e}"));
            None
        }
    };
    let vote: Option<Vote> = blob(disk, BLOB_VOTE, &mut problems);
    // Written without fsync (it only spares a restart some waiting): torn by
    // a power loss, it reads as absent and the leader teaches it again.
    let mut ignored = vec![];
    let committed: Option<LogId> = blob::<Option<LogId>>(disk, BLOB_COMMITTED, &mut ignored).flatten();
    if let Some(why) = ignored.first() {
        log::info!("Group log in {where_}: ignoring the saved commit point ({why}); the leader will tell it again");
    }
    // As informative as the commit point (written without fsync): torn, it
    // reads as unknown and the history of the local data stands in.
    let group: Option<[u8; 16]> = blob(disk, BLOB_GROUP, &mut vec![]);
    let voters: Option<Vec<crate::MemberId>> = blob(disk, BLOB_VOTERS, &mut vec![]);
    let purged: Option<LogId> = blob::<Option<LogId>>(disk, BLOB_PURGED, &mut problems).flatten();
    let log = opened.log;
    let last = match log.last_index() {
        Some(i) if log.first_index().is_some_and(|f| f <= i) => {
            match log.read(i).map_err(|e| e.to_string()).and_then(|b| decode_entry(&b)) {
                Ok(e) => Some(e.log_id),
                Err(e) => {
                    problems.push(format!("last entry: {e}"));
                    None
                }
            }
        }
        _ => None,
    };
    if let (Some(c), Some(l)) = (committed, last) {
        if c.index > l.index {
            log::warn!(
                "Group log in {where_} ends at index {} but had acknowledged up to {}: records were lost outside \
                 a crash (a truncated file?); the leader sends them again",
                l.index,
                c.index
            );
        }
    }
    let checkpoints = Checkpoints::load(disk.clone());
    if let Some(hole) = coverage_problem(&log, purged, &checkpoints) {
        problems.push(hole);
    }
    if !problems.is_empty() {
        condition = LogCondition::Damaged;
    }
    Ok(Found { identity, log, condition, problems, vote, committed, group, voters, purged, last, checkpoints })
}

/// The log must start right after the purge point, and a checkpoint must
/// cover what was purged, or the replicated state cannot be rebuilt.
fn coverage_problem(log: &SegmentLog<Disk>, purged: Option<LogId>, checkpoints: &Checkpoints) -> Option<String> {
    let expected_first = purged.map_or(1, |p| p.index + 1);
    if let Some(first) = log.first_index().filter(|_| log.last_index().is_some()) {
        if first > expected_first {
            return Some(format!("the log starts at index {first}, after its purge point {}", expected_first - 1));
        }
    }
    let purged = purged?;
    match checkpoints.newest() {
        Some(c) if c.index >= purged.index => None,
        _ => Some(format!("no checkpoint covers the purged log (up to index {})", purged.index)),
    }
}

/// Untrusted state is renamed with this prefix (the latest is kept for
/// inspection).
pub const UNTRUSTED: &str = "untrusted.";

/// Sets untrusted state aside and returns an empty place for a new member.
fn set_aside(
    disk: &Disk,
    settings: &LogSettings,
    why: &str,
    problems: &[String],
    level: log::Level,
) -> Result<Disk, GroupError> {
    let detail = if problems.is_empty() { String::new() } else { format!(" ({})", problems.join("; ")) };
    if let Disk::Mem(_) = disk {
        log::warn!("Not reusing the in-memory group state: {why}{detail}");
        return Ok(Disk::Mem(MemStorage::new()));
    }
    log::log!(
        level,
        "Not reusing the durable state in {}: {why}{detail}. Its files are kept as {UNTRUSTED}* and this node \
         joins as a new member; its old identity is evicted by the group",
        disk.describe()
    );
    let fail = |e: std::io::Error| config_err(&disk.describe(), e);
    let names = disk.list().map_err(fail)?;
    for old in names.iter().filter(|n| n.starts_with(UNTRUSTED)) {
        disk.remove(old).map_err(fail)?;
    }
    for name in names.iter().filter(|n| !n.starts_with(UNTRUSTED)) {
        disk.rename(name, &format!("{UNTRUSTED}{name}")).map_err(fail)?;
    }
    disk.sync_dir().map_err(fail)?;
    disk_for(settings)
}

#[cfg(test)]
mod tests;
