//! This node's part in flow control: it looks at its receive queue, asks
//! the group to pause or go on (the decision is `crate::flow_control`'s,
//! the gate and its state `crate::flow_gate`'s), follows the ordered
//! pauses, and holds local writers at the gate while the group is paused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::core::LocalState;
use crate::flow_control::Level;
use crate::local_trx::Status;
use crate::message::Body;
use crate::node::Node;
use crate::stats::Stats;

impl Node {
    /// The write-sets this node is behind the group: those queued for its
    /// appliers, and those the group ordered that it has not even queued yet
    /// (on busy cores the delivery to a slow node lags). Flow control and the
    /// health agent's weight read the same figure.
    pub(crate) fn write_sets_behind(&self) -> usize {
        let undelivered = self.group().map_or(0, |g| g.undelivered() as usize);
        self.inner.queue.len() + undelivered
    }

    /// The applier queue changed: ask the group to pause or go on if the
    /// queue crossed a limit. If anything is behind and the ticker idles,
    /// it is woken to look every flow tick again.
    pub(crate) fn check_flow_control(&self) {
        let level = self.queue_level();
        let behind = level.write_sets > 0 || level.bytes > 0;
        if behind && self.inner.ticker.busy() {
            self.inner.outbox.wake();
        }
        self.act_on_queue(level);
    }

    /// The ticker's own look at the queue (see `Ticker::looking` for why
    /// it counts as idle before it reads the queue). It never wakes itself.
    pub(crate) fn ticker_looks_at_queue(&self) {
        self.inner.ticker.looking();
        let level = self.queue_level();
        if level.write_sets > 0 || level.bytes > 0 {
            self.inner.ticker.found_work();
        }
        self.act_on_queue(level);
    }

    fn queue_level(&self) -> Level {
        Level { write_sets: self.write_sets_behind(), bytes: self.inner.queue.bytes() }
    }

    /// Notes the queue's peak, and asks the group to pause or go on where
    /// the level crossed a limit.
    fn act_on_queue(&self, level: Level) {
        let inner = &self.inner;
        inner.stats.note_queue_peak(level.write_sets as i64, level.bytes as i64);
        let settings = inner.hot.flow_control();
        if !inner.flow.may_act(level, &settings) {
            return;
        }
        let eligible = self.may_pause_group();
        let sending = inner.flow.sending.lock();
        let message = inner.flow.on_queue(level, &settings, eligible, self.now_ms());
        self.send_flow_control(message, sending);
    }

    /// Every tick: repeats what a leader change lost, and lets go of a pause
    /// this node may no longer hold.
    pub(crate) fn tick_flow_control(&self) {
        let eligible = self.may_pause_group();
        let sending = self.inner.flow.sending.lock();
        let message = self.inner.flow.on_tick(eligible, self.now_ms());
        self.send_flow_control(message, sending);
    }

    /// The ordered state changed (see `NodeReplica`).
    pub(crate) fn observe_flow_control(&self, paused: bool, mine: bool, members: usize) {
        let sending = self.inner.flow.sending.lock();
        let message = self.inner.flow.observe(paused, mine, members, self.now_ms());
        self.send_flow_control(message, sending);
    }

    /// As in Galera, only a synced member of the primary component holds the
    /// group back: a node catching up or desynced by the operator lags alone.
    fn may_pause_group(&self) -> bool {
        let core = self.inner.core.lock();
        core.state() == LocalState::Synced && core.is_primary() && core.is_live()
    }

    /// Sends what flow control decided under `sending` (the guard), in the
    /// order it decided. The message is queued under the guard, and sent
    /// once it is dropped: `sending` is taken on the group's threads too
    /// (a write-set applied there checks the queue), and a submit may wait
    /// for those threads (a full submit queue; a hosted member runs every
    /// submit on them), so a sender holding `sending` across its submit
    /// could wait for a group thread that waits for `sending`. The outbox
    /// keeps the decisions in order whoever sends them.
    fn send_flow_control(&self, message: Option<bool>, sending: parking_lot::MutexGuard<'_, ()>) {
        let Some(pause) = message else { return };
        let level = (self.inner.queue.len(), self.inner.queue.bytes());
        log::debug!(
            "Flow control: {} (receive queue {} write-sets, {} bytes)",
            if pause { "pause" } else { "continue" },
            level.0,
            level.1
        );
        if pause {
            Stats::add(&self.inner.stats.flow_control_sent, 1);
        }
        if crate::injected::active(crate::injected::Defect::SendsFlowControlUnderItsLock) {
            self.send_or_queue(Body::FlowControl { pause });
            return;
        }
        self.inner.outbox.push(Body::FlowControl { pause });
        drop(sending);
        // Never waiting for `send_order` (see `crate::outbox`): what it
        // cannot send now, the ticker sends.
        self.send_queued_soon();
    }

    /// Before a local write-set goes to the group: waits while flow control
    /// pauses replication. Gives up when the transaction is BF aborted (an
    /// applier, perhaps the one the group waits for, needs its locks), when
    /// this node leaves the primary component or closes.
    pub(crate) fn wait_for_flow_control(&self, aborted: Option<&AtomicBool>) -> Result<(), Status> {
        let inner = &self.inner;
        while !inner.flow.wait_open(Duration::from_millis(100)) {
            if aborted.is_some_and(|a| a.load(Ordering::Acquire)) {
                return Err(Status::TrxFail);
            }
            if inner.closing.load(Ordering::Acquire) || !inner.core.lock().is_primary() {
                return Err(Status::ConnFail);
            }
        }
        Ok(())
    }
}
