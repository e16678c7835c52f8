//! Client threads waiting for their own message to come back in total order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::certification::Verdict;
use crate::types::{Seqno, Uuid};

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Ordered {
        seqno: Seqno,
        verdict: Verdict,
    },
    Causal(Seqno),
    /// The donor the group named, and the process (incarnation) it named:
    /// a process that restarted since will not donate.
    Donor(Option<(Uuid, u32)>),
    /// Never ordered: a later message of ours was, and the group orders one
    /// member's messages in submission order, so this one never will be.
    Lost,
}

#[derive(Default)]
pub struct Slot {
    reply: Mutex<Option<Reply>>,
    ready: Condvar,
}

impl Slot {
    fn fill(&self, reply: Reply) {
        *self.reply.lock() = Some(reply);
        self.ready.notify_all();
    }

    /// Waits up to `tick` for the reply.
    pub fn wait(&self, tick: Duration) -> Option<Reply> {
        let mut r = self.reply.lock();
        if r.is_none() {
            self.ready.wait_for(&mut r, tick);
        }
        r.take()
    }

    pub fn wake(&self) {
        let _g = self.reply.lock();
        self.ready.notify_all();
    }
}

/// Waiters by token. Tokens are handed out in the order messages reach the
/// group (see `Node::send`), which lets a delivery reveal older losses.
#[derive(Default)]
pub struct Waiters {
    next: AtomicU64,
    slots: Mutex<BTreeMap<u64, Arc<Slot>>>,
}

impl Waiters {
    /// The next token; the caller must submit in token order.
    pub fn next_token(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn register(&self, token: u64) -> Arc<Slot> {
        let slot = Arc::new(Slot::default());
        self.slots.lock().insert(token, slot.clone());
        slot
    }

    /// Hands the reply to the waiter; `false` if nobody waits (any more).
    /// Every older waiter still pending was lost.
    pub fn complete(&self, token: u64, reply: Reply) -> bool {
        let mut slots = self.slots.lock();
        let newer = slots.split_off(&token);
        let older = std::mem::replace(&mut *slots, newer);
        drop(slots);
        for lost in older.into_values() {
            lost.fill(Reply::Lost);
        }
        let slot = self.slots.lock().remove(&token);
        match slot {
            Some(slot) => {
                slot.fill(reply);
                true
            }
            None => false,
        }
    }

    /// The waiter gives up. `false` means the reply won the race: take it.
    pub fn abandon(&self, token: u64) -> bool {
        self.slots.lock().remove(&token).is_some()
    }

    pub fn wake_all(&self) {
        self.slots.lock().values().for_each(|s| s.wake());
    }
}
