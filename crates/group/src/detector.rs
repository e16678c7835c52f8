//! Non-primary detection (consensus-choice.md §4.1).
//!
//! openraft never tells a member that it lost the majority: a leader without
//! quorum stays leader and only rejects proposals. This task derives it:
//!
//! | role               | primary while                                            |
//! |--------------------|----------------------------------------------------------|
//! | leader             | sole voter, or a quorum acked within `suspect`           |
//! | follower / learner | AppendEntries from the current leader within `suspect`   |
//! | candidate / none   | never                                                    |
//!
//! Coming back additionally needs the local state machine caught up with what
//! the leader had committed, so `Primary` means "my view is current".

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::info;
use openraft::{Instant as _, ServerState};

use crate::raft::state_machine::{lock, replica_call};
use crate::raft::types::Metrics;
use crate::shared::Shared;
use crate::{Connectivity, MemberId};

pub async fn run(shared: Arc<Shared>) {
    let period = (shared.config.timeouts.heartbeat / 2)
        .clamp(Duration::from_millis(5), Duration::from_millis(100));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut detector = Detector::default();
    loop {
        tick.tick().await;
        detector.step(&shared);
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Primary,
    NonPrimary(String),
}

#[derive(Default)]
struct Detector {
    primary: bool,
    /// The cluster commit index seen at the previous step.
    prev_cluster_committed: Option<u64>,
    /// Since when this member has been out of the primary component, and
    /// when it last said who is missing.
    waiting_since: Option<Instant>,
    reported: Option<Instant>,
}

/// How often a member out of the primary component says who is missing.
const REPORT_EVERY: Duration = Duration::from_secs(5);

impl Detector {
    fn step(&mut self, shared: &Shared) {
        // Once shutdown has begun the engine is tearing down: a callback now
        // could wait on a lock held by the very thread waiting for us to stop.
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        let m = shared.metrics();
        let verdict = self.assess(shared, &m);
        self.prev_cluster_committed = m.cluster_committed.as_ref().map(|l| l.index);
        self.report_missing(shared, &m, &verdict);
        match verdict {
            Verdict::Primary if !self.primary => {
                self.primary = true;
                info!(
                    "Member {} is in the primary component (leader {:?})",
                    shared.me, m.current_leader
                );
                // Tell the replica before `submit` starts accepting, and (below)
                // stop accepting before telling it: submit never runs ahead of
                // what the engine believes.
                replica_call(|| lock(&shared.replica).connectivity(Connectivity::Primary));
                shared.primary.store(true, Ordering::Release);
            }
            Verdict::NonPrimary(reason) if self.primary => {
                self.primary = false;
                shared.primary.store(false, Ordering::Release);
                let reachable = reachable(shared);
                // A Note in Galera too: the view change tells the server.
                info!(
                    "Member {} lost the primary component: {reason}; \
                     reachable members: {reachable:?}",
                    shared.me
                );
                replica_call(|| {
                    lock(&shared.replica).connectivity(Connectivity::NonPrimary { reachable })
                });
            }
            _ => {}
        }
    }

    /// While no primary component takes this voter, says every few seconds
    /// which voters of the last one it cannot reach and how to go on without
    /// them. It re-forms by itself once a majority is back.
    fn report_missing(&mut self, shared: &Shared, m: &Metrics, verdict: &Verdict) {
        let voters: Vec<MemberId> = m.membership_config.membership().voter_ids().collect();
        if *verdict == Verdict::Primary
            || !voters.contains(&shared.me)
            || m.current_leader.is_some_and(|l| l == shared.me)
        {
            self.waiting_since = None;
            return;
        }
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        if since.elapsed() < shared.suspect
            || self.reported.is_some_and(|t| t.elapsed() < REPORT_EVERY)
        {
            return;
        }
        self.reported = Some(Instant::now());
        let reachable = reachable(shared);
        let membership = m.membership_config.membership();
        let name = |id: &MemberId| {
            membership.get_node(id).map_or_else(
                || id.to_string(),
                |n| format!("{} ({})", n.name, n.group_addr),
            )
        };
        let missing: Vec<String> = voters
            .iter()
            .filter(|v| !reachable.contains(v))
            .map(name)
            .collect();
        let here = voters.len() - missing.len();
        info!(
            "Waiting for the primary component: {here} of the {} voters of the last one are reachable, {} are needed; \
             missing: {}. It forms again by itself once a majority is back. To go on without the missing ones, \
             bootstrap the most advanced node: SET GLOBAL wsrep_provider_options='pc.bootstrap=YES' there, \
             or `tandem cluster bootstrap`",
            voters.len(),
            voters.len() / 2 + 1,
            if missing.is_empty() { "none (an election is in progress)".to_string() } else { missing.join(", ") }
        );
    }

    fn assess(&self, shared: &Shared, m: &Metrics) -> Verdict {
        if let Err(fatal) = &m.running_state {
            return Verdict::NonPrimary(format!("Raft stopped: {fatal}"));
        }
        if m.membership_config
            .membership()
            .get_node(&shared.me)
            .is_none()
        {
            return Verdict::NonPrimary("not a member of the group".into());
        }
        match m.state {
            ServerState::Leader => leader_verdict(m, shared.me, shared.suspect),
            ServerState::Follower | ServerState::Learner => self.follower_verdict(shared, m),
            ServerState::Candidate => Verdict::NonPrimary("election in progress".into()),
            ServerState::Shutdown => Verdict::NonPrimary("shut down".into()),
        }
    }

    fn follower_verdict(&self, shared: &Shared, m: &Metrics) -> Verdict {
        let Some(leader) = m.current_leader else {
            return Verdict::NonPrimary("no leader".into());
        };
        match shared.net.liveness.since_append(leader) {
            Some(quiet) if quiet <= shared.suspect => {}
            Some(quiet) => {
                return Verdict::NonPrimary(format!(
                    "no contact with leader {leader} for {quiet:?}"
                ))
            }
            None => return Verdict::NonPrimary(format!("no contact with leader {leader} yet")),
        }
        if self.primary || self.caught_up(m) {
            Verdict::Primary
        } else {
            Verdict::NonPrimary("catching up with the leader".into())
        }
    }

    /// Applied everything the leader had committed one step ago. Comparing
    /// with the current commit point would never succeed under steady load,
    /// when the leader is always a few entries ahead.
    fn caught_up(&self, m: &Metrics) -> bool {
        let applied = m.last_applied.as_ref().map(|l| l.index);
        let now = m.cluster_committed.as_ref().map(|l| l.index);
        let target = match (self.prev_cluster_committed, now) {
            (Some(prev), Some(now)) => Some(prev.min(now)),
            (_, now) => now,
        };
        applied >= target
    }
}

fn leader_verdict(m: &Metrics, me: MemberId, suspect: Duration) -> Verdict {
    let voters: Vec<MemberId> = m.membership_config.membership().voter_ids().collect();
    if voters == [me] {
        return Verdict::Primary; // a quorum of one: ourselves
    }
    match &m.last_quorum_acked {
        Some(acked) if acked.elapsed() <= suspect => Verdict::Primary,
        Some(acked) => Verdict::NonPrimary(format!(
            "no quorum acknowledgement for {:?}",
            acked.elapsed()
        )),
        None => Verdict::NonPrimary("no quorum acknowledgement yet".into()),
    }
}

/// Members we still hear, ourselves included, for the non-primary report.
/// A live peer is heard every heartbeat; half the suspect timeout leaves out
/// the peer whose silence made us non-primary in the first place.
fn reachable(shared: &Shared) -> Vec<MemberId> {
    let window = (shared.suspect / 2).max(shared.config.timeouts.heartbeat * 4);
    let mut ids = shared.net.liveness.reachable(window);
    if let Err(at) = ids.binary_search(&shared.me) {
        ids.insert(at, shared.me);
    }
    ids
}
