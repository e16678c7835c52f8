//! A member's durable identity, and whether its durable state can be
//! trusted for Raft.
//!
//! Raft's crash recovery is sound only if a member never forgets what it
//! acknowledged: its vote, and every log entry it told a leader it holds.
//! A member that may have forgotten must not come back under the same id: a
//! majority counted on it. So the identity is kept only when the state it
//! comes with is intact; otherwise the member starts over as a new one (the
//! old id is evicted like any silent member) and catches up from the group.
//!
//! | what was found                                         | verdict        |
//! |--------------------------------------------------------|----------------|
//! | no identity                                            | new member     |
//! | identity of another cluster or another group address   | new member     |
//! | a corrupt record or checkpoint in the middle           | new member     |
//! | the machine rebooted and the log was not fsynced       | new member     |
//! | a torn last record after a process crash               | kept (it was never acknowledged) |
//! | a torn last record after a reboot, fsync mode          | kept (unsynced = unacknowledged) |

use serde::{Deserialize, Serialize};

use crate::MemberId;

/// Version of the identity record.
const IDENTITY_VERSION: u32 = 1;

/// What a member records about itself next to its log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityRecord {
    pub version: u32,
    pub member: MemberId,
    pub uuid: [u8; 16],
    pub incarnation: u32,
    pub cluster: String,
    /// The group address the member was reached at.
    pub group_addr: String,
    /// The kernel's boot id when the record was written: a different one
    /// means the machine restarted (the page cache is gone).
    pub boot_id: String,
    /// The log was fsynced before every acknowledgement.
    pub fsync: bool,
}

impl IdentityRecord {
    /// A new member: a random id and uuid, first incarnation.
    pub fn fresh(cluster: &str, group_addr: &str, boot_id: &str, fsync: bool) -> IdentityRecord {
        IdentityRecord {
            version: IDENTITY_VERSION,
            member: fresh_member_id(),
            uuid: fresh_uuid(),
            incarnation: 1,
            cluster: cluster.to_string(),
            group_addr: group_addr.to_string(),
            boot_id: boot_id.to_string(),
            fsync,
        }
    }

    /// The same member, one process later.
    pub fn next_incarnation(&self, boot_id: &str, fsync: bool) -> IdentityRecord {
        IdentityRecord { incarnation: self.incarnation + 1, boot_id: boot_id.to_string(), fsync, ..self.clone() }
    }

    pub fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).expect("encode identity")
    }

    pub fn decode(bytes: &[u8]) -> Result<IdentityRecord, String> {
        let record: IdentityRecord = bincode::deserialize(bytes).map_err(|e| format!("unreadable identity: {e}"))?;
        if record.version != IDENTITY_VERSION {
            return Err(format!("identity version {}, this build reads {IDENTITY_VERSION}", record.version));
        }
        Ok(record)
    }
}

/// What the log's recovery found, as far as trust goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogCondition {
    Clean,
    /// An incomplete last record was cut.
    TornTail,
    /// A damaged record or segment in the middle, or a log the checkpoints
    /// cannot rebuild the state for.
    Damaged,
}

/// Whether `record` (if any) may be used again by this process; `Err` says
/// why not, for the log.
pub fn assess(
    record: Option<&IdentityRecord>,
    log: LogCondition,
    cluster: &str,
    group_addr: &str,
    boot_id: &str,
) -> Result<(), String> {
    let Some(r) = record else {
        return Err("no durable identity".into());
    };
    if r.cluster != cluster {
        return Err(format!("the state belongs to cluster '{}', this member is in cluster '{cluster}'", r.cluster));
    }
    if r.group_addr != group_addr {
        return Err(format!(
            "the state was created for group address {}, this member is at {group_addr}",
            r.group_addr
        ));
    }
    let rebooted = !r.boot_id.is_empty() && !boot_id.is_empty() && r.boot_id != boot_id;
    if rebooted && !r.fsync {
        return Err("the machine restarted and the log was not fsynced (gcache.fsync=NO): \
                    acknowledged entries may be lost"
            .into());
    }
    match log {
        LogCondition::Clean | LogCondition::TornTail => Ok(()),
        LogCondition::Damaged => Err("the log is damaged".into()),
    }
}

/// The kernel's id of this boot; empty where there is none to read.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
}

