//! The Raft state machine: hands committed entries, in log order, to the
//! engine's [`Replica`].
//!
//! ```text
//!   committed entry ──► Normal(payload)      ──► Replica::apply(Ordered::Message)
//!                   ──► Membership(uniform)  ──► Replica::apply(Ordered::Membership)
//!                   ──► Membership(joint)    ──► (nothing: half of a change)
//!                   ──► Blank                ──► (nothing: a new leader's barrier)
//!   snapshot build  ◄── Replica::snapshot()
//!   snapshot install ─► Replica::restore()
//! ```

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::{FutureExt, Stream, StreamExt};
use log::{error, info, warn};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, RaftSnapshotBuilder};

use super::types::{uniform_view, Entry, GroupTypes, LogId, Snapshot, SnapshotMeta, StoredMembership};
use crate::store::checkpoint::{CheckpointRecord, Checkpoints};
use crate::store::log_store::DurableLog;
use crate::sync::{blocking_section, lock};
use crate::{MemberId, Membership, Ordered, Replica};

/// The engine's replica. Every call into it goes through this mutex, which is
/// what serialises `apply`, `snapshot`, `restore` and `connectivity`.
pub type SharedReplica = Arc<Mutex<Box<dyn Replica>>>;

/// Entries handed to the replica per blocking section.
const APPLY_BATCH: usize = 1024;

/// What openraft needs to know about the applied state, kept next to it.
#[derive(Default)]
struct Applied {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    /// The last uniform view handed to the replica, to log what changed.
    view: Option<Membership>,
    /// The checkpoint openraft knows as the current snapshot (by log index).
    current: Option<u64>,
    /// The checkpoint the next snapshot build returns: the purge point.
    purge_to: Option<u64>,
    /// Payload bytes applied since the last checkpoint.
    since_checkpoint: u64,
}

