//! How much of the ordered history this node may let its log forget.
//!
//! The log (the gcache) must keep every write-set the local database may
//! still need after a crash: everything above the position InnoDB will
//! recover to. That position is not observable while running: a commit is
//! visible before it is durable (`innodb_flush_log_at_trx_commit=0` flushes
//! once a second, `=2` leaves it to the OS). So a committed seqno is only
//! released once it has been committed for `settle_ms`, and never at or above
//! `gcache.freeze_purge_at_seqno`. The group then purges whole segments below
//! the released seqno, and only when the log exceeds `gcache.size`.

use std::collections::VecDeque;

use crate::types::Seqno;

/// How long a commit must have been visible before its write-set may leave
/// the log: well above InnoDB's one-second flush of `flush_log_at_trx_commit=0`.
pub const SETTLE_MS: u64 = 5_000;

#[derive(Debug, Clone)]
pub struct Retention {
    settle_ms: u64,
    /// (tick time, committed seqno then), oldest first; at most one sample
    /// per second is kept.
    samples: VecDeque<(u64, Seqno)>,
    /// `gcache.freeze_purge_at_seqno`: nothing at or above it is released
    /// (-1: no freeze).
    freeze_at: Seqno,
    /// What was last handed to the group.
    released: Seqno,
}

impl Retention {
    pub fn new(settle_ms: u64) -> Retention {
        Retention { settle_ms, samples: VecDeque::new(), freeze_at: -1, released: -1 }
    }

    /// `gcache.freeze_purge_at_seqno`: a seqno, or -1 to unfreeze.
    pub fn freeze(&mut self, at: Seqno) {
        self.freeze_at = at;
    }

    pub fn frozen_at(&self) -> Option<Seqno> {
        (self.freeze_at >= 0).then_some(self.freeze_at)
    }

    /// Records the committed seqno at `now_ms`; returns a new release point
    /// when it moved (forwards only: a freeze holds what is left, it cannot
    /// bring back what was purged).
    pub fn tick(&mut self, now_ms: u64, committed: Seqno) -> Option<Seqno> {
        if self.samples.back().is_none_or(|&(t, _)| now_ms >= t + 1_000) {
            self.samples.push_back((now_ms, committed));
        }
        let mut settled = None;
        while let Some(&(t, seqno)) = self.samples.front() {
            if t + self.settle_ms > now_ms {
                break;
            }
            settled = Some(seqno);
            // Keep the newest settled sample: it is the release point until a
            // newer one settles.
            if self.samples.len() > 1 && self.samples[1].0 + self.settle_ms <= now_ms {
                self.samples.pop_front();
            } else {
                break;
            }
        }
        let mut point = settled?;
        if self.freeze_at >= 0 {
            point = point.min(self.freeze_at - 1);
        }
        (point > self.released).then(|| {
            self.released = point;
            point
        })
    }
}

/// `wsrep_local_cached_downto`: the oldest seqno this node's log still
/// holds (`replay_from`), never past the next one to commit (an empty
/// log); -1 without a log.
pub fn cached_downto(replay_from: Option<Seqno>, last_committed: Seqno) -> Seqno {
    replay_from.map_or(-1, |from| from.min(last_committed + 1))
}

/// Where `gcache.freeze_purge_at_seqno=value` freezes purging, as PXC
/// defines it: `now` at the oldest seqno this node's log still holds, so
/// that a node stopped earlier can still catch up from it; a seqno only if
/// the log holds it (one purged already cannot be brought back, and one
/// not ordered yet would hold nothing now); -1 to resume purging.
/// `cached`: the seqnos the log holds, oldest and newest (None: it holds
/// none, and `now` keeps everything from the next one on).
pub fn freeze_point(value: &str, cached: Option<(Seqno, Seqno)>, next: Seqno) -> Result<Seqno, String> {
    if value.trim().eq_ignore_ascii_case("now") {
        return Ok(cached.map_or(next, |(oldest, _)| oldest));
    }
    let at: Seqno = value.trim().parse().map_err(|_| {
        format!(
            "gcache.freeze_purge_at_seqno: '{value}' is not a seqno; give a seqno in this node's gcache, now, or -1"
        )
    })?;
    match cached {
        _ if at == -1 => Ok(-1),
        Some((oldest, newest)) if (oldest..=newest).contains(&at) => Ok(at),
        Some((oldest, newest)) => Err(format!(
            "gcache.freeze_purge_at_seqno: seqno {at} is not in this node's gcache, which holds seqnos \
             {oldest}..{newest}; give a seqno in that range, now, or -1"
        )),
        None => Err(format!(
            "gcache.freeze_purge_at_seqno: seqno {at} is not in this node's gcache, which holds none; \
             give now or -1"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_reaches_down_to_its_oldest_seqno_never_past_the_next() {
        assert_eq!(cached_downto(Some(120), 480), 120);
        assert_eq!(cached_downto(Some(481), 480), 481, "an empty log: the next seqno");
        assert_eq!(cached_downto(Some(900), 480), 481, "a log purged past the data: still the next seqno");
        assert_eq!(cached_downto(None, 480), -1, "no log");
    }

    #[test]
    fn a_freeze_is_at_a_cached_seqno_now_or_nowhere() {
        let cached = Some((120, 480));
        assert_eq!(freeze_point("now", cached, 481), Ok(120), "now: the oldest seqno held, as in PXC");
        assert_eq!(freeze_point(" NOW ", None, 481), Ok(481), "nothing held: from the next seqno on");
        assert_eq!(freeze_point("120", cached, 481), Ok(120));
        assert_eq!(freeze_point("480", cached, 481), Ok(480));
        assert_eq!(freeze_point("-1", cached, 481), Ok(-1));
        assert_eq!(freeze_point("-1", None, 481), Ok(-1));
        for outside in ["119", "481", "0"] {
            let e = freeze_point(outside, cached, 481).unwrap_err();
            assert!(e.contains(&format!("seqno {outside} is not in")) && e.contains("120..480"), "{e}");
        }
        assert!(freeze_point("7", None, 481).unwrap_err().contains("holds none"));
        assert!(freeze_point("soon", cached, 481).unwrap_err().contains("'soon' is not a seqno"));
    }

    #[test]
    fn a_commit_is_released_only_after_it_settled() {
        let mut r = Retention::new(5_000);
        assert_eq!(r.tick(0, 100), None);
        assert_eq!(r.tick(1_000, 200), None);
        assert_eq!(r.tick(4_999, 300), None, "nothing has been committed for 5 s yet");
        assert_eq!(r.tick(5_000, 300), Some(100));
        assert_eq!(r.tick(5_500, 300), None, "no newer sample settled");
        assert_eq!(r.tick(6_000, 300), Some(200));
    }

    #[test]
    fn a_freeze_caps_the_release_and_never_moves_it_back() {
        let mut r = Retention::new(0);
        assert_eq!(r.tick(0, 50), Some(50));
        r.freeze(40);
        assert_eq!(r.tick(1_000, 90), None, "frozen below what was already released");
        r.freeze(80);
        assert_eq!(r.tick(2_000, 95), Some(79));
        assert_eq!(r.frozen_at(), Some(80));
        r.freeze(-1);
        assert_eq!(r.tick(3_000, 100), Some(100));
        assert_eq!(r.frozen_at(), None);
    }

    #[test]
    fn samples_stay_bounded() {
        let mut r = Retention::new(5_000);
        for s in 0..100_000u64 {
            r.tick(s * 100, s as Seqno);
        }
        assert!(r.samples.len() <= 7, "{} samples", r.samples.len());
    }
}
