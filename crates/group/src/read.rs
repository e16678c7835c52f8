//! Read barriers: the group's "now" for a causal read, without ordering
//! anything.
//!
//! A causal read must see every write acknowledged anywhere before it
//! started. Galera's marker never leaves the node: it is delivered behind
//! whatever the node has received, which suffices there because Galera
//! delivers a write-set only once every member has received it. Raft
//! acknowledges an entry once a majority has it, so a member may not yet
//! have what was acknowledged; ordering a marker through the log would cost
//! a disk write on every member and a round of replication per read. Raft's
//! answer is the read index: the leader confirms it is still the leader
//! with one heartbeat round to a quorum, and its commit index at that
//! moment covers every entry committed before the read began (an
//! acknowledged write-set is committed). A member that has applied up to
//! that index has delivered every such write-set to its replica; the engine
//! then waits for its own commit of what it was delivered. A follower asks the leader for the index (one request, no log
//! entry) and waits for its own state machine. Where the leader and the
//! asking follower are a majority (two or three voters), the request itself
//! stands for the follower's answer to that heartbeat round, and the leader
//! answers at once ([`asker_completes_quorum`]).
//!
//! With `repl.causal_read_lease` the leader skips the rounds still left
//! (its own reads; a follower's in a group of four voters or more) when
//! a quorum acknowledged something it sent within the last two heartbeat
//! periods (openraft's lease read, with a shorter lease than openraft's
//! own): no other leader can have been elected since, because a follower
//! grants no vote while it heard from its leader within `evs.suspect_timeout`.
//! That rests on two things Raft's quorum round does not need: clocks that
//! run at about the same rate on every member (the lease is at least 2.5
//! times shorter than the followers' wait, so a rate 2.5 times off is
//! needed to break it), and a restarted member not voting before the lease it may
//! have granted has run out, which openraft does not remember across a
//! restart ([`votes_withheld`]). A leader handing its leadership over on
//! leaving goes back to quorum rounds first: its successor is elected with
//! votes that ignore the lease.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::{LinearizerOption, ReadPolicy};
use tokio::sync::oneshot;

use crate::shared::Shared;
use crate::sync::lock;
use crate::wire::{Request, Response};
use crate::GroupError;

/// Concurrent reads share read-index rounds: a read never takes the answer
/// of a round that was already out when it arrived (that round may have
/// been answered before the read began), and every read waiting when a
/// round starts takes its answer. Up to `ROUNDS_OUT` rounds are out at once:
/// a read that arrives while one is out starts its own instead of waiting a
/// whole round for it to come back, which would cost it one and a half
/// rounds on average. Beyond that, reads queue and share the next round, so
/// under many readers the leader still confirms its leadership once per
/// round, not once per read.
#[derive(Default)]
pub struct Rounds {
    state: Mutex<RoundState>,
}

/// Read-index rounds out at once, per member.
const ROUNDS_OUT: usize = 4;

type Reader = oneshot::Sender<Result<u64, GroupError>>;

/// Which reads wait for which round. Pure bookkeeping, so the sharing rule
/// is tested without a group.
struct RoundState<R = Reader> {
    /// Rounds out (each one a task running rounds until no read waits).
    out: usize,
    /// Reads that arrived after every round out began: they wait for the
    /// next round to start.
    next: Vec<R>,
}

impl<R> Default for RoundState<R> {
    fn default() -> Self {
        RoundState { out: 0, next: Vec::new() }
    }
}

impl<R> RoundState<R> {
    /// A read arrives: it waits for the next round. True when a new round
    /// task must start for it (fewer than `ROUNDS_OUT` are out).
    fn arrive(&mut self, reader: R) -> bool {
        self.next.push(reader);
        let start = self.out < ROUNDS_OUT;
        self.out += start as usize;
        start
    }

    /// A round task is free to start a round: the reads it serves, or None
    /// when none waits (the task ends and no longer counts as out).
    fn start_round(&mut self) -> Option<Vec<R>> {
        if self.next.is_empty() {
            self.out -= 1;
            return None;
        }
        Some(std::mem::take(&mut self.next))
    }