#[derive(Clone)]
pub struct StateMachine {
    replica: SharedReplica,
    applied: Arc<Mutex<Applied>>,
    checkpoints: Arc<Checkpoints>,
    /// A checkpoint is taken after about this many bytes of log.
    every_bytes: u64,
    /// The log index applied last, published as soon as a batch is applied:
    /// read barriers wait on it (openraft's metrics may report it later).
    applied_index: Arc<tokio::sync::watch::Sender<u64>>,
    /// The entry handed to the replica last: ahead of `applied_index`
    /// within a batch (flow control counts what is not handed over yet).
    delivered: Arc<std::sync::atomic::AtomicU64>,
    /// Where the voters of each new membership are recorded beside the
    /// state, for a later start of it (`crate::moved_on`).
    voters_record: Option<DurableLog>,
    /// This member, and how many of its own payloads were applied: a
    /// follower's forwarding link watches it (`crate::forward_watch`).
    own: Option<(MemberId, Arc<std::sync::atomic::AtomicU64>)>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl StateMachine {
    /// A state machine resuming from `resume` (a checkpoint), or from the
    /// start of the log. The current snapshot is the oldest checkpoint: the
    /// log after it is what a lagging member can still get.
    pub fn resume(
        replica: SharedReplica,
        checkpoints: Arc<Checkpoints>,
        every_bytes: u64,
        resume: Option<CheckpointRecord>,
    ) -> Result<Self, String> {
        let mut applied = Applied {
            current: checkpoints.oldest().map(|c| c.index),
            // A first checkpoint right away, so that the log always has one.
            since_checkpoint: if checkpoints.oldest().is_none() { every_bytes } else { 0 },
            ..Applied::default()
        };
        if let Some(cp) = resume {
            lock(&replica).restore(&cp.data)?;
            info!(
                "Resuming the replicated state from its checkpoint at log index {} (position {})",
                cp.index(),
                cp.position
            );
            applied.last_applied = cp.log_id;
            applied.view = uniform_view(cp.membership.membership());
            applied.membership = cp.membership;
        }
        let index = applied.last_applied.map_or(0, |l| l.index);
        Ok(StateMachine {
            replica,
            applied: Arc::new(Mutex::new(applied)),
            checkpoints,
            every_bytes: every_bytes.max(1),
            applied_index: Arc::new(tokio::sync::watch::channel(index).0),
            delivered: Arc::new(std::sync::atomic::AtomicU64::new(index)),
            voters_record: None,
            own: None,
        })
    }

    /// Records the voters of every membership applied from now on in `log`.
    pub fn recording_voters(mut self, log: DurableLog) -> Self {
        self.voters_record = Some(log);
        self
    }

    /// Counts the payloads of `me` it applies ([`StateMachine::own_applied`]).
    pub fn counting_own(mut self, me: MemberId) -> Self {
        self.own = Some((me, Arc::default()));
        self
    }

    /// How many of this member's own payloads were applied since it started
    /// (0 unless [`StateMachine::counting_own`]).
    pub fn own_applied(&self) -> u64 {
        self.own.as_ref().map_or(0, |(_, n)| n.load(std::sync::atomic::Ordering::Acquire))
    }

    /// The log index handed to the replica last.
    pub fn delivered(&self) -> u64 {
        self.delivered.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Follows the log index applied last.
    pub fn applied_index(&self) -> tokio::sync::watch::Receiver<u64> {
        self.applied_index.subscribe()
    }

    /// The next snapshot build returns the checkpoint at `index`, and
    /// openraft then purges the log up to it.
    pub fn set_purge_to(&self, index: u64) {
        lock(&self.applied).purge_to = Some(index);
    }

    /// Takes a checkpoint of the current state, on disk before it returns.
    fn checkpoint_now(&self) -> Result<CheckpointRecord, io::Error> {
        let replica = lock(&self.replica);
        let data = replica.snapshot();
        let position = replica.position();
        let mut applied = lock(&self.applied);
        let record = CheckpointRecord {
            log_id: applied.last_applied,
            membership: applied.membership.clone(),
            position,
            time_ms: now_ms(),
            data,
        };
        applied.since_checkpoint = 0;
        drop(applied);
        drop(replica);
        self.checkpoints.write(&record).map_err(io::Error::other)?;
        Ok(record)
    }

    fn snapshot_of(record: CheckpointRecord) -> Snapshot {
        Snapshot {
            meta: SnapshotMeta { last_log_id: record.log_id, last_membership: record.membership },
            snapshot: record.data,
        }
    }

    /// The caller holds the replica lock across the whole batch, and
    /// `applied` is only written under it, so a snapshot (taken under the replica lock) always
    /// sees both at the same log position. `applied` itself is only held for
    /// bookkeeping, never across a call into the replica.
    fn apply_one(&self, replica: &mut dyn Replica, entry: &Entry) {
        self.delivered.store(entry.log_id.index, std::sync::atomic::Ordering::Relaxed);
        match &entry.payload {
            EntryPayload::Blank => {}
            EntryPayload::Normal(p) => {
                replica.apply(Ordered::Message { origin: p.origin, payload: &p.bytes.0 });
                if let Some((_, count)) = self.own.as_ref().filter(|(me, _)| *me == p.origin) {
                    count.fetch_add(1, std::sync::atomic::Ordering::Release);
                }
                lock(&self.applied).since_checkpoint += p.bytes.0.len() as u64;
            }
            EntryPayload::Membership(m) => {
                let view = uniform_view(m);
                {
                    let mut applied = lock(&self.applied);
                    applied.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                    if let Some(view) = &view {
                        log_view_change(applied.view.as_ref(), view);
                        if applied.view.as_ref().is_none_or(|old| old.voters != view.voters) {
                            self.record_voters(view);
                        }
                        applied.view = Some(view.clone());
                    }
                }
                if let Some(view) = view {
                    replica.apply(Ordered::Membership(view));
                }
            }
        }
        lock(&self.applied).last_applied = Some(entry.log_id);
    }
}

impl StateMachine {
    fn record_voters(&self, view: &Membership) {
        let Some(log) = &self.voters_record else { return };
        if let Err(e) = log.save_voters(&view.voters) {
            warn!("Could not record the voters of this member's group: {e}");
        }
    }
}

/// Galera-style log lines for what a new view changed.
fn log_view_change(old: Option<&Membership>, new: &Membership) {
    let name = |id: &u64| new.members.get(id).map(|i| i.name.as_str()).unwrap_or("?");
    for id in new.members.keys() {
        let was = old.and_then(|o| role(o, *id));
        match (was, role(new, *id)) {
            (None, Some("voter")) => info!("Member {id} ({}) joined as voter", name(id)),
            (None, Some(_)) => info!("Member {id} ({}) joined as learner", name(id)),
            (Some("learner"), Some("voter")) => {
                info!("Member {id} ({}) promoted to voter", name(id))
            }
            _ => {}
        }
    }
    if let Some(old) = old {
        for (id, info) in old.members.iter().filter(|(id, _)| !new.contains(**id)) {
            info!("Member {id} ({}) left the group", info.name);
        }
    }
    info!(
        "New primary view: {} voters {:?}, {} learners {:?}",
        new.voters.len(),
        new.voters,
        new.learners.len(),
        new.learners
    );
}

fn role(m: &Membership, id: u64) -> Option<&'static str> {
    if m.voters.contains(&id) {
        Some("voter")
    } else if m.learners.contains(&id) {
        Some("learner")
    } else {
        None
    }
}

impl RaftSnapshotBuilder<GroupTypes> for StateMachine {
    type SnapshotData = Vec<u8>;

