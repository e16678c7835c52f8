//! When and how far the log is purged: only while it holds more than its
//! budget (`gcache.size`), only up to a checkpoint (the log must stay
//! replayable from its start), and never past what the application has
//! released (the engine: what the local database holds durably, and never
//! at or above `gcache.freeze_purge_at_seqno`). Within that, as little as
//! brings the log back under budget: whatever is kept lets a lagging node
//! catch up by IST. Whole segments are deleted, so a purge frees up to the
//! last segment boundary at or below the chosen checkpoint.

use tandem_gcache::SegmentInfo;

use super::checkpoint::CheckpointInfo;

/// Why the log is over budget and cannot be purged (for a rate-limited log line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    /// No checkpoint at or below the released position yet.
    NotReleased { released: i64 },
}

/// The log index to purge up to (a checkpoint's), or why nothing may go.
/// `None`: within budget, nothing to do.
pub fn purge_target(
    segments: &[SegmentInfo],
    checkpoints: &[CheckpointInfo],
    purged_upto: u64,
    budget_bytes: u64,
    released: i64,
) -> Option<Result<u64, Held>> {
    let total: u64 = segments.iter().map(|s| s.bytes).sum();
    if total <= budget_bytes {
        return None;
    }
    let candidates: Vec<&CheckpointInfo> =
        checkpoints.iter().filter(|c| c.index > purged_upto && c.position <= released).collect();
    if candidates.is_empty() {
        return Some(Err(Held::NotReleased { released }));
    }
    // Bytes left on disk after purging up to `index`: segments whose last
    // record is above it stay (one may be partly purged).
    let kept = |index: u64| -> u64 {
        segments.iter().filter(|s| s.last.is_none_or(|last| last > index)).map(|s| s.bytes).sum()
    };
    let enough = candidates.iter().find(|c| kept(c.index) <= budget_bytes);
    let chosen = enough.unwrap_or_else(|| candidates.last().expect("not empty"));
    Some(Ok(chosen.index))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(first: u64, last: u64, bytes: u64) -> SegmentInfo {
        SegmentInfo { name: format!("log.{first}"), first, last: Some(last), bytes }
    }

    fn cp(index: u64, position: i64) -> CheckpointInfo {
        CheckpointInfo { index, position, time_ms: 0 }
    }

    /// Four segments of 100 bytes, indexes 1-10, 11-20, 21-30, 31-40, and a
    /// checkpoint at the end of each (positions 100, 200, ...).
    fn log() -> (Vec<SegmentInfo>, Vec<CheckpointInfo>) {
        let segments = (0..4).map(|i| seg(i * 10 + 1, i * 10 + 10, 100)).collect();
        let checkpoints = (1..=4).map(|i| cp(i * 10, i as i64 * 100)).collect();
        (segments, checkpoints)
    }

    #[test]
    fn within_budget_nothing_is_purged() {
        let (s, c) = log();
        assert_eq!(purge_target(&s, &c, 0, 400, i64::MAX), None);
    }

    #[test]
    fn over_budget_as_little_as_brings_it_back_under() {
        let (s, c) = log();
        assert_eq!(purge_target(&s, &c, 0, 300, i64::MAX), Some(Ok(10)));
        assert_eq!(purge_target(&s, &c, 0, 150, i64::MAX), Some(Ok(30)));
    }

    #[test]
    fn never_past_what_the_application_released() {
        let (s, c) = log();
        // Budget wants three segments gone; only the first is released.
        assert_eq!(purge_target(&s, &c, 0, 100, 150), Some(Ok(10)));
        assert_eq!(purge_target(&s, &c, 0, 100, 99), Some(Err(Held::NotReleased { released: 99 })));
    }

    #[test]
    fn only_up_to_a_checkpoint_beyond_the_last_purge() {
        let (s, c) = log();
        assert_eq!(purge_target(&s[1..], &c, 10, 200, i64::MAX), Some(Ok(20)));
        assert_eq!(
            purge_target(&s[3..], &c[..3], 30, 50, i64::MAX),
            Some(Err(Held::NotReleased { released: i64::MAX }))
        );
    }

    #[test]
    fn if_no_checkpoint_is_enough_purge_as_far_as_allowed() {
        let (s, c) = log();
        // Even purging up to 40 leaves the last segment (it holds 40).
        assert_eq!(purge_target(&s, &c, 0, 10, i64::MAX), Some(Ok(40)));
    }
}
