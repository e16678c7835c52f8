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
//! Between two leaders (an election, a new leader not yet heard from) a
//! member that was in the primary component stays in it until `suspect` has
//! passed since its last evidence of one: a planned leadership hand-over is
//! not a loss of the primary component, and a real loss is still declared
//! `suspect` after the last contact, as Galera's `evs.suspect_timeout` does.
//! While a majority of the voters is still in touch, one election window
//! more: when the leader is lost, the others can elect a new one only once
//! their lease on the old one has run out (`election_timeout_max`, which is
//! `suspect`), and a Galera majority goes from the old primary view straight
//! to the new one, never through a non-primary view.
//!
//! Coming back additionally needs the local state machine caught up with what
//! the leader had committed, so `Primary` means "my view is current".

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use log::{info, warn};
use openraft::async_runtime::WatchReceiver;
use openraft::{Instant as _, ServerState};
use tokio::time::Instant;

use crate::beat;
use crate::partition;
use crate::raft::types::Metrics;
use crate::shared::Shared;
use crate::sync::{blocking_section, lock};
use crate::weight;
use crate::{Connectivity, MemberId};

/// The longest a member that is steadily in the primary component waits
/// between two looks: Galera checks its peers every 0.5 s too
/// (`evs.inactive_check_period`).
const STEADY_MAX: Duration = Duration::from_millis(500);

/// The detector's paces: `busy` while anything is unsettled (joining,
/// catching up, an election, a component forming without quorum), `steady`
/// while the member is in the primary component on fresh evidence. Steady,
/// a loss is declared at most `steady` after `suspect` ran out, a tenth of
/// `suspect` at most; a change of leader, state or membership is looked at
/// as soon as openraft publishes it, at most once per `busy`.
fn paces(heartbeat: Duration, suspect: Duration) -> (Duration, Duration) {
    let busy = (heartbeat / 2).clamp(Duration::from_millis(5), Duration::from_millis(100));
    let steady = (suspect / 10).clamp(busy, STEADY_MAX.max(busy));
    (busy, steady)
}

pub async fn run(shared: Arc<Shared>) {
    let (busy, steady) = paces(shared.config.timeouts.heartbeat, shared.suspect);
    let mut changes = shared.raft().server_metrics();
    let mut detector = Detector::default();
    let mut last = Instant::now();
    loop {
        let next = if detector.steady { beat::next_beat(shared.started, steady, last) } else { last + busy };
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(next) => {}
            changed = changes.changed() => {
                if changed.is_err() {
                    // That Raft instance ended (replaced under `pc.ignore_sb`,
                    // or shut down): follow the current one, and wait out
                    // this pace, so that an ended one is not polled in a loop.
                    changes = shared.raft().server_metrics();
                    tokio::time::sleep_until(next).await;
                }
                tokio::time::sleep_until(last + busy).await;
            }
        }
        last = Instant::now();
        detector.step(&shared);
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// In the primary component, as evidenced at `at` (the leader's last
    /// append, or the last quorum acknowledgement).
    Primary {
        at: Instant,
    },
    /// No leader to judge by yet: an election, or a new leader not yet heard.
    Electing(String),
    NonPrimary(String),
}

/// Whether a verdict leaves this member in the primary component (`Err` says
/// why not). `Electing` keeps a member that was primary while its last
/// evidence is younger than `grace` (see `grace`).
fn settle(verdict: Verdict, was_primary: bool, evidence: Option<Instant>, grace: Duration) -> Result<(), String> {
    match verdict {
        Verdict::Primary { .. } => Ok(()),
        Verdict::Electing(_) if was_primary && evidence.is_some_and(|at| at.elapsed() <= grace) => Ok(()),
        Verdict::Electing(reason) | Verdict::NonPrimary(reason) => Err(reason),
    }
}

#[derive(Default)]
struct Detector {
    primary: bool,
    /// In the primary component on fresh evidence at the last step, with
    /// nothing pending: the detector may look less often.
    steady: bool,
    /// The cluster commit index seen at the previous step.
    prev_cluster_committed: Option<u64>,
    /// The last moment this member knew itself in the primary component.
    evidence: Option<Instant>,
    /// Since when this member has been out of the primary component, and
    /// when it last said who is missing.
    waiting_since: Option<Instant>,
    reported: Option<Instant>,
    /// Until when the engine is still told "primary" while the members in
    /// touch form a new component without a majority (`partition`).
    going_on_until: Option<Instant>,
}

