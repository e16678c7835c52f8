//! Leader-side eviction of silent members.
//!
//! The leader removes a member silent for longer than [`eviction_after`]:
//! neither its heartbeat acks nor anything else it sent reached us. A member
//! still heard on the network whose Raft does not ack (it is installing a
//! large snapshot, or its disk stalls) is busy, not gone: it goes only after
//! the hard limit [`unresponsive_after`]. Only a leader that holds quorum
//! evicts, so a minority can never vote the majority out. One member at a
//! time: each removal is a membership change and produces a new view
//! everywhere.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use log::{error, info};
use openraft::{Instant as _, ServerState};
use tokio::time::Instant;

use crate::join;
use crate::raft::types::Metrics;
use crate::shared::Shared;
use crate::wire::Response;
use crate::MemberId;

pub async fn run(shared: Arc<Shared>) {
    let period = shared.config.timeouts.heartbeat.clamp(Duration::from_millis(10), Duration::from_secs(1));
    // Since when each member has been silent as far as this leader knows,
    // whatever the acks say (a new leader has no ack history, a member that
    // just joined has not been asked yet): since this member last heard it
    // (every member hears every other one, `mesh`), or else since this
    // leader first saw it in the membership. A leader elected because the
    // old one went silent removes it at once, as Galera's majority installs
    // its new view without the lost node, instead of a suspect timeout
    // after the election.
    let mut seen: BTreeMap<MemberId, Instant> = BTreeMap::new();
    // Since when this member has run without a stall (see `asleep_itself`):
    // no silence is counted from before it.
    let mut awake_since = Instant::now();
    loop {
        let before = Instant::now();
        crate::beat::sleep_to_next(&shared, period).await;
        let slept = before.elapsed();
        let defect = crate::injected::active(crate::injected::Defect::CountsItsOwnStallAsSilence);
        if asleep_itself(slept, period, &shared.config.timeouts) && !defect {
            info!(
                "This member's clock moved on {slept:?} between two looks at the others' silence \
                 (it was stopped, or its clock jumped): counting their silence from now"
            );
            awake_since = Instant::now();
            seen.values_mut().for_each(|since| *since = awake_since);
        }
        if !shared.raft().is_leader() {
            seen.clear();
            continue;
        }
        let m = shared.metrics();
        if m.state != ServerState::Leader {
            seen.clear();
            continue;
        }
        let now = Instant::now();
        let members: Vec<MemberId> = m.membership_config.membership().nodes().map(|(id, _)| *id).collect();
        seen.retain(|id, _| members.contains(id));
        for id in &members {
            seen.entry(*id).or_insert_with(|| {
                let heard = shared.net.liveness.since_heard(*id).and_then(|quiet| now.checked_sub(quiet));
                heard.unwrap_or(now).max(awake_since)
            });
        }
        if let Some(victim) = silent_member(&shared, &m, &seen) {
            evict(&shared, victim).await;
        }
    }
}

/// Whether this member was itself stopped between two looks: it slept
/// `slept` waiting for a look due within `period`, more than half the
/// eviction timeout too long. A leader frozen meanwhile (SIGSTOP, a VM paused, a
/// long stall), or whose clock jumped ahead, would otherwise take every
/// member's acks for that old, since nothing was heard while it did not
/// run, and evict members that are fine (found by the group simulation's
/// clock jumps). Only what they leave unanswered from now on counts.
fn asleep_itself(slept: Duration, period: Duration, t: &crate::Timeouts) -> bool {
    slept > period + eviction_after(t) / 2
}

/// The first member (other than us) to evict, with how long it was silent.
fn silent_member(shared: &Shared, m: &Metrics, seen: &BTreeMap<MemberId, Instant>) -> Option<(MemberId, Duration)> {
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
        m.membership_config.membership().nodes().map(|(id, _)| *id).filter(|id| *id != shared.me).map(|id| Quiet {
            id,
            acked: acked(&id),
            known: seen.get(&id).map(|t| t.elapsed()),
            heard: shared.net.liveness.since_heard(id),
        }),
        &shared.config.timeouts,
    )
}

/// What the leader knows of one member's silence.
#[derive(Clone, Copy, Debug)]
struct Quiet {
    id: MemberId,
    /// Since its last heartbeat ack (none: never acked).
    acked: Option<Duration>,
    /// Since this leader first knew it (none: not yet, so not silent).
    known: Option<Duration>,
    /// Since anything of it reached us: a request it sent, an answer to
    /// ours (none: never).
    heard: Option<Duration>,
}

impl Quiet {
    /// How long its Raft has not acked, counted from when we knew it: an
    /// old ack of a member that left and came back counts from its return.
    fn unacked(&self) -> Duration {
        self.acked.unwrap_or(Duration::MAX).min(self.known.unwrap_or(Duration::ZERO))
    }

    /// How long nothing of it reached us at all.
    fn unheard(&self) -> Duration {
        self.unacked().min(self.heard.unwrap_or(Duration::MAX))
    }

