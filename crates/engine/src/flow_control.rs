//! Flow control, Galera's way: a node whose receive queue grows past its
//! limit asks the whole group to pause replication, through the total order,
//! and asks it to continue once the queue is back under the lower limit.
//! Every member sees the same pause and continue messages in the same order
//! (the paused set lives in `GroupState`), so every node knows who paused the
//! group, and a member that leaves the view releases its pause with it.
//!
//! This module is the decision, pure: queue levels, the limits and whether
//! this node may pause the group go in; a message to send comes out. The
//! shell feeds it after every push and pop of the applier queue, and on the
//! ticker for repeats (a message a leader change loses is sent again).

/// A pause or continue not yet ordered is sent again after this long: it
/// may have been lost in a leader change, and every moment a lost pause
/// goes unnoticed the slow node falls further behind. A repeat that was
/// not lost is harmless (the paused set is a set).
pub const RESEND_MS: u64 = 500;

/// How full the receive queue is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Level {
    pub write_sets: usize,
    pub bytes: usize,
}

/// The settings flow control derives its limits from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// `gcs.fc_limit`, in write-sets.
    pub limit: i64,
    /// `gcs.fc_factor`: the lower limit as a fraction of the upper one.
    pub factor: f64,
    /// `gcs.fc_single_primary` (or its old name `gcs.fc_master_slave`): the
    /// limit does not grow with the number of writers.
    pub single_primary: bool,
    /// The receive queue's bound in bytes, and the fraction of it past which
    /// flow control engages on bytes (`gcs.recv_q_soft_limit`).
    pub queue_bound_bytes: usize,
    pub soft_fraction: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            limit: 16,
            factor: 1.0,
            single_primary: false,
            queue_bound_bytes: crate::queue::DEFAULT_BOUND_BYTES,
            soft_fraction: 0.25,
        }
    }
}

/// The queue levels that pause the group (over `upper`) and let it go on
/// (at or under `lower`, in both measures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub upper: Level,
    pub lower: Level,
}

impl Limits {
    /// As Galera: with several writers the limit grows with the square root
    /// of the group's size, unless the cluster is declared single-primary.
    pub fn new(s: &Settings, members: usize) -> Limits {
        let scale = if s.single_primary { 1.0 } else { (members.max(1) as f64).sqrt() };
        let factor = s.factor.clamp(0.0, 1.0);
        let upper_ws = (s.limit.max(0) as f64 * scale) as usize;
        let upper_bytes = ((s.queue_bound_bytes as f64) * s.soft_fraction.clamp(0.0, 1.0)) as usize;
        Limits {
            upper: Level { write_sets: upper_ws, bytes: upper_bytes },
            lower: Level {
                write_sets: (upper_ws as f64 * factor) as usize,
                bytes: (upper_bytes as f64 * factor) as usize,
            },
        }
    }

    pub fn over_upper(&self, l: Level) -> bool {
        l.write_sets > self.upper.write_sets || l.bytes > self.upper.bytes
    }

    fn under_lower(&self, l: Level) -> bool {
        l.write_sets <= self.lower.write_sets && l.bytes <= self.lower.bytes
    }

    /// `wsrep_flow_control_interval`'s "[ low, high ]".
    pub fn interval_text(&self) -> String {
        format!("[ {}, {} ]", self.lower.write_sets, self.upper.write_sets)
    }
}

/// This node's side of flow control.
#[derive(Clone, Debug, Default)]
pub struct FlowControl {
    /// This node wants the group paused: its queue went over the upper
    /// limit and has not yet come back under the lower one.
    requested: bool,
    /// The ordered state: the group holds a pause of ours.
    in_effect: bool,
    /// The last message sent that the group has not been seen to order
    /// yet, and when it went out (repeated if it got lost).
    pending: Option<(bool, u64)>,
}

impl FlowControl {
    pub fn requested(&self) -> bool {
        self.requested
    }

    /// The queue changed. `eligible`: this node may hold the group back at
    /// all (it is synced; a node catching up or desynced never pauses the
    /// others, as in Galera). Returns the message to send: `Some(true)` to
    /// pause the group, `Some(false)` to let it continue.
    pub fn on_queue(&mut self, level: Level, limits: &Limits, eligible: bool, now_ms: u64) -> Option<bool> {
        self.requested = eligible && if self.requested { !limits.under_lower(level) } else { limits.over_upper(level) };
        self.due(now_ms)
    }

