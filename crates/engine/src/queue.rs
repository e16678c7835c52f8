//! The applier queue: ordered work for the server's `recv()` threads.
//!
//! Bounded in bytes of write-set data while the appliers drain it: a push
//! past the bound waits, which holds back the group's replay of history
//! instead of holding that history in memory. Until the join task has run
//! (the server is brought in step, perhaps by a state transfer that itself
//! needs the group), the queue holds everything else and pushes never wait:
//! nothing could drain it, and at startup the group replays the local log
//! before the server even has applier threads.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::admission::Admission;
use crate::certification::Verdict;
use crate::group_state::{Sender, ViewChange};
use crate::types::{Seqno, Uuid};
use crate::writeset::WriteSet;

/// Default bound on the write-set bytes waiting for the appliers.
pub const DEFAULT_BOUND_BYTES: usize = 64 << 20;

#[derive(Debug, PartialEq)]
pub enum Task {
    /// A write-set to apply (remote, or local whose client gave up waiting).
    /// `origin`: the sender's node id, as the server knows it.
    Apply {
        seqno: Seqno,
        verdict: Verdict,
        ws: WriteSet,
        origin: Uuid,
    },
    /// Bring the server in step (connect, then resume, found, or transfer).
    Connect(Admission),
    View(ViewChange),
    /// We lost the primary component (after the seqno we had reached).
    /// `removal`: the seqno of the view that removed us, which the server
    /// never sees but the monitors must pass, so that the history this node
    /// replays after it (once taken back) finds them in step.
    NonPrimary {
        after: Seqno,
        removal: Option<Seqno>,
    },
    /// We were chosen to send our state to `joiner`.
    /// `joiner`: the requesting process (node and incarnation).
    /// `bypass`: an IST's handshake, at the joiner's position.
    Donate {
        after: Seqno,
        request: Vec<u8>,
        joiner: Sender,
        bypass: Option<Seqno>,
    },
    /// The group has marked us synced.
    Synced {
        after: Seqno,
    },
    /// An ordered event this node takes no part in: the view of its own
    /// graceful leave. Its seqno passes both monitors in its turn, unseen
    /// by the server, so that what was ordered around it drains before the
    /// final view (`disconnect`).
    Pass {
        seqno: Seqno,
    },
    /// Deliver the final view and let every `recv()` return.
    Final,
    /// This process cannot go on (see `RecvEnd::RestartRequired`).
    RestartRequired,
}

impl Task {
    fn bytes(&self) -> usize {
        match self {
            Task::Apply { ws, .. } => ws.data.len(),
            _ => 0,
        }
    }
}

/// A task and when it was handed to the queue (for apply latency and lag
/// in seconds; nothing decides on it).
struct Queued {
    task: Task,
    since: Instant,
}

struct State {
    tasks: VecDeque<Queued>,
    bytes: usize,
    /// Only the join task (and the end of a connection) is handed out until
    /// the join task has run: what arrives meanwhile waits for it.
    holding: bool,
    closed: bool,
}

impl Default for State {
    fn default() -> Self {
        State { tasks: VecDeque::new(), bytes: 0, holding: true, closed: false }
    }
}

impl State {
    /// A task that runs even while the queue holds.
    fn front_overrides_hold(&self) -> bool {
        matches!(self.tasks.front().map(|q| &q.task), Some(Task::Connect(_) | Task::Final | Task::RestartRequired))
    }
}

pub struct TaskQueue {
    state: Mutex<State>,
    ready: Condvar,
    room: Condvar,
    bound_bytes: usize,
}

impl Default for TaskQueue {
    fn default() -> Self {
        TaskQueue::with_bound(DEFAULT_BOUND_BYTES)
    }
}

impl TaskQueue {
    pub fn with_bound(bound_bytes: usize) -> TaskQueue {
        TaskQueue { state: Mutex::default(), ready: Condvar::new(), room: Condvar::new(), bound_bytes }
    }

    /// Appends a task, waiting while the queue is over its bound and drains.
    pub fn push(&self, task: Task) {
        // Delivered now: a wait for room is part of the write-set's lag.
        let since = Instant::now();
        let mut s = self.state.lock();
        while !s.closed && !s.holding && s.bytes > self.bound_bytes && !s.tasks.is_empty() {
            // Woken by pops; the timeout only guards against a lost wake-up.
            self.room.wait_for(&mut s, Duration::from_millis(200));
        }
        if s.closed {
            return;
        }
        s.bytes += task.bytes();
        s.tasks.push_back(Queued { task, since });
        self.ready.notify_one();
    }

