//! Galera timeouts → openraft `Config`.
//!
//! | Galera                 | Tandem `Timeouts` | openraft                                   |
//! |------------------------|-------------------|--------------------------------------------|
//! | `evs.keepalive_period` | `heartbeat`       | `heartbeat_interval`                        |
//! | `evs.suspect_timeout`  | `suspect`         | `election_timeout_max` (= leader lease)     |
//! |                        | `suspect / 2`     | `election_timeout_min` (kept > 2·heartbeat) |
//! | both, the earlier      | eviction          | (our eviction task, `evict.rs`)             |

use std::time::Duration;

use openraft::{Config, SnapshotPolicy};

use crate::{GroupError, Timeouts};

/// A snapshot is one frame; give a big one time to cross a slow link.
const INSTALL_SNAPSHOT_TIMEOUT_MS: u64 = 60_000;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The election window `(min, max)` in ms for a heartbeat and suspect timeout.
fn election_window(heartbeat_ms: u64, suspect_ms: u64) -> (u64, u64) {
    // openraft needs min > heartbeat; stay above two heartbeats so that one
    // late heartbeat never starts an election.
    let min = (suspect_ms / 2).max(2 * heartbeat_ms + 1);
    let max = suspect_ms.max(min + 1);
    (min, max)
}

pub fn raft_config(cluster: &str, t: &Timeouts) -> Result<Config, GroupError> {
    let heartbeat = millis(t.heartbeat).max(1);
    let (min, max) = election_window(heartbeat, millis(t.suspect));
    let config = Config {
        cluster_name: cluster.to_string(),
        heartbeat_interval: heartbeat,
        election_timeout_min: min,
        election_timeout_max: max,
        // A member that was cut off must not bump the term and depose a
        // healthy leader when it comes back.
        enable_pre_vote: Some(true),
        // openraft's minimum (lease + election_timeout_max): lets a connected
        // majority elect a leader while a minority leader still heartbeats.
        quorum_loss_probe_interval: Some(2 * max),
        // Snapshots are checkpoints the group's purger chooses (by bytes,
        // never past what the application released), and the log is purged
        // right up to the chosen one.
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 0,
        install_snapshot_timeout: INSTALL_SNAPSHOT_TIMEOUT_MS,
        // A restarted leader stands for election like everybody else.
        enable_leader_restore: Some(false),
        // A member whose log lost records it had acknowledged (cut outside
        // the crash model: a truncated file, a restored backup) is sent them
        // again instead of stalling its replication forever; the records
        // are still on a majority.
        allow_log_reversion: Some(true),
        ..Config::default()
    };
    config.validate().map_err(|e| GroupError::Config(format!("invalid group timeouts: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts(hb: u64, suspect: u64) -> Timeouts {
        Timeouts {
            heartbeat: Duration::from_millis(hb),
            suspect: Duration::from_millis(suspect),
            inactive: Duration::from_millis(3 * suspect),
        }
    }

    #[test]
    fn defaults_map_onto_a_valid_config() {
        let c = raft_config("c", &Timeouts::default()).unwrap();
        assert_eq!(c.heartbeat_interval, 100);
        assert_eq!((c.election_timeout_min, c.election_timeout_max), (2500, 5000));
        assert_eq!(c.quorum_loss_probe_interval, Some(10_000));
        assert_eq!(c.enable_pre_vote, Some(true));
        assert_eq!(c.snapshot_policy, SnapshotPolicy::Never);
        assert_eq!(c.max_in_snapshot_log_to_keep, 0);
    }

    #[test]
    fn test_timeouts_map_onto_a_valid_config() {
        let c = raft_config("c", &timeouts(50, 500)).unwrap();
        assert_eq!((c.heartbeat_interval, c.election_timeout_min, c.election_timeout_max), (50, 250, 500));
    }

    #[test]
    fn a_suspect_timeout_too_short_for_the_heartbeat_is_widened() {
        let c = raft_config("c", &timeouts(100, 150)).unwrap();
        assert!(c.election_timeout_min > 2 * c.heartbeat_interval);
        assert!(c.election_timeout_max > c.election_timeout_min);
    }
}