    /// A snapshot is a checkpoint: the purge point when one was chosen
    /// (older than what is applied: the log after it stays replayable),
    /// else the current state.
    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        blocking_section(|| {
            let purge_to = lock(&self.applied).purge_to.take();
            let record = match purge_to {
                Some(index) => self.checkpoints.read(index).map_err(io::Error::other)?,
                None => self.checkpoint_now()?,
            };
            lock(&self.applied).current = Some(record.index());
            Ok(Self::snapshot_of(record))
        })
    }
}

impl StateMachine {
    fn install_now(&self, meta: &SnapshotMeta, snapshot: Vec<u8>) -> Result<(), io::Error> {
        let mut replica = lock(&self.replica);
        if let Err(reason) = replica.restore(&snapshot) {
            error!("Failed to restore the group state snapshot ({} bytes): {reason}", snapshot.len());
            return Err(io::Error::other(reason));
        }
        let position = replica.position();
        drop(replica);
        info!(
            "Restored group state snapshot ({} bytes) up to log index {}",
            snapshot.len(),
            meta.last_log_id.as_ref().map_or(0, |l| l.index)
        );
        let record = CheckpointRecord {
            log_id: meta.last_log_id,
            membership: meta.last_membership.clone(),
            position,
            time_ms: now_ms(),
            data: snapshot,
        };
        if !crate::injected::active(crate::injected::Defect::ForgetsInstalledSnapshot) {
            self.checkpoints.write(&record).map_err(io::Error::other)?;
        }
        let mut applied = lock(&self.applied);
        applied.last_applied = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        applied.view = uniform_view(meta.last_membership.membership());
        applied.current = Some(record.index());
        applied.since_checkpoint = 0;
        drop(applied);
        // A snapshot may move the applied index back (a forced bootstrap
        // restarts on another history): readers wait for the new one.
        self.applied_index.send_replace(record.index());
        self.delivered.store(record.index(), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Applies `batch` under one hold of the replica lock. Right here on
    /// the worker when nothing in it can wait: one commit then costs no
    /// hand-off of this worker's other tasks to another thread (measured: a
    /// third of the group's context switches per commit). Otherwise in a
    /// blocking section: a view change, a lock held elsewhere (a snapshot,
    /// the detector), or an applier queue without room for the batch.
    fn apply_batch(&self, batch: &[EntryResponder<GroupTypes>]) {
        let apply_all = |replica: &mut dyn Replica| batch.iter().for_each(|(entry, _)| self.apply_one(replica, entry));
        if let Some(mut replica) = self.inline_replica(batch) {
            return apply_all(&mut **replica);
        }
        blocking_section(|| apply_all(&mut **lock(&self.replica)))
    }

    /// The replica, when `batch` can be applied without waiting.
    fn inline_replica(&self, batch: &[EntryResponder<GroupTypes>]) -> Option<MutexGuard<'_, Box<dyn Replica>>> {
        let mut bytes = 0;
        for (entry, _) in batch {
            match &entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(p) => bytes += p.bytes.0.len(),
                EntryPayload::Membership(_) => return None,
            }
        }
        let replica = self.replica.try_lock().ok()?;
        (!replica.apply_may_wait(bytes)).then_some(replica)
    }

    fn checkpoint_due(&self) -> bool {
        lock(&self.applied).since_checkpoint >= self.every_bytes
    }
}

impl RaftStateMachine<GroupTypes> for StateMachine {
    type SnapshotData = Vec<u8>;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let applied = lock(&self.applied);
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> Result<(), io::Error>
    where
        S: Stream<Item = Result<EntryResponder<GroupTypes>, io::Error>> + Unpin + Send,
    {
        while let Some(first) = entries.next().await {
            // Take what is already there, so that one blocking section covers
            // a batch rather than a single entry.
            let mut batch = vec![first?];
            while batch.len() < APPLY_BATCH {
                match entries.next().now_or_never() {
                    Some(Some(item)) => batch.push(item?),
                    _ => break,
                }
            }
            self.apply_batch(&batch);
            if let Some((entry, _)) = batch.last() {
                self.applied_index.send_replace(entry.log_id.index);
            }
            // Only a due checkpoint writes (and fsyncs): checking costs a
            // lock, while every blocking section hands this worker's other
            // tasks to another thread, once per batch of commits.
            if self.checkpoint_due() {
                blocking_section(|| self.checkpoint_now())?;
            }
            for responder in batch.into_iter().filter_map(|(_, r)| r) {
                responder.send(());
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: Vec<u8>) -> Result<(), io::Error> {
        blocking_section(|| self.install_now(meta, snapshot))
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        // The current one, or (if a purge took it) the oldest still there.
        let current = lock(&self.applied).current;
        let index = current
            .filter(|i| self.checkpoints.list().iter().any(|c| c.index == *i))
            .or_else(|| self.checkpoints.oldest().map(|c| c.index));
        let Some(index) = index else { return Ok(None) };
        let record = blocking_section(|| self.checkpoints.read(index)).map_err(io::Error::other)?;
        Ok(Some(Self::snapshot_of(record)))
    }
}