    /// Whether tasks carrying `bytes` in all can be pushed now without
    /// waiting for room. A task's bytes are its write-set's data, never more
    /// than the message it came in; pops only make more room.
    pub fn has_room(&self, bytes: usize) -> bool {
        let s = self.state.lock();
        s.closed || s.holding || s.bytes.saturating_add(bytes) <= self.bound_bytes
    }

    /// The join task runs before everything already queued.
    pub fn push_front(&self, task: Task) {
        let mut s = self.state.lock();
        if s.closed {
            return;
        }
        s.bytes += task.bytes();
        s.tasks.push_front(Queued { task, since: Instant::now() });
        self.ready.notify_one();
    }

    /// The end of the connection (`disconnect`). With `drain`, behind
    /// everything already queued: what the group ordered before this node
    /// left is applied, as Galera applies what its group delivered before
    /// its own leave, so the monitors drain and the local clients ordered
    /// among those write-sets commit. Otherwise, and always while the queue
    /// holds (the join task has not run: nothing queued can be applied),
    /// first, and nothing queued is applied. Never waits for room. Returns
    /// whether it went behind other tasks.
    pub fn push_final(&self, drain: bool) -> bool {
        let mut s = self.state.lock();
        if s.closed {
            return false;
        }
        let queued = Queued { task: Task::Final, since: Instant::now() };
        let behind = drain && !s.holding && !s.tasks.is_empty();
        if behind {
            s.tasks.push_back(queued);
        } else {
            s.tasks.push_front(queued);
        }
        self.ready.notify_all();
        behind
    }

    /// Blocks for the next task; `None` once closed.
    #[cfg(test)]
    pub fn pop(&self) -> Option<Task> {
        self.pop_timed().map(|(task, _)| task)
    }

    /// Blocks for the next task and when it was queued; `None` once closed.
    pub fn pop_timed(&self) -> Option<(Task, Instant)> {
        let mut s = self.state.lock();
        loop {
            if s.closed {
                return None;
            }
            if !s.holding || s.front_overrides_hold() {
                if let Some(Queued { task, since }) = s.tasks.pop_front() {
                    s.bytes -= task.bytes();
                    if matches!(task, Task::Connect(_)) {
                        s.holding = true;
                    }
                    if matches!(task, Task::Final) {
                        // Nothing after the end of the connection is applied
                        // (`close` drops it): no other receiver may start on it
                        // while the final view goes in.
                        s.tasks.clear();
                        s.bytes = 0;
                    }
                    self.room.notify_all();
                    return Some((task, since));
                }
            }
            self.ready.wait(&mut s);
        }
    }

    pub fn release_hold(&self) {
        self.state.lock().holding = false;
        self.ready.notify_all();
        self.room.notify_all();
    }

    /// Drops everything queued and wakes every waiter for good.
    pub fn close(&self) {
        let mut s = self.state.lock();
        s.closed = true;
        s.tasks.clear();
        s.bytes = 0;
        self.ready.notify_all();
        self.room.notify_all();
    }

    /// Re-opens after a disconnect, for the next `connect`.
    pub fn reopen(&self) {
        *self.state.lock() = State::default();
    }

    /// Closed: nothing queued will be applied any more.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    pub fn len(&self) -> usize {
        self.state.lock().tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Write-set bytes waiting.
    pub fn bytes(&self) -> usize {
        self.state.lock().bytes
    }

