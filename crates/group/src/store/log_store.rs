//! The Raft log and vote, durable (openraft's `RaftLogStorage`).
//!
//! Each entry is one checksummed record of the segment log (the gcache);
//! the vote and the purge point are small atomic files next to it. An
//! append is acknowledged (`IOFlushed`) once written to the OS, which
//! survives the death of every process; with `gcache.fsync` a flusher
//! thread fsyncs first, one fsync for whatever accumulated meanwhile
//! (group commit), which survives power loss.
//!
//! Recent entries are also kept in memory, bounded by bytes: replication
//! and the state machine read what was just appended; older reads (a
//! lagging follower, a replay after restart) go to disk.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock, RwLockWriteGuard};
use std::thread::JoinHandle;
use tokio::time::Instant;

use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{EntryPayload, RaftLogReader};
use tandem_gcache::{write_blob, SegmentInfo, SegmentLog};

use super::checkpoint::Checkpoints;
use super::disk::Disk;
use super::rate::AppendRate;
use super::{decode_entry, encode_entry, BLOB_COMMITTED, BLOB_PURGED, BLOB_VOTE};
// Disk work that may wait (fsync, reads of old entries, cuts) runs in a
// blocking section, so the worker's other tasks (heartbeats) move elsewhere.
use crate::raft::types::{Entry, GroupTypes, LogId, Vote};
use crate::sync::{blocking_section as blocking, lock};

/// `committed` is saved at most this often (it only speeds up a restart).
const COMMITTED_EVERY_MS: u128 = 1_000;

struct LogInner {
    log: SegmentLog<Disk>,
    disk: Disk,
    fsync: bool,
    vote: Option<Vote>,
    committed: Option<LogId>,
    committed_saved: Option<Instant>,
    purged: Option<LogId>,
    last: Option<LogId>,
    recent: VecDeque<Entry>,
    recent_bytes: usize,
    recent_budget: usize,
    rate: AppendRate,
}

/// The log store; clones share one log (openraft wants a separate reader).
#[derive(Clone)]
pub struct DurableLog {
    inner: Arc<RwLock<LogInner>>,
    checkpoints: Arc<Checkpoints>,
    flusher: Option<Arc<Flusher>>,
}

/// What the log starts from after recovery.
pub struct Recovered {
    pub log: SegmentLog<Disk>,
    pub disk: Disk,
    pub vote: Option<Vote>,
    pub committed: Option<LogId>,
    pub purged: Option<LogId>,
    pub last: Option<LogId>,
}

fn io_err(e: impl ToString) -> io::Error {
    io::Error::other(e.to_string())
}

/// Appends from this size up run in a blocking section (see `append`), as
/// frames of that size do on the wire (`wire::BULK_FRAME_BYTES`).
const BULK_APPEND_BYTES: usize = crate::wire::BULK_FRAME_BYTES;

fn payload_len(e: &Entry) -> usize {
    match &e.payload {
        EntryPayload::Normal(p) => p.bytes.0.len(),
        _ => 256,
    }
}

impl DurableLog {
    pub fn new(r: Recovered, checkpoints: Arc<Checkpoints>, fsync: bool, recent_budget: usize) -> DurableLog {
        let inner = LogInner {
            log: r.log,
            disk: r.disk,
            fsync,
            vote: r.vote,
            committed: r.committed,
            committed_saved: None,
            purged: r.purged,
            last: r.last,
            recent: VecDeque::new(),
            recent_bytes: 0,
            recent_budget,
            rate: AppendRate::default(),
        };
        let on_files = matches!(inner.disk, Disk::Fs { .. });
        let inner = Arc::new(RwLock::new(inner));
        let flusher = fsync.then(|| Arc::new(Flusher::start(inner.clone(), on_files)));
        DurableLog { inner, checkpoints, flusher }
    }

