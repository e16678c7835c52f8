//! The purger: about once a second, if the log is over its budget, purges
//! it up to the checkpoint `purge::purge_target` chooses (through openraft,
//! which builds that checkpoint as its snapshot and purges the log up to
//! it). Says, at most once a minute, when the log has been over budget with
//! nothing allowed to go for a minute: a burst of commits stays for the few
//! seconds they take to settle, and a restarted node releases nothing until
//! it has replayed, and neither is worth a warning.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use log::warn;
use tokio::time::Instant;

use super::purge::{purge_target, Held};
use crate::shared::Shared;

const EVERY: Duration = Duration::from_secs(1);
const WARN_EVERY: Duration = Duration::from_secs(60);

pub async fn run(shared: Arc<Shared>) {
    let mut warned: Option<Instant> = None;
    let mut held_since: Option<Instant> = None;
    loop {
        crate::beat::sleep_to_next(&shared, EVERY).await;
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        let budget = shared.config.log.cache_bytes;
        let released = shared.released.load(Ordering::Acquire);
        let purged = shared.log.purged().map_or(0, |l| l.index);
        let segments = shared.log.segments();
        let target = purge_target(&segments, &shared.checkpoints.list(), purged, budget, released);
        // Since when the log has been held over its budget: a restarted
        // node releases nothing until it has replayed, which is no news.
        let held_for = match target {
            Some(Err(_)) => held_since.get_or_insert_with(Instant::now).elapsed(),
            _ => {
                held_since = None;
                Duration::ZERO
            }
        };
        match target {
            None => {}
            Some(Ok(index)) => {
                shared.sm.set_purge_to(index);
                if let Err(e) = shared.raft().trigger().snapshot().await {
                    warn!("Could not purge the group log: {e}");
                }
            }
            Some(Err(Held::NotReleased { released }))
                if held_for >= WARN_EVERY && warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) =>
            {
                warned = Some(Instant::now());
                let total: u64 = segments.iter().map(|s| s.bytes).sum();
                warn!(
                    "The group log holds {} MiB, over its budget of {} MiB (gcache.size), and nothing can \
                         be purged yet: the oldest history is still needed locally (released up to \
                         position {released}; a frozen purge or a slow local apply holds it)",
                    total >> 20,
                    budget >> 20
                );
            }
            Some(Err(Held::NotReleased { .. })) => {}
        }
    }
}