/// How often a member out of the primary component says who is missing.
const REPORT_EVERY: Duration = Duration::from_secs(5);

impl Detector {
    fn step(&mut self, shared: &Arc<Shared>) {
        // Once shutdown has begun the engine is tearing down: a callback now
        // could wait on a lock held by the very thread waiting for us to stop.
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        let m = shared.metrics();
        let in_touch = majority_in_touch(shared);
        let verdict = weigh(shared, self.assess(shared, &m, in_touch));
        let evidenced = matches!(verdict, Verdict::Primary { .. });
        self.prev_cluster_committed = m.cluster_committed.as_ref().map(|l| l.index);
        if let Verdict::Primary { at } = verdict {
            self.evidence = Some(at);
        }
        let settled = settle(verdict, self.primary, self.evidence, grace(shared.suspect, in_touch));
        self.report_missing(shared, &m, settled.is_ok() || self.going_on_until.is_some());
        match settled {
            Ok(()) if !self.primary => {
                self.primary = true;
                info!("Member {} is in the primary component (leader {:?})", shared.me, m.current_leader);
                // Tell the replica before `submit` starts accepting, and (below)
                // stop accepting before telling it: submit never runs ahead of
                // what the engine believes.
                blocking_section(|| lock(&shared.replica).connectivity(Connectivity::Primary));
                shared.primary.store(true, Ordering::Release);
                shared.ever_primary.store(true, Ordering::Release);
            }
            Ok(()) if self.going_on_until.take().is_some() => {
                info!("Member {} is in the new primary component", shared.me);
            }
            Err(reason) if self.primary && self.goes_on_without_quorum(shared, &m, &reason) => {}
            Err(reason) if self.primary => {
                self.primary = false;
                shared.primary.store(false, Ordering::Release);
                let reachable = reachable(shared);
                // A Note in Galera too: the view change tells the server.
                info!(
                    "Member {} lost the primary component: {reason}; \
                     reachable members: {reachable:?}",
                    shared.me
                );
                blocking_section(|| lock(&shared.replica).connectivity(Connectivity::NonPrimary { reachable }));
            }
            _ => {}
        }
        self.steady = evidenced && self.primary && self.going_on_until.is_none();
    }

    /// Whether this member, cut from the primary component, goes on anyway
    /// as the policy allows (`pc.ignore_sb`, `pc.ignore_quorum`): the
    /// members in touch form a new component, and meanwhile the engine is
    /// not told of a loss, as Galera delivers no non-primary view then. If
    /// no component forms in time, the loss is declared after all.
    fn goes_on_without_quorum(&mut self, shared: &Arc<Shared>, m: &Metrics, reason: &str) -> bool {
        if let Some(until) = self.going_on_until {
            if Instant::now() < until {
                return true;
            }
            self.going_on_until = None;
            warn!("No primary component formed without quorum in time: this member is non-primary");
            return false;
        }
        let weights = weight::voter_weights(shared);
        let voters: Vec<MemberId> = weights.iter().map(|(id, _)| *id).collect();
        let reachable = reachable(shared);
        let standing = partition::standing(&weights, &reachable);
        // Galera's words for the policies, "from view:", which MariaDB's
        // test suites expect, as warnings; a weighted majority is the rule
        // itself, a note.
        let (why, level) = match partition::may_go_on(shared.partition_policy(), standing) {
            Some(why) => (why, log::Level::Warn),
            None if standing == partition::Standing::Majority
                && partition::heads(&voters, &reachable) != partition::Standing::Majority =>
            {
                ("Weighted quorum (pc.weight) holds", log::Level::Info)
            }
            None => return false,
        };
        if !voters.contains(&shared.me) {
            return false;
        }
        let members: Vec<MemberId> =
            m.membership_config.membership().nodes().map(|(id, _)| *id).filter(|id| reachable.contains(id)).collect();
        log::log!(
            level,
            "{why} from view: members {members:?} of the {} voters {voters:?}; member {} lost the \
             primary component ({reason})",
            voters.len(),
            shared.me
        );
        let until = Instant::now() + shared.request_timeout() * 2;
        self.going_on_until = Some(until);
        tokio::spawn(partition::go_on(shared.clone(), members, until));
        true
    }