    /// A read that ran one round itself is done with it: true when reads
    /// are waiting for another, which a round task must then run (it takes
    /// over this one's place among the rounds out).
    fn hand_on(&mut self) -> bool {
        if self.next.is_empty() {
            self.out -= 1;
            return false;
        }
        true
    }
}

/// A read index obtained after this call began, shared with the reads that
/// asked at the same time. A read that may start a round runs it in its own
/// task (one hand-off between tasks less per read) and leaves whatever
/// queued meanwhile to a round task.
async fn shared_read_index(shared: &Arc<Shared>) -> Result<u64, GroupError> {
    let (tx, rx) = oneshot::channel();
    if lock(&shared.reads.state).arrive(tx) {
        let waiting = lock(&shared.reads.state).start_round();
        if let Some(waiting) = waiting {
            run_round(shared, waiting).await;
            if lock(&shared.reads.state).hand_on() {
                tokio::spawn(run_rounds(shared.clone()));
            }
        }
    }
    rx.await.unwrap_or(Err(GroupError::Closed))
}

/// Runs rounds while reads are waiting for one.
async fn run_rounds(shared: Arc<Shared>) {
    loop {
        let Some(waiting) = lock(&shared.reads.state).start_round() else {
            return;
        };
        run_round(&shared, waiting).await;
    }
}

/// One read-index round, its answer handed to every read waiting for it.
async fn run_round(shared: &Arc<Shared>, waiting: Vec<Reader>) {
    // A round can hang: openraft confirms leadership only once a quorum
    // answers, and a Raft instance being replaced (a component formed
    // under `pc.ignore_sb`) may never answer. Every read waiting behind
    // a hung round would hang with it, so each round is bounded and a
    // late one answers with an error the caller retries.
    let answer = tokio::time::timeout(shared.request_timeout(), read_index(shared))
        .await
        .unwrap_or_else(|_| Err(GroupError::Other(format!("no read index within {:?}", shared.request_timeout()))));
    for reader in waiting {
        let _ = reader.send(answer.clone());
    }
}

/// Returns once this member's replica has been given every entry committed
/// in the group before the call. A round that fails while the group changes
/// leader, or re-forms under `pc.ignore_sb`, is tried again until `timeout`;
/// only a lost primary component (or a closed group) ends it early, as it
/// ends a causal read in Galera.
pub async fn barrier(shared: &Arc<Shared>, timeout: Duration) -> Result<(), GroupError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let index = loop {
        if !shared.is_primary() {
            return Err(GroupError::NonPrimary);
        }
        match tokio::time::timeout_at(deadline, shared_read_index(shared)).await {
            Ok(Ok(index)) => break index,
            Ok(Err(e @ (GroupError::NonPrimary | GroupError::Closed))) => return Err(e),
            Ok(Err(e)) if tokio::time::Instant::now() + shared.retry_pause() >= deadline => return Err(e),
            Ok(Err(e)) => {
                log::debug!("Read barrier: {e}; trying again");
                tokio::time::sleep(shared.retry_pause()).await;
            }
            Err(_) => return Err(GroupError::Other(format!("read barrier: no read index within {timeout:?}"))),
        }
    };
    // Our own state machine's applied index, published as each batch is
    // applied (openraft's metrics report it a little later).
    let mut applied = shared.sm.applied_index();
    let reached = tokio::time::timeout_at(deadline, async { applied.wait_for(|&at| at >= index).await.is_ok() }).await;
    match reached {
        Ok(true) => Ok(()),
        Ok(false) => Err(GroupError::Closed),
        Err(_) => {
            Err(GroupError::Other(format!("read barrier: log index {index} not applied here within {timeout:?}")))
        }
    }
}