    /// The group ordered a pause or continue of ours, or a view dropped it.
    pub fn on_ordered(&mut self, in_effect: bool, now_ms: u64) -> Option<bool> {
        self.in_effect = in_effect;
        if self.pending.is_some_and(|(sent, _)| sent == in_effect) {
            self.pending = None;
        }
        self.due(now_ms)
    }

    /// Timer: repeats a message the group has not ordered after a while.
    pub fn on_tick(&mut self, eligible: bool, now_ms: u64) -> Option<bool> {
        self.requested &= eligible;
        self.due(now_ms)
    }

    fn due(&mut self, now_ms: u64) -> Option<bool> {
        // A change of mind is measured against where the group is heading
        // once what we sent is ordered, not against what it has ordered so
        // far. The writers run again as soon as our continue is ordered,
        // and this node sees it ordered only once it has received
        // everything before it, which for the slow node can take a while:
        // a pause needed again in between must go out at once, to be
        // ordered right behind the continue (Galera likewise counts the
        // stops it sent, not the ones delivered).
        let heading = self.pending.map_or(self.in_effect, |(sent, _)| sent);
        if self.requested != heading {
            self.pending = Some((self.requested, now_ms));
            return Some(self.requested);
        }
        match self.pending {
            Some((sent, at)) if now_ms >= at + RESEND_MS => {
                if sent == self.in_effect {
                    // Ordered together with the message before it, so no
                    // change was seen. Should that earlier one still be
                    // on its way, its arrival is a change and brings this
                    // one back.
                    self.pending = None;
                    return None;
                }
                self.pending = Some((sent, now_ms));
                Some(sent)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(limit: i64, factor: f64) -> Limits {
        Limits::new(&Settings { limit, factor, single_primary: true, queue_bound_bytes: 1000, soft_fraction: 0.5 }, 3)
    }

    fn ws(n: usize) -> Level {
        Level { write_sets: n, bytes: 0 }
    }

    #[test]
    fn limits_grow_with_the_square_root_of_the_group_unless_single_primary() {
        let s = Settings { limit: 16, ..Settings::default() };
        assert_eq!(Limits::new(&s, 1).upper.write_sets, 16);
        assert_eq!(Limits::new(&s, 4).upper.write_sets, 32);
        assert_eq!(Limits::new(&s, 3).upper.write_sets, 27);
        let single = Settings { single_primary: true, ..s };
        assert_eq!(Limits::new(&single, 9).upper.write_sets, 16);
        let half = Settings { factor: 0.5, ..single };
        assert_eq!(Limits::new(&half, 9).lower.write_sets, 8);
        // Bytes: the soft fraction of the queue's bound.
        assert_eq!(Limits::new(&s, 1).upper.bytes, crate::queue::DEFAULT_BOUND_BYTES / 4);
        assert_eq!(limits(10, 0.5).lower.bytes, 250);
        assert_eq!(limits(10, 0.5).interval_text(), "[ 5, 10 ]");
    }

    #[test]
    fn pauses_over_the_upper_limit_and_continues_at_the_lower_one() {
        let l = limits(10, 0.5);
        let mut fc = FlowControl::default();
        assert_eq!(fc.on_queue(ws(10), &l, true, 0), None, "at the limit is not over it");
        assert_eq!(fc.on_queue(ws(11), &l, true, 0), Some(true));
        assert!(fc.requested());
        // In flight: nothing more to send while the queue stays up.
        assert_eq!(fc.on_queue(ws(12), &l, true, 1), None);
        assert_eq!(fc.on_ordered(true, 2), None);
        // Hysteresis: between the limits the pause holds.
        assert_eq!(fc.on_queue(ws(6), &l, true, 3), None);
        assert_eq!(fc.on_queue(ws(5), &l, true, 4), Some(false));
        assert_eq!(fc.on_ordered(false, 5), None);
        assert_eq!(fc.on_queue(ws(9), &l, true, 6), None, "under the upper limit again");
    }

    #[test]
    fn bytes_alone_engage_it_and_both_measures_must_come_down() {
        let l = limits(10, 0.5);
        let mut fc = FlowControl::default();
        assert_eq!(fc.on_queue(Level { write_sets: 1, bytes: 501 }, &l, true, 0), Some(true));
        fc.on_ordered(true, 0);
        assert_eq!(fc.on_queue(Level { write_sets: 1, bytes: 251 }, &l, true, 1), None);
        assert_eq!(fc.on_queue(Level { write_sets: 6, bytes: 0 }, &l, true, 1), None);
        assert_eq!(fc.on_queue(Level { write_sets: 5, bytes: 250 }, &l, true, 1), Some(false));
    }

    #[test]
    fn a_node_that_may_not_pause_the_group_never_does_and_lets_go_of_its_pause() {
        let l = limits(10, 1.0);
        let mut fc = FlowControl::default();
        assert_eq!(fc.on_queue(ws(100), &l, false, 0), None);
        assert_eq!(fc.on_queue(ws(100), &l, true, 0), Some(true));
        fc.on_ordered(true, 1);
        // Desynced by the operator while still over the limit.
        assert_eq!(fc.on_tick(false, 2), Some(false));
        assert!(!fc.requested());
    }

    #[test]
    fn a_lost_message_is_repeated_and_a_change_of_mind_goes_out_at_once() {
        let l = limits(10, 1.0);
        let mut fc = FlowControl::default();
        assert_eq!(fc.on_queue(ws(11), &l, true, 0), Some(true));
        assert_eq!(fc.on_tick(true, RESEND_MS - 1), None);
        assert_eq!(fc.on_tick(true, RESEND_MS), Some(true), "lost: sent again");
        // The queue drains before the pause was ever ordered: the continue
        // goes out at once, to be ordered behind the pause if that comes.
        assert_eq!(fc.on_queue(ws(0), &l, true, RESEND_MS + 1), Some(false));
        assert_eq!(fc.on_ordered(true, RESEND_MS + 2), None, "the continue is on its way");
        assert_eq!(fc.on_ordered(false, RESEND_MS + 3), None);
        assert_eq!(fc.on_tick(true, 10 * RESEND_MS), None, "nothing left to repeat");
    }

    #[test]
    fn a_pause_needed_again_before_our_continue_is_ordered_goes_out_at_once() {
        // The slow node's case: it sees its own continue ordered only once
        // it has received everything ordered before it, while the writers
        // already run again. Waiting for that to send the next pause let
        // hundreds of write-sets through (measured: queue 27 -> 449).
        let l = limits(10, 1.0);
        let mut fc = FlowControl::default();
        assert_eq!(fc.on_queue(ws(11), &l, true, 0), Some(true));
        assert_eq!(fc.on_ordered(true, 1), None);
        assert_eq!(fc.on_queue(ws(10), &l, true, 2), Some(false));
        assert_eq!(fc.on_queue(ws(11), &l, true, 3), Some(true), "not held back by the unordered continue");
        assert_eq!(fc.on_queue(ws(12), &l, true, 4), None, "and sent once");
        assert_eq!(fc.on_ordered(false, 5), None, "the continue ordered: the pause is behind it");
        assert_eq!(fc.on_ordered(true, 6), None);
        assert_eq!(fc.on_tick(true, 6 + RESEND_MS), None, "both ordered: nothing to repeat");
    }

    #[test]
    fn a_continue_and_pause_ordered_together_are_not_repeated_forever() {
        // Both in one batch: the ordered state never seemed to change.
        let l = limits(10, 1.0);
        let mut fc = FlowControl::default();
        fc.on_queue(ws(11), &l, true, 0);
        fc.on_ordered(true, 1);
        assert_eq!(fc.on_queue(ws(10), &l, true, 2), Some(false));
        assert_eq!(fc.on_queue(ws(11), &l, true, 3), Some(true));
        assert_eq!(fc.on_tick(true, 3 + RESEND_MS), None);
        assert_eq!(fc.on_tick(true, 3 + 2 * RESEND_MS), None);
        // Had the continue still been on its way, its arrival brings the
        // pause back.
        assert_eq!(fc.on_ordered(false, 4 + 2 * RESEND_MS), Some(true));
    }

    #[test]
    fn a_view_that_drops_our_pause_while_we_still_need_it_sends_it_again() {
        let l = limits(10, 1.0);
        let mut fc = FlowControl::default();
        fc.on_queue(ws(11), &l, true, 0);
        fc.on_ordered(true, 1);
        assert_eq!(fc.on_ordered(false, 2), Some(true));
    }
}