    /// How long the oldest write-set still queued has waited: how far, in
    /// time, this node's appliers are behind what it was delivered.
    pub fn oldest_wait(&self) -> Duration {
        let s = self.state.lock();
        let oldest = s.tasks.iter().find(|q| matches!(q.task, Task::Apply { .. }));
        oldest.map_or(Duration::ZERO, |q| q.since.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::types::Uuid;
    use crate::writeset::flags;

    fn apply(seqno: Seqno, len: usize) -> Task {
        let ws = WriteSet {
            source: Uuid::NIL,
            trx_id: 0,
            conn_id: 0,
            flags: flags::TRX_START | flags::TRX_END,
            last_seen: 0,
            safe: 0,
            keys: vec![],
            data: vec![0; len],
        };
        Task::Apply { seqno, verdict: Verdict::Pass { depends_on: 0 }, ws, origin: Uuid::NIL }
    }

    /// A queue past its join task.
    fn draining(bound: usize) -> TaskQueue {
        let q = TaskQueue::with_bound(bound);
        q.release_hold();
        q
    }

    #[test]
    fn before_the_join_task_nothing_but_it_is_handed_out_and_pushes_never_wait() {
        let q = Arc::new(TaskQueue::with_bound(10));
        for s in 1..20 {
            q.push(apply(s, 50)); // far over the bound: nobody could drain it yet
        }
        let popper = {
            let q = q.clone();
            std::thread::spawn(move || q.pop())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!popper.is_finished(), "history waits for the join task");
        let view = ViewChange { state_id: Default::default(), view_no: 1, members: vec![] };
        q.push_front(Task::Connect(Admission { plan: crate::admission::Plan::Transfer, view }));
        assert!(matches!(popper.join().unwrap(), Some(Task::Connect(_))));
        q.release_hold();
        assert_eq!(q.pop(), Some(apply(1, 50)));
    }

    /// A node that leaves applies what its group ordered before: the end
    /// of the connection goes behind it, and nothing after the end is
    /// handed out (it would be applied past the saved position).
    #[test]
    fn the_end_of_a_connection_comes_after_what_was_queued_and_nothing_after_it() {
        let q = draining(1 << 20);
        for s in 1..5 {
            q.push(apply(s, 10));
        }
        assert!(q.push_final(true), "behind four write-sets");
        q.push(apply(5, 10)); // too late: after the end
        for s in 1..5 {
            assert_eq!(q.pop(), Some(apply(s, 10)));
        }
        assert_eq!(q.pop(), Some(Task::Final));
        assert!(q.is_empty(), "another receiver would apply past the saved position");
        assert_eq!(q.bytes(), 0);
    }

    /// Before the join task has run nothing queued can be applied (the
    /// server is not in step), so the end of the connection goes first; so
    /// it does when the node is not to drain (it was not serving clients).
    #[test]
    fn a_held_queue_or_one_not_to_drain_ends_at_once() {
        for (q, drain) in [(TaskQueue::with_bound(1 << 20), true), (draining(1 << 20), false)] {
            for s in 1..5 {
                q.push(apply(s, 10));
            }
            assert!(!q.push_final(drain));
            assert_eq!(q.pop(), Some(Task::Final));
            assert!(q.is_empty());
        }
    }

    #[test]
    fn a_full_queue_makes_the_pusher_wait_until_an_applier_takes_work() {
        let q = Arc::new(draining(100));
        q.push(apply(1, 80));
        q.push(apply(2, 80)); // over the bound now
        let pusher = {
            let q = q.clone();
            std::thread::spawn(move || q.push(apply(3, 80)))
        };
        // The third push cannot finish while nothing is taken: the queue
        // stays at two tasks however long we look.
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(q.len(), 2);
        }
        assert_eq!(q.pop(), Some(apply(1, 80)));
        pusher.join().unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q.bytes(), 160);
    }

    #[test]
    fn a_held_queue_never_makes_the_pusher_wait_and_connect_goes_first() {
        let q = draining(10);
        q.push(apply(5, 50));
        let view = ViewChange { state_id: Default::default(), view_no: 1, members: vec![] };
        q.push_front(Task::Connect(Admission { plan: crate::admission::Plan::Transfer, view }));
        assert!(matches!(q.pop(), Some(Task::Connect(_))));
        // Holding: pushes go in at once whatever the bound.
        for s in 6..20 {
            q.push(apply(s, 50));
        }
        assert_eq!(q.len(), 15);
        q.release_hold();
        assert_eq!(q.pop(), Some(apply(5, 50)));
    }

    #[test]
    fn close_releases_a_waiting_pusher_and_drops_the_task() {
        let q = Arc::new(draining(60));
        q.push(apply(1, 50));
        q.push(apply(2, 50));
        let pusher = {
            let q = q.clone();
            std::thread::spawn(move || q.push(apply(3, 50)))
        };
        std::thread::sleep(Duration::from_millis(50));
        q.close();
        pusher.join().unwrap();
        assert_eq!(q.pop(), None);
        assert!(q.is_empty());
    }

    #[test]
    fn the_oldest_wait_is_that_of_the_first_write_set_still_queued() {
        let q = draining(1 << 20);
        assert_eq!(q.oldest_wait(), Duration::ZERO);
        q.push(Task::Synced { after: 0 });
        assert_eq!(q.oldest_wait(), Duration::ZERO, "only write-sets count");
        q.push(apply(1, 10));
        std::thread::sleep(Duration::from_millis(30));
        q.push(apply(2, 10));
        let first = q.oldest_wait();
        assert!(first >= Duration::from_millis(30), "{first:?}");
        assert_eq!(q.pop(), Some(Task::Synced { after: 0 }));
        let (task, since) = q.pop_timed().unwrap();
        assert_eq!(task, apply(1, 10));
        // Read in this order, the first write-set's age is the later of two
        // readings of a monotonic clock and it was queued earlier: however
        // long this thread is held up between them, it is the greater.
        let second = q.oldest_wait();
        let first_now = since.elapsed();
        assert!(second < first_now, "the second write-set is younger: {second:?} vs {first_now:?}");
        q.pop();
        assert_eq!(q.oldest_wait(), Duration::ZERO);
    }
}
