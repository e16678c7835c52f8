//! The outbox: this node's messages that could not be sent at once, in
//! the order they came, until the next holder of `send_order` sends them
//! (`crate::send` says who queues here, and why).

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

    pub(crate) fn is_empty(&self) -> bool {
        self.queued.lock().is_empty()
    }

    /// Takes every message queued, oldest first.
    pub(crate) fn take_now(&self) -> Vec<Body> {
        self.queued.lock().drain(..).collect()
    }

    /// Waits up to `timeout` for a message; whether one is queued.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let mut queued = self.queued.lock();
        if queued.is_empty() {
            self.ready.wait_for(&mut queued, timeout);
        }
        !queued.is_empty()
    }

    /// Wakes the ticker (to see that the node closes).
    pub(crate) fn wake(&self) {
        let _queued = self.queued.lock();
        self.ready.notify_all();
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
        assert!(outbox.wait(Duration::from_secs(5)));
        let taken = outbox.take_now();
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
        assert!(outbox.is_empty());
    }

    /// The ticker sleeps until a message comes, then wakes at once.
    #[test]
    fn a_waiting_taker_wakes_when_a_message_comes() {
        let outbox = Arc::new(Outbox::default());
        let taker = {
            let outbox = outbox.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let queued = outbox.wait(Duration::from_secs(60));
                (queued, outbox.take_now(), started.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        outbox.push(Body::Progress(1));
        let (queued, taken, waited) = taker.join().expect("taker");
        assert!(queued);
        assert_eq!(taken.len(), 1);
        assert!(waited < Duration::from_secs(60), "woken by the message, not the timeout");
    }

    #[test]
    fn an_empty_outbox_gives_nothing_after_the_timeout() {
        let outbox = Outbox::default();
        assert!(!outbox.wait(Duration::from_millis(5)));
        assert!(outbox.take_now().is_empty());
    }
}