/// The leader's read index: asked of it, or ours when we lead.
async fn read_index(shared: &Shared) -> Result<u64, GroupError> {
    if crate::injected::active(crate::injected::Defect::FollowerReadsItsOwnIndex) {
        return Ok(*shared.sm.applied_index().borrow());
    }
    if shared.raft().is_leader() {
        return local_read_index(shared).await;
    }
    // No leader known is not a lost primary component (that is
    // `barrier`'s check): between two leaders, or while a component forms
    // under `pc.ignore_sb`, there is none for an election's time. The
    // caller tries again until its timeout.
    let Some((leader, addr)) = shared.leader() else {
        return Err(GroupError::Other("no leader known yet".into()));
    };
    // Read now, after the reads this round serves began: a vote this
    // member grants for a later term is saved before it is sent, so no
    // such vote left here before this point (see `asker_completes_quorum`).
    let term = shared.log.vote_and_last().0.map_or(0, |v| v.leader_id.term);
    match shared.net.call(&addr, Some(leader), &Request::ReadIndex { term }, shared.request_timeout()).await {
        Ok((_, Response::ReadIndex { index })) => Ok(index),
        Ok((_, other)) => Err(GroupError::Other(format!("leader {leader} gave no read index: {other:?}"))),
        Err(e) => Err(GroupError::Other(format!("leader {leader} gave no read index: {e}"))),
    }
}

/// How a leader confirms that it still leads before it answers a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadRule {
    /// A heartbeat round answered by a quorum, begun after the read.
    QuorumRound,
    /// A quorum acknowledged something sent less than this long ago (else
    /// a heartbeat round, as for `QuorumRound`).
    Lease(Duration),
}

impl ReadRule {
    fn option(self) -> LinearizerOption {
        match self {
            ReadRule::QuorumRound => ReadPolicy::ReadIndex.into(),
            ReadRule::Lease(age) => LinearizerOption::new(Some(age), true),
        }
    }
}

/// The lease a causal read may rest on: two heartbeat periods, so that a
/// quiet group (heartbeats only) still reads without a round, but at most
/// 2/5 of the followers' wait before they vote for another leader. It is
/// then also shorter than the shortest election timeout, the earliest a
/// restarted member stands for election itself.
fn lease_age(raft: &openraft::Config) -> Duration {
    let ms = (2 * raft.heartbeat_interval).min(2 * raft.election_timeout_max / 5);
    debug_assert!(ms < raft.election_timeout_min);
    Duration::from_millis(ms)
}

fn read_rule(lease_wanted: bool, handing_over: bool, raft: &openraft::Config) -> ReadRule {
    if lease_wanted && !handing_over {
        ReadRule::Lease(lease_age(raft))
    } else {
        ReadRule::QuorumRound
    }
}

/// How long this member still withholds its vote, if it does. openraft
/// forgets across a restart when this member last heard from its leader,
/// and would vote at once: a leader it acknowledged just before it stopped
/// could then be replaced inside that leader's lease, and answer a causal
/// read from the past. So a restored member votes only once the
/// shortest election timeout has passed since it started (longer than any
/// lease a read rests on, see [`lease_age`]). Every member does this,
/// whatever its own `repl.causal_read_lease`, as any member may be the one
/// that restarts under a leader that reads on its lease; it delays the
/// first election after a whole-group restart by at most that timeout.
///
/// A vote for a leadership transfer is not withheld: the leader that hands
/// over stopped reading on its lease first (`Shared::handing_over`), and any
/// leader before it was already replaced by an election. Withheld, it left
/// a leader that had itself just restarted unable to hand over on leaving.
pub fn votes_withheld(shared: &Shared, transfer: bool) -> Option<Duration> {
    withheld(shared.restored, transfer, shared.started.elapsed(), &shared.raft_config)
}

fn withheld(restored: bool, transfer: bool, since_start: Duration, raft: &openraft::Config) -> Option<Duration> {
    let quiet = Duration::from_millis(raft.election_timeout_min);
    (restored && !transfer && since_start < quiet).then(|| quiet - since_start)
}

/// Confirms our leadership (a heartbeat round, or the lease where allowed)
/// and returns the index a linearizable read must wait for.
async fn local_read_index(shared: &Shared) -> Result<u64, GroupError> {
    let rule = read_rule(
        shared.config.read_lease.load(Ordering::Relaxed),
        shared.handing_over.load(Ordering::SeqCst),
        &shared.raft_config,
    );
    let linearizer = shared
        .raft()
        .get_read_linearizer(rule.option())
        .await
        .map_err(|e| GroupError::Other(format!("cannot confirm leadership for a read: {e}")))?;
    Ok(linearizer.read_log_id().index())
}

