//! Read barriers: the group's "now" for a causal read, without ordering
//! anything.
//!
//! A causal read must see every write acknowledged anywhere before it
//! started. Galera orders a marker through the group for each read; that
//! costs a log entry (a disk write on every member) and a full round of
//! replication per read. Raft has a cheaper answer, the read index: the
//! leader confirms it is still the leader with one heartbeat round to a
//! quorum, and its commit index at that moment covers every entry committed
//! before the read began (an acknowledged write-set is committed). A member
//! that has applied up to that index has delivered every such write-set to
//! its replica; the engine then waits for its own commit of what it was
//! delivered. A follower asks the leader for the index (one request, no log
//! entry) and waits for its own state machine.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::ReadPolicy;
use tokio::sync::oneshot;

use crate::raft::state_machine::lock;
use crate::shared::Shared;
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
}

/// A read index obtained after this call began, shared with the reads that
/// asked at the same time.
async fn shared_read_index(shared: &Arc<Shared>) -> Result<u64, GroupError> {
    let (tx, rx) = oneshot::channel();
    if lock(&shared.reads.state).arrive(tx) {
        tokio::spawn(run_rounds(shared.clone()));
    }
    rx.await.unwrap_or(Err(GroupError::Closed))
}

/// Runs rounds while reads are waiting for one.
async fn run_rounds(shared: Arc<Shared>) {
    loop {
        let Some(waiting) = lock(&shared.reads.state).start_round() else {
            return;
        };
        // A round can hang: openraft confirms leadership only once a quorum
        // answers, and a Raft instance being replaced (a component formed
        // under `pc.ignore_sb`) may never answer. Every read waiting behind
        // a hung round would hang with it, so each round is bounded and a
        // late one answers with an error the caller retries.
        let answer = tokio::time::timeout(shared.request_timeout(), read_index(&shared))
            .await
            .unwrap_or_else(|_| {
                Err(GroupError::Other(format!(
                    "no read index within {:?}",
                    shared.request_timeout()
                )))
            });
        for reader in waiting {
            let _ = reader.send(answer.clone());
        }
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
            Ok(Err(e)) if tokio::time::Instant::now() + shared.retry_pause() >= deadline => {
                return Err(e)
            }
            Ok(Err(e)) => {
                log::debug!("Read barrier: {e}; trying again");
                tokio::time::sleep(shared.retry_pause()).await;
            }
            Err(_) => {
                return Err(GroupError::Other(format!(
                    "read barrier: no read index within {timeout:?}"
                )))
            }
        }
    };
    // Our own state machine's applied index, published as each batch is
    // applied (openraft's metrics report it a little later).
    let mut applied = shared.sm.applied_index();
    let reached = tokio::time::timeout_at(deadline, async {
        applied.wait_for(|&at| at >= index).await.is_ok()
    })
    .await;
    match reached {
        Ok(true) => Ok(()),
        Ok(false) => Err(GroupError::Closed),
        Err(_) => Err(GroupError::Other(format!(
            "read barrier: log index {index} not applied here within {timeout:?}"
        ))),
    }
}

/// The leader's read index: asked of it, or ours when we lead.
async fn read_index(shared: &Shared) -> Result<u64, GroupError> {
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
    match shared
        .net
        .call(
            &addr,
            Some(leader),
            &Request::ReadIndex,
            shared.request_timeout(),
        )
        .await
    {
        Ok((_, Response::ReadIndex { index })) => Ok(index),
        Ok((_, other)) => Err(GroupError::Other(format!(
            "leader {leader} gave no read index: {other:?}"
        ))),
        Err(e) => Err(GroupError::Other(format!(
            "leader {leader} gave no read index: {e}"
        ))),
    }
}

/// Confirms our leadership with a quorum (a heartbeat round) and returns
/// the index a linearizable read must wait for.
async fn local_read_index(shared: &Shared) -> Result<u64, GroupError> {
    let linearizer = shared
        .raft()
        .get_read_linearizer(ReadPolicy::ReadIndex)
        .await
        .map_err(|e| GroupError::Other(format!("cannot confirm leadership for a read: {e}")))?;
    Ok(linearizer.read_log_id().index())
}

/// Leader side of `ReadIndex`.
pub async fn handle_read_index(shared: &Shared) -> Response {
    if !shared.raft().is_leader() {
        return shared.not_leader();
    }
    match local_read_index(shared).await {
        Ok(index) => Response::ReadIndex { index },
        Err(e) => Response::Failed {
            reason: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