    /// While no primary component takes this voter, says every few seconds
    /// which voters of the last one it cannot reach and how to go on without
    /// them. It re-forms by itself once a majority is back.
    fn report_missing(&mut self, shared: &Shared, m: &Metrics, primary: bool) {
        let voters: Vec<MemberId> = m.membership_config.membership().voter_ids().collect();
        if primary || !voters.contains(&shared.me) || m.current_leader.is_some_and(|l| l == shared.me) {
            self.waiting_since = None;
            return;
        }
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        if since.elapsed() < shared.suspect || self.reported.is_some_and(|t| t.elapsed() < REPORT_EVERY) {
            return;
        }
        self.reported = Some(Instant::now());
        let reachable = reachable(shared);
        let membership = m.membership_config.membership();
        let name = |id: &MemberId| {
            membership.get_node(id).map_or_else(|| id.to_string(), |n| format!("{} ({})", n.name, n.group_addr))
        };
        let missing: Vec<String> = voters.iter().filter(|v| !reachable.contains(v)).map(name).collect();
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

    fn assess(&self, shared: &Shared, m: &Metrics, in_touch: bool) -> Verdict {
        if let Err(fatal) = &m.running_state {
            return Verdict::NonPrimary(format!("Raft stopped: {fatal}"));
        }
        if m.membership_config.membership().get_node(&shared.me).is_none() {
            return Verdict::NonPrimary("not a member of the group".into());
        }
        match m.state {
            ServerState::Leader => leader_verdict(m, shared.me, shared.suspect),
            ServerState::Follower | ServerState::Learner => self.follower_verdict(shared, m, in_touch),
            ServerState::Candidate => Verdict::Electing("election in progress".into()),
            ServerState::Shutdown => Verdict::NonPrimary("shut down".into()),
        }
    }

    /// `in_touch`: a majority of the voters is still in touch with this
    /// member, so a leader gone silent is one they can replace.
    fn follower_verdict(&self, shared: &Shared, m: &Metrics, in_touch: bool) -> Verdict {
        let Some(leader) = m.current_leader else {
            return Verdict::Electing("no leader".into());
        };
        let at = match shared.net.liveness.since_append(leader) {
            Some(quiet) if quiet <= shared.suspect => Instant::now().checked_sub(quiet),
            Some(quiet) if in_touch => {
                return Verdict::Electing(format!(
                    "no contact with leader {leader} for {quiet:?}, and no new leader yet"
                ))
            }
            Some(quiet) => return Verdict::NonPrimary(format!("no contact with leader {leader} for {quiet:?}")),
            None => return Verdict::Electing(format!("no contact with leader {leader} yet")),
        };
        if self.primary || self.caught_up(m) {
            Verdict::Primary { at: at.unwrap_or_else(Instant::now) }
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

/// With unequal weights a quorum of heads is not enough: the members in
/// touch must also weigh more than half (`weight`).
fn weigh(shared: &Shared, verdict: Verdict) -> Verdict {
    match verdict {
        Verdict::Primary { .. } => match outweighed(shared) {
            Some(why) => Verdict::NonPrimary(why),
            None => verdict,
        },
        other => other,
    }
}

/// Why the members this one is in touch with do not make a primary
/// component by weight, when the voters' weights differ and the partition
/// policy does not let them go on anyway; `None` otherwise. A member for
/// which this holds is not primary and grants no votes.
pub(crate) fn outweighed(shared: &Shared) -> Option<String> {
    let weights = weight::voter_weights(shared);
    if weight::uniform(&weights) {
        return None;
    }
    let reachable = reachable(shared);
    let standing = partition::standing(&weights, &reachable);
    if standing == partition::Standing::Majority || partition::may_go_on(shared.partition_policy(), standing).is_some()
    {
        return None;
    }
    let (here, total) = partition::weigh(&weights, &reachable);
    Some(format!("the members in touch weigh {here} of the {total} that the voters {weights:?} weigh (pc.weight)"))
}

fn leader_verdict(m: &Metrics, me: MemberId, suspect: Duration) -> Verdict {
    let voters: Vec<MemberId> = m.membership_config.membership().voter_ids().collect();
    let now = Instant::now();
    if voters == [me] {
        return Verdict::Primary { at: now }; // a quorum of one: ourselves
    }
    match &m.last_quorum_acked {
        Some(acked) if acked.elapsed() <= suspect => {
            Verdict::Primary { at: now.checked_sub(acked.elapsed()).unwrap_or(now) }
        }
        Some(acked) => Verdict::NonPrimary(format!("no quorum acknowledgement for {:?}", acked.elapsed())),
        // A new leader, before its first round of heartbeats came back.
        None => Verdict::Electing("no quorum acknowledgement yet".into()),
    }
}

/// How long a member that was primary stays so without evidence of a
/// leader: `suspect`, plus one election window while a majority of the
/// voters is in touch (the module's comment says why).
fn grace(suspect: Duration, majority_in_touch: bool) -> Duration {
    if majority_in_touch {
        suspect * 2
    } else {
        suspect
    }
}

/// Whether the voters this member still hears (itself included) weigh more
/// than half of all voters: enough to elect a leader among themselves.
fn majority_in_touch(shared: &Shared) -> bool {
    let weights = weight::voter_weights(shared);
    weights.iter().any(|(id, _)| *id == shared.me)
        && partition::standing(&weights, &reachable(shared)) == partition::Standing::Majority
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

#[cfg(test)]
mod tests {
    use super::*;

    const SUSPECT: Duration = Duration::from_secs(5);

    fn ago(d: Duration) -> Option<Instant> {
        Instant::now().checked_sub(d)
    }

    #[test]
    fn a_steady_member_looks_every_tenth_of_suspect_at_most_half_a_second() {
        let ms = Duration::from_millis;
        // Galera's defaults: keepalive 1 s, suspect 5 s.
        assert_eq!(paces(ms(1000), SUSPECT), (ms(100), ms(500)));
        assert_eq!(paces(ms(200), ms(1000)), (ms(100), ms(100)), "a tenth of suspect");
        assert_eq!(paces(ms(10), ms(100)), (ms(5), ms(10)));
        assert_eq!(paces(ms(2), ms(20)), (ms(5), ms(5)), "never faster than busy");
        assert_eq!(paces(ms(1000), Duration::from_secs(60)), (ms(100), ms(500)));
    }

    #[test]
    fn an_election_right_after_contact_keeps_a_primary_member_primary() {
        let electing = || Verdict::Electing("election in progress".into());
        assert_eq!(settle(electing(), true, ago(Duration::from_millis(100)), SUSPECT), Ok(()));
        // Not primary before: an election does not make it so.
        assert!(settle(electing(), false, ago(Duration::from_millis(100)), SUSPECT).is_err());
        // Never had evidence of a primary component.
        assert!(settle(electing(), true, None, SUSPECT).is_err());
    }

    #[test]
    fn an_election_outlasting_the_suspect_timeout_loses_the_primary_component() {
        let verdict = Verdict::Electing("no leader".into());
        let Some(long_ago) = ago(SUSPECT + Duration::from_secs(1)) else {
            return; // the clock started less than six seconds ago: nothing to check
        };
        assert_eq!(settle(verdict, true, Some(long_ago), SUSPECT), Err("no leader".into()));
    }

    #[test]
    fn a_majority_in_touch_waits_one_election_more_for_a_new_leader() {
        assert_eq!(grace(SUSPECT, false), SUSPECT);
        assert_eq!(grace(SUSPECT, true), SUSPECT * 2);
        let Some(past_suspect) = ago(SUSPECT + Duration::from_secs(1)) else {
            return; // the clock started less than six seconds ago: nothing to check
        };
        let electing = || Verdict::Electing("no new leader yet".into());
        assert_eq!(settle(electing(), true, Some(past_suspect), grace(SUSPECT, true)), Ok(()));
        assert!(settle(electing(), true, Some(past_suspect), grace(SUSPECT, false)).is_err());
        let Some(past_grace) = ago(SUSPECT * 2 + Duration::from_secs(1)) else {
            return;
        };
        assert!(settle(electing(), true, Some(past_grace), grace(SUSPECT, true)).is_err());
    }

    #[test]
    fn a_hard_verdict_is_never_softened() {
        let verdict = Verdict::NonPrimary("no contact with leader 7 for 6s".into());
        assert!(settle(verdict, true, ago(Duration::ZERO), SUSPECT).is_err());
        let primary = Verdict::Primary { at: Instant::now() };
        assert_eq!(settle(primary, false, None, SUSPECT), Ok(()));
    }
}