/// Leader side of `ReadIndex`: `asker` asked, its own vote then at `term`.
pub async fn handle_read_index(shared: &Shared, asker: crate::MemberId, term: u64) -> Response {
    if !shared.raft().is_leader() {
        return shared.not_leader();
    }
    let me = shared.me;
    let acknowledged = shared
        .raft()
        .with_raft_state(move |st| {
            let vote = st.vote_ref();
            asker_completes_quorum(&Acknowledgement {
                me,
                asker,
                asker_term: term,
                leading: st.server_state == openraft::ServerState::Leader
                    && vote.is_committed()
                    && vote.leader_id.node_id == me,
                term: vote.leader_id.term,
                committed: st.local_committed().map(|c| (c.leader_id.term, c.index)),
                configs: st.membership_state.effective().get_joint_config(),
            })
        })
        .await;
    if let Ok(Some(index)) = acknowledged {
        return Response::ReadIndex { index };
    }
    match local_read_index(shared).await {
        Ok(index) => Response::ReadIndex { index },
        Err(e) => Response::Failed { reason: e.to_string() },
    }
}

/// What the leader knows when a follower asks for a read index, read in
/// one step of its Raft core.
struct Acknowledgement<'a> {
    me: crate::MemberId,
    asker: crate::MemberId,
    /// The term of the asker's vote when it asked.
    asker_term: u64,
    /// We lead, under our own committed vote.
    leading: bool,
    /// Our current term.
    term: u64,
    /// Our committed log position, as (term of its entry, index): on a
    /// leader, openraft's local commit is the one a quorum granted.
    committed: Option<(u64, u64)>,
    /// The voters of each configuration in force (two during a change).
    configs: &'a [std::collections::BTreeSet<crate::MemberId>],
}