    fn write(&self) -> RwLockWriteGuard<'_, LogInner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read_inner(&self) -> std::sync::RwLockReadGuard<'_, LogInner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The flusher thread, joined at shutdown.
    pub fn flusher(&self) -> Option<Arc<Flusher>> {
        self.flusher.clone()
    }

    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.read_inner().log.segments()
    }

    pub fn disk_bytes(&self) -> u64 {
        self.read_inner().log.disk_bytes()
    }

    pub fn append_rate(&self) -> u64 {
        self.read_inner().rate.per_second(Instant::now())
    }

    pub fn purged(&self) -> Option<LogId> {
        self.read_inner().purged
    }

    pub fn vote_and_last(&self) -> (Option<Vote>, Option<LogId>) {
        let inner = self.read_inner();
        (inner.vote, inner.last.or(inner.purged))
    }

    /// Records the live group this state now belongs to (`BLOB_GROUP`).
    /// Without fsync: it only informs a later start (`crate::moved_on`).
    pub fn save_group(&self, group: [u8; 16]) -> Result<(), io::Error> {
        let inner = self.read_inner();
        let bytes = bincode::serialize(&group).map_err(io_err)?;
        write_blob(&inner.disk, super::BLOB_GROUP, &bytes, false).map_err(io_err)
    }

    /// Records the voters of the primary component this member is now in
    /// (`BLOB_VOTERS`). Without fsync, as the group.
    pub fn save_voters(&self, voters: &[crate::MemberId]) -> Result<(), io::Error> {
        let inner = self.read_inner();
        let bytes = bincode::serialize(voters).map_err(io_err)?;
        write_blob(&inner.disk, super::BLOB_VOTERS, &bytes, false).map_err(io_err)
    }

    /// Writes an entry and a vote outside openraft (a forced bootstrap,
    /// while openraft is stopped), durably.
    pub fn force_append(&self, entry: Entry, vote: Vote) -> Result<(), io::Error> {
        self.append_now(vec![entry])?;
        let mut inner = self.write();
        inner.log.sync().map_err(io_err)?;
        write_blob(&inner.disk, BLOB_VOTE, &bincode::serialize(&vote).map_err(io_err)?, true).map_err(io_err)?;
        inner.vote = Some(vote);
        Ok(())
    }

    /// What this log holds for a member catching up (`crate::catch_up`):
    /// its first index, and how far this member knows the log committed.
    pub fn committed_range(&self) -> (Option<u64>, Option<LogId>) {
        let inner = self.read_inner();
        let first = inner.log.first_index().or(inner.recent.front().map(|e| e.log_id.index));
        (first, inner.committed.filter(|c| Some(*c) <= inner.last))
    }

    /// Committed entries from index `from` on, encoded as stored: the one
    /// at `from`, then at most `max_bytes` of those after it but at least
    /// one; none when `from` is purged or not committed. Also how far the
    /// log is committed.
    pub fn committed_entries(&self, from: u64, max_bytes: usize) -> Result<(Vec<Vec<u8>>, Option<LogId>), io::Error> {
        const AT_MOST: u64 = 1024;
        let (first, committed) = self.committed_range();
        let held = first.is_some_and(|f| f <= from) && committed.is_some_and(|c| c.index >= from);
        if !held {
            return Ok((vec![], committed));
        }
        let end = committed.map_or(from, |c| c.index + 1).min(from + AT_MOST);
        // The entry at `from` is the asker's own last one, sent back for its
        // match check: outside the budget, so that a batch always holds one
        // new entry when there is one, however small the budget.
        let out = blocking(|| {
            let mut out = self.encoded_entries(from, from + 1, usize::MAX)?;
            if from + 1 < end {
                out.extend(self.encoded_entries(from + 1, end, max_bytes)?);
            }
            Ok::<_, io::Error>(out)
        })?;
        Ok((out, committed))
    }

    /// Appends entries another member's log committed (`crate::catch_up`,
    /// before openraft starts), fsynced, and records them as committed:
    /// openraft then replays them into the replica at its start, as it
    /// does this member's own committed log.
    pub fn append_caught_up(&self, entries: Vec<Entry>) -> Result<(), io::Error> {
        let Some(last) = entries.last().map(|e| e.log_id) else {
            return Ok(());
        };
        self.append_now(entries)?;
        let mut inner = self.write();
        inner.log.sync().map_err(io_err)?;
        if Some(last) > inner.committed {
            inner.committed = Some(last);
            let bytes = bincode::serialize(&inner.committed).map_err(io_err)?;
            write_blob(&inner.disk, BLOB_COMMITTED, &bytes, true).map_err(io_err)?;
        }
        Ok(())
    }

    /// Entries start..end as stored, at most `max_bytes` of them but at
    /// least one: those on disk go out as read, without a decode and an
    /// encode each, and only the recent ones (not yet on disk) are encoded.
    fn encoded_entries(&self, start: u64, end: u64, max_bytes: usize) -> Result<Vec<Vec<u8>>, io::Error> {
        let inner = self.read_inner();
        let first_recent = inner.recent.front().map_or(u64::MAX, |e| e.log_id.index);
        let disk_end = end.min(first_recent);
        let mut out = Vec::new();
        let mut bytes = 0;
        if start < disk_end {
            for (_, record) in inner.log.read_range(start, disk_end - 1, max_bytes).map_err(io_err)? {
                bytes += record.len();
                out.push(record);
            }
        }
        let from = start.max(first_recent);
        // The budget ran out on disk when fewer records came back than asked
        // for: the recent ones would leave a gap, so they wait for the next batch.
        let disk_read_whole = out.len() as u64 == from - start;
        if from < end && disk_read_whole {
            for entry in inner.recent.iter().skip((from - first_recent) as usize).take((end - from) as usize) {
                let encoded = encode_entry(entry);
                if !out.is_empty() && bytes + encoded.len() > max_bytes {
                    break;
                }
                bytes += encoded.len();
                out.push(encoded);
            }
        }
        Ok(out)
    }

    fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, io::Error> {
        let inner = self.read_inner();
        let first_recent = inner.recent.front().map_or(u64::MAX, |e| e.log_id.index);
        let mut out = Vec::with_capacity(end.saturating_sub(start).min(4096) as usize);
        let disk_end = end.min(first_recent);
        if start < disk_end {
            let records = inner.log.read_range(start, disk_end - 1, usize::MAX).map_err(io_err)?;
            for (_, bytes) in records {
                out.push(decode_entry(&bytes).map_err(io_err)?);
            }
        }
        let from = start.max(first_recent);
        if from < end {
            let skip = (from - first_recent) as usize;
            out.extend(inner.recent.iter().skip(skip).take((end - from) as usize).cloned());
        }
        Ok(out)
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s + 1,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => e + 1,
        Bound::Excluded(e) => *e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<GroupTypes> for DurableLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let (start, end) = bounds(&range);
        let (first, last) = {
            let inner = self.read_inner();
            let first = inner.log.first_index().or(inner.recent.front().map(|e| e.log_id.index));
            (first, inner.last.map(|l| l.index))
        };
        // What the range holds of the log; purged or future indexes are not there.
        let (Some(first), Some(last)) = (first, last) else {
            return Ok(vec![]);
        };
        let (start, end) = (start.max(first), end.min(last + 1));
        if start >= end {
            return Ok(vec![]);
        }
        // Recent entries (replication, apply) come from memory: no disk
        // wait, so no need to move the runtime's other tasks away.
        let in_memory = self.read_inner().recent.front().is_some_and(|e| e.log_id.index <= start);
        if in_memory {
            return self.entries(start, end);
        }
        blocking(|| self.entries(start, end))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.read_inner().vote)
    }
}

