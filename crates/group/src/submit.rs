//! Getting submitted payloads into the leader's log.
//!
//! `submit` only queues; one task per member drains the queue in batches. On
//! the leader a batch goes straight into the log; on a follower it is
//! forwarded to the leader in one request. One task and one request at a time
//! keep each member's payloads in submission order.
//!
//! A forward whose answer is lost is not resent: the leader may have appended
//! it, and a duplicate would be ordered twice. Losing it is allowed (the
//! engine never waits forever for its own payload); duplicating is not.

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use log::{debug, info, warn};
use tokio::sync::mpsc;

use crate::raft::types::AppPayload;
use crate::shared::Shared;
use crate::transport::CallError;
use crate::wire::{Request, Response, APPEND_BUDGET_BYTES};

/// Queued payloads before `submit` blocks the caller (back-pressure).
pub const QUEUE_CAPACITY: usize = 16 * 1024;
const MAX_BATCH_LEN: usize = 4096;

pub async fn run(shared: Arc<Shared>, mut queue: mpsc::Receiver<AppPayload>) {
    while let Some(first) = queue.recv().await {
        let batch = fill_batch(first, &mut queue);
        deliver(&shared, batch).await;
    }
}

/// Takes whatever is already queued, up to a frame's worth.
fn fill_batch(first: AppPayload, queue: &mut mpsc::Receiver<AppPayload>) -> Vec<AppPayload> {
    let mut bytes = first.bytes.0.len();
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH_LEN && bytes < APPEND_BUDGET_BYTES / 2 {
        match queue.try_recv() {
            Ok(p) => {
                bytes += p.bytes.0.len();
                batch.push(p);
            }
            Err(_) => break,
        }
    }
    batch
}

async fn deliver(shared: &Shared, batch: Vec<AppPayload>) {
    let count = batch.len();
    // Long enough to ride out one election.
    let deadline = Instant::now() + shared.suspect * 2;
    while Instant::now() < deadline {
        if shared.raft().is_leader() {
            append_local(shared, batch).await;
            return;
        }
        if let Some((leader, addr)) = shared.leader() {
            // Cloning a batch copies pointers, not payload bytes.
            let req = Request::Forward {
                payloads: batch.clone(),
            };
            match shared
                .net
                .call(&addr, Some(leader), &req, shared.request_timeout())
                .await
            {
                Ok((_, Response::Done)) => return,
                Ok((_, Response::NotLeader { .. })) => {
                    debug!("Member {leader} is no longer the leader; retrying")
                }
                // A leader whose group no longer has us (it removed us while
                // we were cut off): the rejoin takes us back, and the engine
                // resends what it still waits for. A note, not a warning.
                Ok((_, Response::Failed { reason })) => {
                    info!("Leader {leader} did not take {count} submitted payloads: {reason}");
                    return;
                }
                Ok((_, other)) => {
                    warn!("Leader {leader} did not take {count} submitted payloads: {other:?}");
                    return;
                }
                Err(CallError::Lost(e)) => {
                    warn!("Lost {count} submitted payloads on their way to leader {leader}: {e}");
                    return;
                }
                Err(e) => debug!("Leader {leader} unreachable for forwarding: {e}"),
            }
        }
        tokio::time::sleep(shared.retry_pause()).await;
    }
    warn!("Dropping {count} submitted payloads: no leader reachable");
}

/// Appends on the leader. The write results only tell us about payloads that
/// lost their slot to a leader change, which the engine learns by timeout.
async fn append_local(shared: &Shared, batch: Vec<AppPayload>) {
    let count = batch.len();
    match shared.raft().client_write_many(batch).await {
        Ok(mut results) => {
            tokio::spawn(async move {
                while let Some(result) = results.next().await {
                    match result {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => debug!("A submitted payload was not ordered: {e}"),
                        Err(_) => return,
                    }
                }
            });
        }
        Err(e) => warn!("Dropping {count} submitted payloads: {e}"),
    }
}

/// Leader side of `Forward`.
pub async fn handle_forward(shared: &Shared, payloads: Vec<AppPayload>) -> Response {
    if !shared.raft().is_leader() {
        return shared.not_leader();
    }
    append_local(shared, payloads).await;
    Response::Done
}
