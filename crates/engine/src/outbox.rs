//! Messages the group's own threads ask this node to send, sent by the
//! ticker thread instead.
//!
//! `Node::send` holds `send_order` across `GroupChannel::submit`, and a
//! submit may wait for the group runtime: a follower's write to its leader
//! waits for the socket, whose readiness a runtime worker delivers; a full
//! submit queue waits for the runtime's submit task. A runtime worker that
//! blocked on `send_order` (or on `FlowGate::sending`, held across a send
//! before) would then wait for a thread that waits for it. With one worker
//! (`gcomm.threads=1`, the default) nothing in the group runs any more: the
//! same shape as the clean stop that deadlocked in `Node::disconnect`.
//!
//! So the replica's callbacks, which run on the group's threads, never
//! take those locks: what they send goes here, in order, and the ticker
//! sends it at once (it is woken), under `send_order` like every other
//! message. Flow-control messages come here from every thread: their
//! decision and their place in this queue are taken under one lock
//! (`FlowGate::sending`), which is never held across a wait.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::message::Body;

#[derive(Default)]
pub(crate) struct Outbox {
    queued: Mutex<VecDeque<Body>>,
    ready: Condvar,
}

impl Outbox {
    /// Queues `body` and wakes the ticker. Never waits for anything but
    /// this queue's own lock, held for moments.
    pub(crate) fn push(&self, body: Body) {
        self.queued.lock().push_back(body);
        self.ready.notify_one();
    }

    /// Waits up to `timeout` for messages, and takes all there are, oldest
    /// first (none when the time passed, or when woken by `wake`).
    pub(crate) fn take(&self, timeout: Duration) -> Vec<Body> {
        let mut queued = self.queued.lock();
        if queued.is_empty() {
            self.ready.wait_for(&mut queued, timeout);
        }
        queued.drain(..).collect()
    }

    /// Wakes the ticker (to see that the node closes).
    pub(crate) fn wake(&self) {
        let _queued = self.queued.lock();
        self.ready.notify_all();
    }

    /// Messages waiting now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queued.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    #[test]
    fn messages_are_taken_in_the_order_they_came() {
        let outbox = Outbox::default();
        for pause in [true, false, true] {
            outbox.push(Body::FlowControl { pause });
        }
        outbox.push(Body::Progress(7));
        let taken = outbox.take(Duration::from_secs(5));
        let expected = [
            Body::FlowControl { pause: true },
            Body::FlowControl { pause: false },
            Body::FlowControl { pause: true },
            Body::Progress(7),
        ];
        assert_eq!(taken.len(), expected.len());
        for (got, want) in taken.iter().zip(&expected) {
            assert_eq!(format!("{got:?}"), format!("{want:?}"));
        }
        assert_eq!(outbox.len(), 0);
    }

    /// The ticker sleeps until a message comes, then wakes at once.
    #[test]
    fn a_waiting_taker_wakes_when_a_message_comes() {
        let outbox = Arc::new(Outbox::default());
        let taker = {
            let outbox = outbox.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                (outbox.take(Duration::from_secs(60)), started.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        outbox.push(Body::Progress(1));
        let (taken, waited) = taker.join().expect("taker");
        assert_eq!(taken.len(), 1);
        assert!(waited < Duration::from_secs(60), "woken by the message, not the timeout");
    }

    #[test]
    fn an_empty_outbox_gives_nothing_after_the_timeout() {
        let outbox = Outbox::default();
        assert!(outbox.take(Duration::from_millis(5)).is_empty());
    }
}
