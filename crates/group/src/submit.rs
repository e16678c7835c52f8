//! Getting submitted payloads into the leader's log.
//!
//! On the leader, with nothing queued, a caller hands its payload to the Raft
//! core itself ([`direct`]). Otherwise `submit` queues, and one task per
//! member drains the queue in batches. On the leader a batch goes straight
//! into the log; on a follower it is forwarded to the leader in one request.
//! One task and one request at a time keep each member's payloads in
//! submission order.
//!
//! A forward whose answer is lost is not resent: the leader may have appended
//! it, and a duplicate would be ordered twice. Losing it is allowed (the
//! engine never waits forever for its own payload); duplicating is not.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use log::{debug, info, warn};
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::raft::types::AppPayload;
use crate::send_window;
use openraft::async_runtime::WatchReceiver;
use openraft::Instant as _;
use crate::shared::Shared;
use crate::transport::CallError;
use crate::wire::{Request, Response, APPEND_BUDGET_BYTES};
use crate::GroupError;

/// Queued payloads before `submit` blocks the caller (back-pressure).
pub const QUEUE_CAPACITY: usize = 16 * 1024;
const MAX_BATCH_LEN: usize = 4096;

pub async fn run(shared: Arc<Shared>, mut queue: mpsc::Receiver<AppPayload>) {
    while let Some(first) = queue.recv().await {
        let batch = fill_batch(first, &mut queue);
        let count = batch.len();
        deliver(&shared, batch).await;
        // Only now: a caller going around the queue must come after these.
        shared.submit_queued.fetch_sub(count, Ordering::AcqRel);
    }
}

/// On the leader, with nothing waiting in the queue, the caller's own thread
/// hands `item` to the Raft core: one thread hop (and one wake-up of a group
/// worker) less per commit. What one thread submits stays in order, and so
/// does anything submitted after another submit returned: either that one
/// is already in the core's channel, or the queue is not empty and this one
/// queues behind it. Gives `item` back when it must be queued.
///
/// Not for a group runtime thread (`block_on` would panic there).
pub fn direct(shared: &Shared, runtime: &Handle, item: AppPayload) -> Result<(), AppPayload> {
    if shared.submit_queued.load(Ordering::Acquire) != 0 {
        return Err(item);
    }
    if !shared.raft().is_leader() {
        return Err(item);
    }
    // A hold waits for other members, and the caller may hold locks of its
    // own meanwhile (the engine's send order): it waits in the queue
    // instead, where nothing else waits behind it.
    if must_hold(shared) {
        return Err(item);
    }
    runtime.block_on(append_now(shared, vec![item]));
    Ok(())
}

/// Queues `item` for the submit task, counted in `submit_queued` until the
/// task has passed it on. `may_block`: wait for room (`blocking_send` panics
/// inside a runtime, so there a full queue is an error instead).
pub fn enqueue(
    shared: &Shared,
    queue: &mpsc::Sender<AppPayload>,
    item: AppPayload,
    may_block: bool,
) -> Result<(), GroupError> {
    shared.submit_queued.fetch_add(1, Ordering::AcqRel);
    let sent = if may_block {
        queue.blocking_send(item).map_err(|_| GroupError::Closed)
    } else {
        queue.try_send(item).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => GroupError::Other("submit queue full".into()),
            mpsc::error::TrySendError::Closed(_) => GroupError::Closed,
        })
    };
    if sent.is_err() {
        shared.submit_queued.fetch_sub(1, Ordering::AcqRel);
    }
    sent
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
                // The leader went away with the request (it left or died), a
                // routine event: the engine learns which of its payloads
                // were lost and says so (a note too). A note, not a warning.
                Err(CallError::Lost(e)) => {
                    info!("Lost {count} submitted payloads on their way to leader {leader}: {e}");
                    return;
                }
                Err(e) => debug!("Leader {leader} unreachable for forwarding: {e}"),
            }
        }
        tokio::time::sleep(shared.retry_pause()).await;
    }
    warn!("Dropping {count} submitted payloads: no leader reachable");
}

/// Appends on the leader, once the send window allows ([`hold_for_slow_receivers`]).
async fn append_local(shared: &Shared, batch: Vec<AppPayload>) {
    hold_for_slow_receivers(shared).await;
    append_now(shared, batch).await;
}

/// Appends on the leader. The results are not awaited: they only tell of
/// payloads that lost their slot to a leader change, which the engine learns
/// by timeout anyway, and following them cost a task and a wake-up per batch.
async fn append_now(shared: &Shared, batch: Vec<AppPayload>) {
    let count = batch.len();
    if let Err(e) = shared.raft().client_write_many(batch).await {
        warn!("Dropping {count} submitted payloads: {e}");
    }
}

/// Waits while a live voter is more than the send window behind in
/// receiving the log ([`crate::send_window`]). Checked against openraft's
/// replication metrics, which change with every acknowledgement; the
/// timeout re-judges liveness when none comes. Only on the group's own
/// tasks, which hold no lock of the application's.
async fn hold_for_slow_receivers(shared: &Shared) {
    let mut metrics = shared.raft().metrics();
    while must_hold(shared) {
        let _ = tokio::time::timeout(HOLD_RECHECK, metrics.changed()).await;
    }
}

fn must_hold(shared: &Shared) -> bool {
    let window = shared.config.send_window.load(Ordering::Relaxed);
    if window == 0 {
        return false;
    }
    let live = shared.config.timeouts.heartbeat * 2;
    shared.with_metrics(|m| send_window::must_hold(followers(m, shared.me), window, live))
}

/// How often a hold re-judges when no acknowledgement comes.
const HOLD_RECHECK: std::time::Duration = std::time::Duration::from_millis(5);

/// The other voters, as the leader sees them (none unless leader).
fn followers(
    m: &crate::raft::types::Metrics,
    me: crate::MemberId,
) -> impl Iterator<Item = send_window::Follower> + '_ {
    let last = m.last_log_index.unwrap_or(0);
    let seen = m.replication.as_ref().zip(m.heartbeat.as_ref());
    m.membership_config
        .membership()
        .voter_ids()
        .filter(move |id| *id != me)
        .filter_map(move |id| {
            let (replication, heartbeat) = seen?;
            let acked = replication.get(&id).and_then(|l| l.as_ref()).map_or(0, |l| l.index);
            let heard = heartbeat.get(&id).and_then(|t| t.as_ref()).map(|t| t.elapsed());
            Some(send_window::Follower { behind: last.saturating_sub(acked), heard })
        })
}

/// Leader side of `Forward`.
pub async fn handle_forward(shared: &Shared, payloads: Vec<AppPayload>) -> Response {
    if !shared.raft().is_leader() {
        return shared.not_leader();
    }
    append_local(shared, payloads).await;
    Response::Done
}
