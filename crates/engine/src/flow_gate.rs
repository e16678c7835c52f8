//! The shell of flow control: the gate local writers wait at while the group
//! is paused, the time it was closed, and this node's own requests, fed to
//! the pure decision in [`crate::flow_control`]. The group's paused set is
//! ordered state (`GroupState::paused_by`); the gate follows it as this node
//! applies it, so a write-set submitted after a pause is ordered by the
//! sender that saw the pause first (see `Node::certify`, which waits at the
//! gate before it sends).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::flow_control::{FlowControl, Level, Limits, Settings};

#[derive(Debug)]
struct GateState {
    fc: FlowControl,
    /// Members of the primary view (the limit grows with them).
    members: usize,
    /// Replication is paused: some member's pause is in effect.
    closed_since: Option<Instant>,
    /// Time closed, spells that ended; since the start and since `FLUSH STATUS`.
    closed_ns: u64,
    closed_ns_at_reset: u64,
    reset_at: Instant,
}

#[derive(Debug)]
pub(crate) struct FlowGate {
    state: Mutex<GateState>,
    opened: Condvar,
    /// `state.closed_since.is_some()`, readable without the lock: every
    /// commit checks it, and the group is rarely paused.
    closed: AtomicBool,
    /// Held from a decision to its message's submission: appliers and the
    /// group's delivery decide concurrently, and a continue submitted after
    /// the pause decided after it would leave the group running while this
    /// node waits for its pause (until the repeat).
    pub(crate) sending: Mutex<()>,
}

impl Default for FlowGate {
    fn default() -> Self {
        let state = GateState {
            fc: FlowControl::default(),
            members: 1,
            closed_since: None,
            closed_ns: 0,
            closed_ns_at_reset: 0,
            reset_at: Instant::now(),
        };
        FlowGate {
            state: Mutex::new(state),
            opened: Condvar::new(),
            closed: AtomicBool::new(false),
            sending: Mutex::new(()),
        }
    }
}

/// What `SHOW STATUS` shows of flow control.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GateStatus {
    pub paused_ns: u64,
    /// Fraction of the time since `FLUSH STATUS` the gate was closed.
    pub paused_fraction: f64,
    pub active: bool,
    pub requested: bool,
    pub limits: Limits,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl FlowGate {
    /// The group's ordered flow-control state after an event: whether
    /// replication is paused, whether a pause of ours is in effect, and the
    /// view's size. Returns a message to send (a pause of ours got dropped
    /// or is no longer wanted).
    pub fn observe(&self, paused: bool, mine: bool, members: usize, now_ms: u64) -> Option<bool> {
        let mut s = self.state.lock();
        s.members = members.max(1);
        match (s.closed_since, paused) {
            (None, true) => s.closed_since = Some(Instant::now()),
            (Some(since), false) => {
                s.closed_ns += nanos(since.elapsed());
                s.closed_since = None;
                self.opened.notify_all();
            }
            _ => {}
        }
        self.closed.store(paused, Ordering::Release);
        s.fc.on_ordered(mine, now_ms)
    }

    /// Whether a queue at `level` could change what this node asks for: only
    /// then is it worth finding out whether this node may pause the group.
    pub fn may_act(&self, level: Level, settings: &Settings) -> bool {
        let s = self.state.lock();
        s.fc.requested() || Limits::new(settings, s.members).over_upper(level)
    }

    pub fn on_queue(&self, level: Level, settings: &Settings, eligible: bool, now_ms: u64) -> Option<bool> {
        let mut s = self.state.lock();
        let limits = Limits::new(settings, s.members);
        s.fc.on_queue(level, &limits, eligible, now_ms)
    }

    pub fn on_tick(&self, eligible: bool, now_ms: u64) -> Option<bool> {
        self.state.lock().fc.on_tick(eligible, now_ms)
    }

    #[cfg(test)]
    pub fn is_closed_for_tests(&self) -> bool {
        self.state.lock().closed_since.is_some()
    }

    /// Waits up to `timeout` for the gate to open; true if it is open.
    pub fn wait_open(&self, timeout: Duration) -> bool {
        if !self.closed.load(Ordering::Acquire) {
            return true;
        }
        let mut s = self.state.lock();
        if s.closed_since.is_some() {
            self.opened.wait_for(&mut s, timeout);
        }
        s.closed_since.is_none()
    }

    /// Wakes every waiter to re-check why it waits (a BF abort, closing).
    pub fn wake_all(&self) {
        self.opened.notify_all();
    }

    /// `FLUSH STATUS`: the paused fraction starts over; the total does not.
    pub fn reset(&self) {
        let mut s = self.state.lock();
        let open_spell = s.closed_since.map_or(0, |since| nanos(since.elapsed()));
        s.closed_ns_at_reset = s.closed_ns + open_spell;
        s.reset_at = Instant::now();
    }

    pub fn status(&self, settings: &Settings) -> GateStatus {
        let s = self.state.lock();
        let paused_ns = s.closed_ns + s.closed_since.map_or(0, |since| nanos(since.elapsed()));
        let window = nanos(s.reset_at.elapsed()).max(1);
        GateStatus {
            paused_ns,
            paused_fraction: (paused_ns.saturating_sub(s.closed_ns_at_reset)) as f64 / window as f64,
            active: s.closed_since.is_some(),
            requested: s.fc.requested(),
            limits: Limits::new(settings, s.members),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn the_gate_follows_the_ordered_state_and_counts_its_closed_time() {
        let gate = Arc::new(FlowGate::default());
        assert!(!gate.is_closed_for_tests());
        assert_eq!(gate.observe(true, false, 3, 0), None, "someone else's pause");
        assert!(gate.is_closed_for_tests());
        let waiter = {
            let gate = gate.clone();
            std::thread::spawn(move || while !gate.wait_open(Duration::from_secs(5)) {})
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "a writer waits while the group is paused");
        gate.observe(false, false, 3, 1);
        waiter.join().unwrap();
        let status = gate.status(&Settings::default());
        assert!(status.paused_ns >= 20_000_000, "{status:?}");
        assert!(!status.active);
        gate.reset();
        assert!(gate.status(&Settings::default()).paused_fraction < 0.5);
    }

    #[test]
    fn only_a_queue_over_the_limit_or_a_pending_request_is_worth_a_look() {
        let gate = FlowGate::default();
        let settings = Settings { limit: 4, single_primary: true, ..Settings::default() };
        assert!(!gate.may_act(Level { write_sets: 4, bytes: 0 }, &settings));
        assert!(gate.may_act(Level { write_sets: 5, bytes: 0 }, &settings));
        assert_eq!(gate.on_queue(Level { write_sets: 5, bytes: 0 }, &settings, true, 0), Some(true));
        assert!(gate.may_act(Level { write_sets: 0, bytes: 0 }, &settings), "to lift the pause");
        assert!(gate.status(&settings).requested);
        // Our pause ordered, then dropped by a view while still wanted.
        assert_eq!(gate.observe(true, true, 3, 1), None);
        assert_eq!(gate.observe(false, false, 3, 2), Some(true));
    }
}