impl RaftLogStorage<GroupTypes> for DurableLog {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<GroupTypes>, io::Error> {
        let inner = self.read_inner();
        Ok(LogState { last_purged_log_id: inner.purged, last_log_id: inner.last.or(inner.purged) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        blocking(|| {
            let mut inner = self.write();
            // Entries written before the vote are durable before it.
            if inner.fsync {
                inner.log.sync().map_err(io_err)?;
            }
            write_blob(&inner.disk, BLOB_VOTE, &bincode::serialize(vote).map_err(io_err)?, true).map_err(io_err)?;
            inner.vote = Some(*vote);
            Ok(())
        })
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        let mut inner = self.write();
        inner.committed = committed;
        if inner.committed_saved.is_some_and(|t| t.elapsed().as_millis() < COMMITTED_EVERY_MS) {
            return Ok(());
        }
        inner.committed_saved = Some(Instant::now());
        let bytes = bincode::serialize(&committed).map_err(io_err)?;
        write_blob(&inner.disk, BLOB_COMMITTED, &bytes, false).map_err(io_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        let inner = self.read_inner();
        // A log cut at recovery may end before what was saved as committed.
        Ok(inner.committed.filter(|c| Some(*c) <= inner.last))
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<GroupTypes>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        // A write into the page cache: microseconds for ordinary write-sets,
        // not worth handing the worker's other tasks to another thread (the
        // fsync, which can take milliseconds, runs on the flusher thread).
        // Tens of MiB (a large transaction, a follower's catch-up batch) are
        // encoded, checksummed and copied for tens of milliseconds, longer
        // when the kernel throttles dirty pages: with one group worker the
        // heartbeats would wait.
        let bytes: usize = entries.iter().map(payload_len).sum();
        let written =
            if bytes >= BULK_APPEND_BYTES { blocking(|| self.append_now(entries)) } else { self.append_now(entries) };
        match written {
            Ok(()) => {
                self.acknowledge(callback);
                Ok(())
            }
            Err(e) => {
                log::error!("Could not write to the group log: {e}");
                callback.io_completed(Err(io_err(&e)));
                Err(e)
            }
        }
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        blocking(|| {
            let mut inner = self.write();
            let keep = last_log_id.map(|l| l.index);
            inner.log.truncate_after(keep).map_err(io_err)?;
            while inner.recent.back().is_some_and(|e| Some(e.log_id.index) > keep) {
                let gone = inner.recent.pop_back().expect("checked");
                inner.recent_bytes -= payload_len(&gone);
            }
            // Cutting after a point past the end cuts nothing.
            if inner.last.map(|l| l.index) > keep {
                inner.last = last_log_id.or(inner.purged);
            }
            Ok(())
        })
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        blocking(|| {
            let mut inner = self.write();
            // The purge point first: a crash may then leave segments below
            // it (harmless), never a log that starts after it.
            let bytes = bincode::serialize(&Some(log_id)).map_err(io_err)?;
            write_blob(&inner.disk, BLOB_PURGED, &bytes, true).map_err(io_err)?;
            inner.purged = Some(log_id);
            if inner.log.last_index().is_none_or(|last| last <= log_id.index) {
                // Purged past everything we hold (a snapshot from the leader):
                // the next append starts a new run of indexes.
                inner.log.truncate_after(None).map_err(io_err)?;
                inner.recent.clear();
                inner.recent_bytes = 0;
                inner.last = Some(log_id);
            } else {
                inner.log.purge_upto(log_id.index).map_err(io_err)?;
                while inner.recent.front().is_some_and(|e| e.log_id.index <= log_id.index) {
                    let gone = inner.recent.pop_front().expect("checked");
                    inner.recent_bytes -= payload_len(&gone);
                }
            }
            self.checkpoints.forget_below(log_id.index);
            Ok(())
        })
    }
}

impl DurableLog {
    /// Acknowledges an append once it is as durable as `gcache.fsync` asks:
    /// written to the OS, or fsynced too (by the flusher). openraft counts
    /// an acknowledged entry towards a commit: one acknowledged before it is
    /// durable can be committed, applied, then lost by a power cut of a
    /// majority.
    fn acknowledge(&self, callback: IOFlushed<GroupTypes>) {
        if crate::injected::active(crate::injected::Defect::AcknowledgesBeforeSync) {
            return callback.io_completed(Ok(()));
        }
        match &self.flusher {
            Some(f) => f.enqueue(callback),
            None => callback.io_completed(Ok(())),
        }
    }

    fn append_now(&self, entries: Vec<Entry>) -> Result<(), io::Error> {
        let mut inner = self.write();
        let encoded: Vec<(u64, Vec<u8>)> = entries.iter().map(|e| (e.log_id.index, encode_entry(e))).collect();
        let bytes: usize = encoded.iter().map(|(_, b)| b.len()).sum();
        inner.log.append(encoded.iter().map(|(i, b)| (*i, b.as_slice()))).map_err(io_err)?;
        inner.rate.add(Instant::now(), bytes as u64);
        for entry in entries {
            inner.last = Some(entry.log_id);
            inner.recent_bytes += payload_len(&entry);
            inner.recent.push_back(entry);
        }
        while inner.recent_bytes > inner.recent_budget && inner.recent.len() > 1 {
            let gone = inner.recent.pop_front().expect("more than one");
            inner.recent_bytes -= payload_len(&gone);
        }
        Ok(())
    }
}

/// fsyncs appended entries before acknowledging them, one fsync for all
/// that accumulated while the previous one ran. On files it is a thread of
/// its own (an fsync takes milliseconds). On a memory disk, a simulation's,
/// it is a task on the member's runtime, started by the first append, whose
/// fsync takes `MEM_FSYNC` of that runtime's time: a simulation steps
/// every member on one thread, so a thread would decide on its own when an
/// append is durable, and an fsync that took no time would leave a power
/// cut nothing to tear.
pub struct Flusher {
    inner: Arc<RwLock<LogInner>>,
    queue: Mutex<Queue>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Where appends wait for their fsync.
enum Queue {
    Thread(mpsc::Sender<IOFlushed<GroupTypes>>),
    /// A memory disk's: `None` until the first append starts the task.
    Task(Option<tokio::sync::mpsc::UnboundedSender<IOFlushed<GroupTypes>>>),
    Closed,
}

/// How long a memory disk's fsync takes (simulated time).
const MEM_FSYNC: std::time::Duration = std::time::Duration::from_millis(1);

impl Flusher {
    fn start(inner: Arc<RwLock<LogInner>>, on_files: bool) -> Flusher {
        if !on_files {
            return Flusher { inner, queue: Mutex::new(Queue::Task(None)), thread: Mutex::new(None) };
        }
        let (tx, rx) = mpsc::channel::<IOFlushed<GroupTypes>>();
        let log = inner.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{}flush", crate::raft::THREAD_PREFIX))
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut batch = vec![first];
                    batch.extend(rx.try_iter());
                    sync_and_acknowledge(&log, batch);
                }
            })
            .expect("spawn the group log flusher");
        Flusher { inner, queue: Mutex::new(Queue::Thread(tx)), thread: Mutex::new(Some(thread)) }
    }

