//! The applier queue: ordered work for the server's `recv()` threads.

use std::collections::VecDeque;

use parking_lot::{Condvar, Mutex};

use crate::certification::Verdict;
use crate::group_state::ViewChange;
use crate::types::{Seqno, Uuid};
use crate::writeset::WriteSet;

#[derive(Debug)]
pub enum Task {
    /// A write-set to apply (remote, or local whose client gave up waiting).
    Apply { seqno: Seqno, verdict: Verdict, ws: WriteSet },
    /// The first primary view that includes us: connect, then join.
    Connect(ViewChange),
    View(ViewChange),
    /// We lost the primary component (after the seqno we had reached).
    NonPrimary { after: Seqno },
    /// We were chosen to send our state to `joiner`.
    Donate { after: Seqno, request: Vec<u8>, joiner: Uuid },
    /// The group has marked us synced.
    Synced { after: Seqno },
    /// Deliver the final view and let every `recv()` return.
    Final,
}

#[derive(Default)]
struct State {
    tasks: VecDeque<Task>,
    /// No task is handed out while one thread runs the join sequence: what
    /// arrives meanwhile waits for the state transfer.
    holding: bool,
    closed: bool,
}

#[derive(Default)]
pub struct TaskQueue {
    state: Mutex<State>,
    ready: Condvar,
}

impl TaskQueue {
    pub fn push(&self, task: Task) {
        let mut s = self.state.lock();
        if s.closed {
            return;
        }
        s.tasks.push_back(task);
        self.ready.notify_one();
    }

    /// Blocks for the next task; `None` once closed and drained.
    pub fn pop(&self) -> Option<Task> {
        let mut s = self.state.lock();
        loop {
            if s.closed {
                return None;
            }
            if !s.holding {
                if let Some(task) = s.tasks.pop_front() {
                    if matches!(task, Task::Connect(_)) {
                        s.holding = true;
                    }
                    return Some(task);
                }
            }
            self.ready.wait(&mut s);
        }
    }

    pub fn release_hold(&self) {
        self.state.lock().holding = false;
        self.ready.notify_all();
    }

    pub fn close(&self) {
        let mut s = self.state.lock();
        s.closed = true;
        s.tasks.clear();
        self.ready.notify_all();
    }

    /// Re-opens after a disconnect, for the next `connect`.
    pub fn reopen(&self) {
        *self.state.lock() = State::default();
    }

    pub fn len(&self) -> usize {
        self.state.lock().tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
