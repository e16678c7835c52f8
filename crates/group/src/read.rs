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

/// Concurrent reads share read-index rounds: a read that arrives while a
/// round is out waits for the next one (the one out may have been answered
/// before the read began, so it cannot serve it), and every read waiting
/// when a round starts takes its answer. Under many readers the leader
/// confirms its leadership once per round, not once per read.
#[derive(Default)]
pub struct Rounds {
    state: Mutex<RoundState>,
}

#[derive(Default)]
struct RoundState {
    out: bool,
    next: Vec<oneshot::Sender<Result<u64, GroupError>>>,
}

/// A read index obtained after this call began, shared with the reads that
/// asked at the same time.
async fn shared_read_index(shared: &Arc<Shared>) -> Result<u64, GroupError> {
    let (tx, rx) = oneshot::channel();
    let start = {
        let mut s = lock(&shared.reads.state);
        s.next.push(tx);
        !std::mem::replace(&mut s.out, true)
    };
    if start {
        tokio::spawn(run_rounds(shared.clone()));
    }
    rx.await.unwrap_or(Err(GroupError::Closed))
}

/// Runs rounds while reads are waiting for one.
async fn run_rounds(shared: Arc<Shared>) {
    loop {
        let waiting = {
            let mut s = lock(&shared.reads.state);
            if s.next.is_empty() {
                s.out = false;
                return;
            }
            std::mem::take(&mut s.next)
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