    /// How long it has been silent, if that is long enough to evict it.
    fn evict_after(&self, t: &crate::Timeouts) -> Option<Duration> {
        if self.unheard() > eviction_after(t) {
            return Some(self.unheard());
        }
        // Heard, but its Raft does not answer: busy, up to the hard limit.
        // Past it, a voter could cost the group its quorum, and a member
        // whose Raft stopped for good would stay in every view.
        (self.unacked() > unresponsive_after(t)).then(|| self.unacked())
    }
}

fn first_silent(members: impl Iterator<Item = Quiet>, t: &crate::Timeouts) -> Option<(MemberId, Duration)> {
    members.filter_map(|q| q.evict_after(t).map(|silent| (q.id, silent))).next()
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

/// How long a member still heard on the network may leave the leader's
/// heartbeats unanswered: Galera's hard limit, `evs.inactive_timeout`.
/// openraft answers an append only once the follower's earlier log and
/// snapshot work is done, so a member restoring a snapshot of hundreds of
/// MiB, or stalled on its disk, is quiet for that long while its transport
/// still talks.
pub fn unresponsive_after(t: &crate::Timeouts) -> Duration {
    t.inactive.max(eviction_after(t))
}

async fn evict(shared: &Shared, (member, silent): (MemberId, Duration)) {
    let name =
        shared.metrics().membership_config.membership().get_node(&member).map(|i| i.name.clone()).unwrap_or_default();
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

    /// Galera's defaults: suspect 5 s, inactive 15 s.
    fn galera() -> crate::Timeouts {
        crate::Timeouts {
            heartbeat: Duration::from_secs(1),
            suspect: Duration::from_secs(5),
            inactive: Duration::from_secs(15),
        }
    }

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    /// A member never heard on the network apart from its acks.
    fn acks_only(id: MemberId, acked: Option<Duration>, known: Option<Duration>) -> Quiet {
        Quiet { id, acked, known, heard: None }
    }

    fn first(members: &[Quiet]) -> Option<(MemberId, Duration)> {
        first_silent(members.iter().copied(), &galera())
    }

    #[test]
    fn a_member_that_just_joined_is_not_silent_however_long_we_have_led() {
        // Joined 0 s ago, never acked yet: the leader has led for an hour.
        assert_eq!(first(&[acks_only(7, None, secs(0))]), None);
        assert_eq!(first(&[acks_only(7, None, None)]), None, "not even seen yet");
    }

    #[test]
    fn silence_counts_from_the_last_ack_or_from_when_we_first_saw_the_member() {
        let members =
            [acks_only(1, secs(1), secs(3600)), acks_only(2, None, secs(20)), acks_only(3, secs(30), secs(3600))];
        assert_eq!(first(&members), Some((2, Duration::from_secs(20))));
        // An old ack of a member that left and came back counts only from its return.
        assert_eq!(first(&[acks_only(3, secs(3600), secs(4))]), None);
        assert_eq!(first(&[acks_only(3, secs(3600), secs(6))]), Some((3, Duration::from_secs(6))));
    }

    #[test]
    fn a_member_heard_on_the_network_is_busy_not_gone() {
        // Its Raft has not acked for 10 s (restoring a large snapshot), but
        // its keepalives arrived a second ago.
        let busy = Quiet { id: 4, acked: secs(10), known: secs(3600), heard: secs(1) };
        assert_eq!(first(&[busy]), None, "it stays up to the hard limit");
        // Past the hard limit it goes (a voter could cost the quorum).
        let stuck = Quiet { acked: secs(16), ..busy };
        assert_eq!(first(&[stuck]), Some((4, Duration::from_secs(16))));
        // Silent on the network as well: gone after the suspect timeout.
        let gone = Quiet { heard: secs(6), ..busy };
        assert_eq!(first(&[gone]), Some((4, Duration::from_secs(6))));
    }

    #[test]
    fn a_look_later_than_half_the_eviction_timeout_means_this_member_was_stopped() {
        let (t, beat) = (galera(), Duration::from_secs(1));
        assert!(!asleep_itself(beat, beat, &t), "on time");
        assert!(!asleep_itself(Duration::from_millis(3500), beat, &t), "late by 2.5 s of 5 s: a busy runtime");
        assert!(asleep_itself(Duration::from_millis(3501), beat, &t));
        assert!(asleep_itself(Duration::from_secs(60), beat, &t), "a minute frozen");
    }

    #[test]
    fn the_hard_limit_is_never_below_the_suspect_timeout() {
        let t = crate::Timeouts { inactive: Duration::from_secs(2), ..galera() };
        assert_eq!(eviction_after(&t), Duration::from_secs(2));
        assert_eq!(unresponsive_after(&t), Duration::from_secs(2));
        assert_eq!(unresponsive_after(&galera()), Duration::from_secs(15));
    }
}