fn fresh_member_id() -> MemberId {
    // Zero is reserved so that an unset id never looks like a member.
    loop {
        let id: MemberId = crate::entropy::next_u64();
        if id != 0 {
            return id;
        }
    }
}

/// A time-ordered uuid (RFC 9562 version 7: milliseconds since the epoch,
/// then random bits). Views list their members in uuid order, and the
/// server derives `auto_increment_offset` from a node's place in the view:
/// with Galera's time-based uuids the node started first is first, and
/// MTR's results rely on it. The random tail keeps ids from looking like
/// short text, which wsrep-lib would print as text.
fn fresh_uuid() -> [u8; 16] {
    let mut random = [0u8; 16];
    crate::entropy::fill_bytes(&mut random);
    // A seeded simulation's members are all "started" at the same moment:
    // their uuids then order as its seed says, not as the host clock does.
    let ms = if crate::entropy::seeded() {
        SEEDED_EPOCH_MS
    } else {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
    };
    uuid_v7(ms, random)
}

/// 2026-01-01T00:00:00Z, the time part of a seeded member's uuid.
const SEEDED_EPOCH_MS: u64 = 1_767_225_600_000;

fn uuid_v7(ms: u64, random: [u8; 16]) -> [u8; 16] {
    let mut b = random;
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_order_by_creation_time_whatever_their_random_bits() {
        let early = uuid_v7(1_790_000_000_000, [0xff; 16]);
        let late = uuid_v7(1_790_000_000_001, [0x00; 16]);
        assert!(early < late);
        assert_eq!(early[6] >> 4, 7, "version 7");
        assert_eq!(late[8] >> 6, 0b10, "RFC variant");
        assert_eq!(&late[..6], &1_790_000_000_001u64.to_be_bytes()[2..]);
    }

    fn record() -> IdentityRecord {
        IdentityRecord::fresh("c", "127.0.0.1:4567", "boot-a", false)
    }

    #[test]
    fn an_intact_state_of_this_member_is_kept() {
        let r = record();
        assert_eq!(assess(Some(&r), LogCondition::Clean, "c", "127.0.0.1:4567", "boot-a"), Ok(()));
        // A process crash tears at most an unacknowledged last record.
        assert_eq!(assess(Some(&r), LogCondition::TornTail, "c", "127.0.0.1:4567", "boot-a"), Ok(()));
    }

    #[test]
    fn foreign_or_damaged_state_is_not_trusted() {
        let r = record();
        assert!(assess(None, LogCondition::Clean, "c", "a", "b").unwrap_err().contains("no durable identity"));
        assert!(assess(Some(&r), LogCondition::Clean, "other", "127.0.0.1:4567", "boot-a")
            .unwrap_err()
            .contains("cluster"));
        assert!(assess(Some(&r), LogCondition::Clean, "c", "127.0.0.1:9999", "boot-a")
            .unwrap_err()
            .contains("address"));
        assert!(assess(Some(&r), LogCondition::Damaged, "c", "127.0.0.1:4567", "boot-a")
            .unwrap_err()
            .contains("damaged"));
    }

    #[test]
    fn a_reboot_voids_an_unsynced_log_but_not_a_synced_one() {
        let unsynced = record();
        let why = assess(Some(&unsynced), LogCondition::Clean, "c", "127.0.0.1:4567", "boot-b").unwrap_err();
        assert!(why.contains("restarted"), "{why}");
        let synced = IdentityRecord { fsync: true, ..record() };
        assert_eq!(assess(Some(&synced), LogCondition::TornTail, "c", "127.0.0.1:4567", "boot-b"), Ok(()));
        // Where no boot id can be read, nothing is concluded from it.
        assert_eq!(assess(Some(&unsynced), LogCondition::Clean, "c", "127.0.0.1:4567", ""), Ok(()));
    }

    #[test]
    fn records_round_trip_and_count_incarnations() {
        let r = record();
        let next = r.next_incarnation("boot-b", true);
        assert_eq!((next.member, next.uuid, next.incarnation), (r.member, r.uuid, 2));
        assert_eq!(IdentityRecord::decode(&next.encode()), Ok(next));
        assert!(IdentityRecord::decode(b"junk").is_err());
        assert_ne!(record().member, record().member, "fresh ids are random");
        assert_eq!(record().uuid[6] >> 4, 7, "uuid version 7");
    }
}
