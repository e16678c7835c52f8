//! Leader-side eviction of silent members.
//!
//! The leader removes a voter or learner whose last heartbeat ack is older
//! than [`eviction_after`]. Only a leader that holds quorum evicts, so a
//! minority can never vote the majority out. One member at a time: each
//! removal is a membership change and produces a new view everywhere.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{error, info};
use openraft::{Instant as _, ServerState};

use crate::join;
use crate::raft::types::Metrics;
use crate::shared::Shared;
use crate::wire::Response;
use crate::MemberId;

pub async fn run(shared: Arc<Shared>) {
    let period = shared
        .config
        .timeouts
        .heartbeat
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    // Since when each member has been silent as far as this leader knows,
    // whatever the acks say (a new leader has no ack history, a member that
    // just joined has not been asked yet): since this member last heard it
    // (every member hears every other one, `mesh`), or else since this
    // leader first saw it in the membership. A leader elected because the
    // old one went silent removes it at once, as Galera's majority installs
    // its new view without the lost node, instead of a suspect timeout
    // after the election.
    let mut seen: HashMap<MemberId, Instant> = HashMap::new();
    loop {
        tokio::time::sleep(period).await;
        let m = shared.metrics();
        if m.state != ServerState::Leader {
            seen.clear();
            continue;
        }
        let now = Instant::now();
        let members: Vec<MemberId> = m
            .membership_config
            .membership()
            .nodes()
            .map(|(id, _)| *id)
            .collect();
        seen.retain(|id, _| members.contains(id));
        for id in &members {
            seen.entry(*id).or_insert_with(|| {
                shared
                    .net
                    .liveness
                    .since_heard(*id)
                    .and_then(|quiet| now.checked_sub(quiet))
                    .unwrap_or(now)
            });
        }
        if let Some(victim) = silent_member(&shared, &m, &seen) {
            evict(&shared, victim).await;
        }
    }
}

/// The first member (other than us) silent for longer than `inactive`.
fn silent_member(
    shared: &Shared,
    m: &Metrics,
    seen: &HashMap<MemberId, Instant>,
) -> Option<(MemberId, Duration)> {
    if !shared.is_primary() {
        return None;
    }
    // A change in flight would make ours fail; the next round retries.
    if m.membership_config.log_id() != m.committed_membership_config.log_id() {
        return None;
    }
    let acks = m.heartbeat.as_ref()?;
    let acked = |id: &MemberId| acks.get(id).and_then(|a| a.as_ref()).map(|t| t.elapsed());
    first_silent(
        m.membership_config
            .membership()
            .nodes()
            .map(|(id, _)| *id)
            .filter(|id| *id != shared.me)
            .map(|id| (id, acked(&id), seen.get(&id).map(|t| t.elapsed()))),
        eviction_after(&shared.config.timeouts),
    )
}

/// How long a member may be silent before it is removed. Galera drops a
/// member all the others suspect after `evs.suspect_timeout`, and one they
/// disagree about after the hard limit `evs.inactive_timeout`. Here the
/// leader, whose heartbeats every member acks, judges alone: there is no
/// disagreement to wait out, so the earlier of the two applies. A member
/// removed this way asks to be taken back once it reaches the group again
/// (`join::rejoin_watch`).
pub fn eviction_after(t: &crate::Timeouts) -> Duration {
    t.suspect.min(t.inactive)
}

/// Each member with how long ago it last acked (none: never) and how long
/// this leader has known it (none: not yet, so not silent).
fn first_silent(
    members: impl Iterator<Item = (MemberId, Option<Duration>, Option<Duration>)>,
    inactive: Duration,
) -> Option<(MemberId, Duration)> {
    members
        .map(|(id, acked, known)| {
            (
                id,
                acked
                    .unwrap_or(Duration::MAX)
                    .min(known.unwrap_or(Duration::ZERO)),
            )
        })
        .find(|(_, silent)| *silent > inactive)
}

async fn evict(shared: &Shared, (member, silent): (MemberId, Duration)) {
    let name = shared
        .metrics()
        .membership_config
        .membership()
        .get_node(&member)
        .map(|i| i.name.clone())
        .unwrap_or_default();
    // Notes, as Galera's view changes are: a member lost is routine for a
    // cluster, and it asks to be taken back when it can (`join::rejoin_watch`).
    info!(
        "Member {member} ({name}) silent for {silent:?}, \
         longer than the inactive timeout: evicting it"
    );
    match join::remove_member(shared, member).await {
        Response::Done => info!("Member {member} ({name}) evicted from the group"),
        // Leadership moved meanwhile: the new leader judges for itself.
        Response::NotLeader { .. } => {
            info!("Did not evict member {member} ({name}): no longer the leader")
        }
        other => error!("Could not evict member {member} ({name}): {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INACTIVE: Duration = Duration::from_secs(15);

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    #[test]
    fn a_member_that_just_joined_is_not_silent_however_long_we_have_led() {
        // Joined 0 s ago, never acked yet: the leader has led for an hour.
        assert_eq!(
            first_silent([(7, None, secs(0))].into_iter(), INACTIVE),
            None
        );
        assert_eq!(
            first_silent([(7, None, None)].into_iter(), INACTIVE),
            None,
            "not even seen yet"
        );
    }

    #[test]
    fn silence_counts_from_the_last_ack_or_from_when_we_first_saw_the_member() {
        let members = [
            (1, secs(1), secs(3600)),
            (2, None, secs(20)),
            (3, secs(30), secs(3600)),
        ];
        assert_eq!(
            first_silent(members.into_iter(), INACTIVE),
            Some((2, Duration::from_secs(20)))
        );
        // An old ack of a member that left and came back counts only from its return.
        assert_eq!(
            first_silent([(3, secs(3600), secs(5))].into_iter(), INACTIVE),
            None
        );
        assert_eq!(
            first_silent([(3, secs(3600), secs(16))].into_iter(), INACTIVE),
            Some((3, Duration::from_secs(16)))
        );
    }
}
