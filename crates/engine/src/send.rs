//! Sending this node's messages into the total order.
//!
//! `Node::send` holds `send_order` across `GroupChannel::submit`: tokens
//! must reach the group in the order they were taken (loss detection
//! relies on it), and a submit may wait for the group runtime (a
//! follower's write to its leader waits for the socket, whose readiness a
//! runtime worker delivers; a full submit queue waits for the runtime's
//! submit task). A runtime worker that blocked on `send_order`, or on
//! `FlowGate::sending` held by a thread blocked on it, would wait for a
//! thread that waits for it; with one worker (`gcomm.threads=1`, the
//! default) nothing in the group runs any more: the same shape as the clean
//! stop that deadlocked in `Node::disconnect`.
//!
//! So what the replica's callbacks send goes through
//! [`Node::send_or_queue`], which waits for `send_order` a
//! millisecond at most: it sends at once when the lock comes free and
//! nothing is queued before it, and queues it in the [`crate::outbox`]
//! otherwise. Whoever holds `send_order` next sends the queue, in order,
//! before letting go: the next client that sends, or the ticker, which is
//! woken for it. Flow control queues its messages under its own lock and
//! sends them after (`crate::flow`).

use std::time::Duration;

use tandem_group::GroupError;

use crate::message::{Body, Envelope};
use crate::node::{Node, Sent};

/// How long `send_or_queue` waits for `send_order`. A client holds it for
/// the moment its submit takes, and a message queued behind it waits for a
/// thread to be woken (flow control's pause then comes late, and the slow
/// node's queue overshoots its limit); one that holds it longer is waiting
/// for the group, which this thread may be.
const SEND_ORDER_PATIENCE: Duration = Duration::from_millis(1);

impl Node {
    /// Sends a message nobody waits for.
    pub fn submit(&self, body: Body) -> Result<(), GroupError> {
        self.send(body, false).result
    }

    /// Sends a message, optionally registering a waiter for its return.
    /// Tokens are taken and messages submitted under one lock, so tokens
    /// reach the group in increasing order (what loss detection relies on).
    /// What waits in the outbox goes right after it, under the same lock.
    pub fn send(&self, body: Body, wait: bool) -> Sent {
        debug_assert!(
            !crate::callback::in_replica_callback(),
            "the group's threads never wait for send_order: they use send_or_queue"
        );
        let order = self.inner.send_order.lock();
        let sent = self.send_locked(body, wait);
        let unsent = self.send_queued_locked();
        drop(order);
        self.note_unsent(unsent);
        sent
    }

    /// Sends `body` now if `send_order` comes free within a moment and
    /// nothing is queued before it; queues it otherwise. Never waits longer
    /// for `send_order`: for the group's own threads, and for flow control
    /// (see the module).
    pub(crate) fn send_or_queue(&self, body: Body) {
        if self.inner.outbox.is_empty() {
            if let Some(order) = self.inner.send_order.try_lock_for(SEND_ORDER_PATIENCE) {
                let result = self.send_locked(body, false).result;
                drop(order);
                self.note_unsent(result.err().into_iter().collect());
                return;
            }
        }
        self.inner.outbox.push(body);
    }

    /// Sends a message nobody waits for, now, on this thread.
    pub(crate) fn submit_now(&self, body: Body) {
        let result = self.submit(body);
        self.note_unsent(result.err().into_iter().collect());
    }

    /// Sends what waits in the outbox if `send_order` comes free within a
    /// moment; leaves it to the ticker otherwise.
    pub(crate) fn send_queued_soon(&self) {
        if let Some(order) = self.inner.send_order.try_lock_for(SEND_ORDER_PATIENCE) {
            let unsent = self.send_queued_locked();
            drop(order);
            self.note_unsent(unsent);
        }
    }

    /// Sends what waits in the outbox (the ticker, woken for it).
    pub(crate) fn send_queued(&self) {
        let order = self.inner.send_order.lock();
        let unsent = self.send_queued_locked();
        drop(order);
        self.note_unsent(unsent);
    }

    /// The caller holds `send_order`. Returns the errors of what the group
    /// did not take.
    fn send_queued_locked(&self) -> Vec<GroupError> {
        let queued = self.inner.outbox.take_now();
        queued.into_iter().filter_map(|body| self.send_locked(body, false).result.err()).collect()
    }

    /// The caller holds `send_order`.
    fn send_locked(&self, body: Body, wait: bool) -> Sent {
        let group = self.group();
        let token = self.inner.waiters.next_token();
        let slot = wait.then(|| (token, self.inner.waiters.register(token)));
        let (source, incarnation) = self.inner.id.get();
        let epoch = self.inner.id.lock_epoch();
        let envelope = Envelope { source, incarnation, token, body, epoch };
        let sent = match group {
            Some(g) => g.submit(envelope.encode()),
            None => Err(GroupError::Closed),
        };
        if sent.is_err() {
            if let Some((token, _)) = &slot {
                self.inner.waiters.abandon(*token);
            }
        }
        Sent { waiter: slot, result: sent, body: envelope.body }
    }

    /// Messages nobody waits for that the group did not take: repeated
    /// where it matters (announcements, flow control) by the core's timers.
    fn note_unsent(&self, errors: Vec<GroupError>) {
        for e in errors {
            match e {
                // The engine is told it is primary just before the group
                // accepts submissions: an announcement made in that moment
                // goes again at the next tick, not a resend period later.
                GroupError::NonPrimary => self.inner.core.lock().on_submit_refused(),
                e => log::debug!("Not submitted (will be repeated if it matters): {e}"),
            }
        }
    }
}
