//! The core's clock and the thread that ticks it. The thread's body is the
//! node's (`connection.rs`); this owns when it runs: started at connect,
//! joined at disconnect and shutdown, and counted while it lives, since the
//! library is unmapped right after the provider's `free` and no thread of
//! ours may outlive it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::named_thread::NamedThread;

pub(crate) struct Ticker {
    /// Origin of the core's tick times.
    origin: Instant,
    thread: NamedThread,
    /// Ticker threads still running, counted out as each one ends.
    live: Arc<AtomicUsize>,
}

impl Default for Ticker {
    fn default() -> Ticker {
        Ticker {
            origin: Instant::now(),
            thread: NamedThread::new("tandem-ticker"),
            live: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// Counts a ticker thread out, however it ends.
struct Leaving(Arc<AtomicUsize>);

impl Drop for Leaving {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Ticker {
    /// Milliseconds since the node was created: the core's clock.
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Runs `body` on the ticker thread. The caller makes sure the last one
    /// was joined (a connect follows a disconnect).
    pub(crate) fn start(&self, body: impl FnOnce() + Send + 'static) {
        let live = self.live.clone();
        live.fetch_add(1, Ordering::AcqRel);
        let counted = Leaving(live);
        // Where the thread cannot start, the closure, and the count with
        // it, is dropped.
        self.thread.spawn(move || {
            let _counted = counted;
            body()
        });
    }

    /// Waits for the ticker thread to end, if one runs; the caller has told
    /// it to. Never from the ticker itself.
    pub(crate) fn join(&self) {
        self.thread.join();
    }

    /// Ticker threads still running.
    pub(crate) fn threads(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_ticker_thread_is_counted_until_it_ends_and_joined() {
        let ticker = Ticker::default();
        assert_eq!(ticker.threads(), 0);
        let stop = Arc::new(AtomicBool::new(false));
        let seen = stop.clone();
        ticker.start(move || {
            while !seen.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
        });
        assert_eq!(ticker.threads(), 1, "counted from its start");
        stop.store(true, Ordering::Release);
        ticker.join();
        assert_eq!(ticker.threads(), 0, "counted out once joined");
        ticker.join(); // nothing left to join
        let (a, b) = (ticker.now_ms(), ticker.now_ms());
        assert!(b >= a);
    }
}