    fn enqueue(&self, callback: IOFlushed<GroupTypes>) {
        let mut queue = lock(&self.queue);
        let refused = match &mut *queue {
            Queue::Thread(tx) => tx.send(callback).err().map(|mpsc::SendError(c)| c),
            Queue::Task(task) => {
                let tx = task.get_or_insert_with(|| {
                    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                    tokio::spawn(flush_in_memory(self.inner.clone(), rx));
                    tx
                });
                tx.send(callback).err().map(|e| e.0)
            }
            Queue::Closed => Some(callback),
        };
        drop(queue);
        if let Some(callback) = refused {
            callback.io_completed(Err(io_err("the group log is closed")));
        }
    }

    /// Flushes what is pending and joins the thread (a task ends with its
    /// runtime).
    pub fn stop(&self) {
        *lock(&self.queue) = Queue::Closed;
        let thread = lock(&self.thread).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// A memory disk's flusher task (see [`Flusher`]).
async fn flush_in_memory(
    log: Arc<RwLock<LogInner>>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<IOFlushed<GroupTypes>>,
) {
    while let Some(first) = rx.recv().await {
        tokio::time::sleep(MEM_FSYNC).await;
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        sync_and_acknowledge(&log, batch);
    }
}

/// One fsync for `batch`, then each append's acknowledgement, in order.
fn sync_and_acknowledge(log: &RwLock<LogInner>, batch: Vec<IOFlushed<GroupTypes>>) {
    let synced = log.write().unwrap_or_else(|p| p.into_inner()).log.sync();
    for callback in batch {
        callback.io_completed(synced.as_ref().map(|_| ()).map_err(io_err));
    }
}