/// The read index a follower's request earns without a heartbeat round,
/// if it does: when the leader and the asker are a majority of every
/// configuration in force, the request itself is the acknowledgement the
/// round would have collected.
///
/// Why that is enough. The read began before the asker read its own term
/// `t`, and the asker saves any vote for a later term before it grants it:
/// so up to that point it had granted none. We lead in term `T >= t` now,
/// so we granted none either. A leader of a term after `T` elected before
/// the read began would have needed a vote from a majority, and every
/// majority includes one of us two: there was none. Every entry committed
/// before the read began is thus committed in term `T` or earlier, hence in
/// our log up to our commit index, provided we have committed an entry of
/// our own term (a new leader's commit index may lag its predecessor's
/// until then). This is the quorum round's argument, with the asker's
/// request in place of its heartbeat answer; in a group of two or three
/// voters a follower's read then costs one request to the leader and no
/// round.
fn asker_completes_quorum(a: &Acknowledgement) -> Option<u64> {
    let (committed_term, index) = a.committed?;
    let majority_of_each = !a.configs.is_empty()
        && a.configs.iter().all(|voters| {
            voters.contains(&a.asker)
                && 2 * [a.me, a.asker].iter().filter(|m| voters.contains(m)).count() > voters.len()
        });
    let current = a.leading && a.asker_term <= a.term && committed_term == a.term;
    (current && a.asker != a.me && majority_of_each).then_some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voters(ids: &[crate::MemberId]) -> std::collections::BTreeSet<crate::MemberId> {
        ids.iter().copied().collect()
    }

    /// Leader 1 in term 5, its commit at index 40 of its own term, and
    /// follower 2 asking from term 5, in a group of three voters.
    fn acknowledgement(configs: &[std::collections::BTreeSet<crate::MemberId>]) -> Acknowledgement<'_> {
        Acknowledgement { me: 1, asker: 2, asker_term: 5, leading: true, term: 5, committed: Some((5, 40)), configs }
    }

    #[test]
    fn a_follower_and_its_leader_make_a_majority_of_three_and_skip_the_round() {
        let three = [voters(&[1, 2, 3])];
        assert_eq!(asker_completes_quorum(&acknowledgement(&three)), Some(40));
        let two = [voters(&[1, 2])];
        assert_eq!(asker_completes_quorum(&acknowledgement(&two)), Some(40));
        // An asker still in an earlier term has voted for no later one either.
        let behind = Acknowledgement { asker_term: 4, ..acknowledgement(&three) };
        assert_eq!(asker_completes_quorum(&behind), Some(40));
    }

    #[test]
    fn two_of_five_are_no_majority_and_a_learner_counts_for_nothing() {
        let five = [voters(&[1, 2, 3, 4, 5])];
        assert_eq!(asker_completes_quorum(&acknowledgement(&five)), None);
        let learner_asks = [voters(&[1, 3, 4])];
        assert_eq!(asker_completes_quorum(&acknowledgement(&learner_asks)), None);
        assert_eq!(asker_completes_quorum(&acknowledgement(&[])), None);
    }

    #[test]
    fn during_a_membership_change_the_pair_must_be_a_majority_of_both_configurations() {
        // Growing from three voters to five: a majority of the old
        // configuration alone could elect no one in the joint one, but the
        // rule does not lean on that: it asks a majority of each.
        let growing = [voters(&[1, 2, 3]), voters(&[1, 2, 3, 4, 5])];
        assert_eq!(asker_completes_quorum(&acknowledgement(&growing)), None);
        let shrinking = [voters(&[1, 2, 3, 4]), voters(&[1, 2, 3])];
        assert_eq!(asker_completes_quorum(&acknowledgement(&shrinking)), None, "2 of 4 is no majority");
        let replacing = [voters(&[1, 2, 3]), voters(&[1, 2, 4])];
        assert_eq!(asker_completes_quorum(&acknowledgement(&replacing)), Some(40));
    }

    #[test]
    fn no_index_from_a_leader_that_may_be_stale_or_has_not_committed_in_its_term() {
        let three = [voters(&[1, 2, 3])];
        // The asker saw a later term: it may have voted in that election.
        let asker_ahead = Acknowledgement { asker_term: 6, ..acknowledgement(&three) };
        assert_eq!(asker_completes_quorum(&asker_ahead), None);
        // A new leader's commit index may lag what its predecessor committed.
        let fresh_leader = Acknowledgement { committed: Some((4, 38)), ..acknowledgement(&three) };
        assert_eq!(asker_completes_quorum(&fresh_leader), None);
        let nothing = Acknowledgement { committed: None, ..acknowledgement(&three) };
        assert_eq!(asker_completes_quorum(&nothing), None);
        let not_leading = Acknowledgement { leading: false, ..acknowledgement(&three) };
        assert_eq!(asker_completes_quorum(&not_leading), None);
        // The leader itself is no second member.
        let itself = Acknowledgement { asker: 1, ..acknowledgement(&three) };
        assert_eq!(asker_completes_quorum(&itself), None);
    }

    #[test]
    fn a_read_arriving_while_a_round_is_out_starts_its_own_up_to_the_limit() {
        let mut s = RoundState::<u32>::default();
        for read in 0..ROUNDS_OUT as u32 {
            assert!(s.arrive(read), "read {read} starts a round");
            assert_eq!(s.start_round(), Some(vec![read]), "it alone takes that round");
        }
        assert_eq!(s.out, ROUNDS_OUT);
        // Beyond the limit reads queue, and the first round task to come
        // back serves all of them in one round.
        assert!(!s.arrive(100));
        assert!(!s.arrive(101));
        assert_eq!(s.start_round(), Some(vec![100, 101]));
        assert_eq!(s.out, ROUNDS_OUT);
    }

    #[test]
    fn a_read_never_joins_a_round_that_was_out_before_it_arrived() {
        let mut s = RoundState::<u32>::default();
        assert!(s.arrive(1));
        assert_eq!(s.start_round(), Some(vec![1]));
        // Read 2 arrives while read 1's round is out: it is not handed
        // that round's answer, it waits in `next` for a round of its own.
        assert!(s.arrive(2));
        assert_eq!(s.next, vec![2]);
        assert_eq!(s.start_round(), Some(vec![2]));
        assert!(s.next.is_empty());
    }

    fn timeouts(heartbeat_ms: u64, suspect_ms: u64) -> openraft::Config {
        let t = crate::Timeouts {
            heartbeat: Duration::from_millis(heartbeat_ms),
            suspect: Duration::from_millis(suspect_ms),
            inactive: Duration::from_secs(15),
        };
        crate::raft::config::raft_config("c", &t).expect("valid")
    }

    #[test]
    fn reads_rest_on_the_lease_only_when_asked_and_not_while_handing_over() {
        let raft = timeouts(1000, 5000);
        let lease = ReadRule::Lease(Duration::from_secs(2));
        assert_eq!(read_rule(false, false, &raft), ReadRule::QuorumRound);
        assert_eq!(read_rule(true, false, &raft), lease);
        assert_eq!(read_rule(true, true, &raft), ReadRule::QuorumRound);
        assert_eq!(read_rule(false, true, &raft), ReadRule::QuorumRound);
    }

    #[test]
    fn the_lease_is_shorter_than_any_election_timeout_and_than_the_vote_pause() {
        for (heartbeat, suspect) in [(1000, 5000), (50, 1000), (100, 250), (1, 1), (5000, 1000)] {
            let raft = timeouts(heartbeat, suspect);
            let age = lease_age(&raft);
            let min = Duration::from_millis(raft.election_timeout_min);
            assert!(age < min, "{heartbeat}/{suspect}: lease {age:?}, election {min:?}");
            let withheld = withheld(true, false, Duration::ZERO, &raft).expect("withheld");
            assert!(withheld > age, "{heartbeat}/{suspect}: votes withheld {withheld:?}");
            // The followers' own wait before voting for another leader.
            let wait = Duration::from_millis(raft.election_timeout_max);
            assert!(wait.as_secs_f64() >= 2.5 * age.as_secs_f64(), "{heartbeat}/{suspect}");
        }
    }

    #[test]
    fn only_a_restored_member_withholds_its_vote_and_only_at_first() {
        let raft = timeouts(1000, 5000);
        assert_eq!(withheld(false, false, Duration::ZERO, &raft), None, "a new member promised nothing");
        assert_eq!(withheld(true, false, Duration::from_millis(500), &raft), Some(Duration::from_millis(2000)));
        assert_eq!(withheld(true, false, Duration::from_millis(2500), &raft), None);
    }

    /// A leader that had just restarted itself and then left could not hand
    /// over (MTR galera_ssl_cipher, galera_ssl_upgrade): its successor's
    /// transfer vote was withheld. A transfer's vote is granted.
    #[test]
    fn a_leadership_transfer_gets_the_vote_of_a_member_just_restarted() {
        let raft = timeouts(1000, 5000);
        let early = Duration::from_millis(100);
        assert!(withheld(true, false, early, &raft).is_some(), "an ordinary election waits");
        assert_eq!(withheld(true, true, early, &raft), None, "a transfer does not");
    }

    #[test]
    fn a_read_that_ran_its_round_hands_on_only_reads_queued_meanwhile() {
        let mut s = RoundState::<u32>::default();
        assert!(s.arrive(1));
        assert_eq!(s.start_round(), Some(vec![1]), "read 1 runs its own round");
        assert!(!s.hand_on(), "nobody queued: no round task");
        assert_eq!(s.out, 0);
        // At the limit, reads queue behind the rounds out; the reader whose
        // round ends first hands them on to a round task, which keeps its
        // place among the rounds out.
        for read in 0..ROUNDS_OUT as u32 {
            assert!(s.arrive(read));
            assert_eq!(s.start_round(), Some(vec![read]));
        }
        assert!(!s.arrive(100));
        assert!(s.hand_on());
        assert_eq!(s.out, ROUNDS_OUT);
        assert_eq!(s.start_round(), Some(vec![100]), "the round task serves it");
        assert_eq!(s.start_round(), None);
        assert_eq!(s.out, ROUNDS_OUT - 1);
    }

    #[test]
    fn round_tasks_end_when_no_read_waits_and_stop_counting_as_out() {
        let mut s = RoundState::<u32>::default();
        assert!(s.arrive(1));
        assert!(s.arrive(2));
        assert_eq!(s.start_round(), Some(vec![1, 2]));
        assert_eq!(s.start_round(), None, "the second task finds nothing to do");
        assert_eq!(s.out, 1);
        assert_eq!(s.start_round(), None);
        assert_eq!(s.out, 0);
        assert!(s.arrive(3), "with none out, the next read starts a round again");
    }
}
