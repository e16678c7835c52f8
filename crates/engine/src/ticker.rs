//! The core's clock and the thread that ticks it. The thread's body is the
//! node's (`connection.rs`); this owns when it runs: started at connect,
//! joined at disconnect and shutdown, and counted while it lives, since the
//! library is unmapped right after the provider's `free` and no thread of
//! ours may outlive it.

use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::named_thread::NamedThread;

pub(crate) struct Ticker {
    /// Origin of the core's tick times.
    origin: Instant,
    thread: NamedThread,
    /// Ticker threads still running, counted out as each one ends.
    live: Arc<AtomicUsize>,
    /// The ticker's last look at the receive queue found nothing behind,
    /// so it looks again only at its next tick rather than every flow tick
    /// (an idle node wakes 10 times a second, not 100). Cleared by whoever
    /// next sees something behind, who then wakes the ticker.
    idle: AtomicBool,
}

impl Default for Ticker {
    fn default() -> Ticker {
        Ticker {
            origin: Instant::now(),
            thread: NamedThread::new("tandem-ticker"),
            live: Arc::new(AtomicUsize::new(0)),
            idle: AtomicBool::new(false),
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

    /// Whether the ticker's last look found nothing behind.
    pub(crate) fn is_idle(&self) -> bool {
        self.idle.load(Ordering::SeqCst)
    }

    /// How long the ticker waits before its next look at the queue: `busy`
    /// while something was behind at its last look, else `idle`.
    pub(crate) fn look_every(&self, busy: Duration, idle: Duration) -> Duration {
        if self.is_idle() {
            idle
        } else {
            busy
        }
    }

    /// The ticker is about to look at the queue: it counts as idle from
    /// here, before it reads the queue, so that work pushed after its read
    /// finds it idle and wakes it ([`Ticker::busy`]). Marked idle after the
    /// read instead, a push between the two saw a busy ticker, did not wake
    /// it, and waited a whole tick. The fence pairs with the one in `busy`:
    /// of the ticker's read of the queue and the pusher's read of this flag,
    /// at least one sees the other's write.
    pub(crate) fn looking(&self) {
        self.idle.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// The ticker's look found something behind: it keeps its fast pace.
    pub(crate) fn found_work(&self) {
        self.idle.store(false, Ordering::SeqCst);
    }

    /// Something is behind: true when the ticker was idle, and the caller
    /// must wake it (once per idle spell, whoever sees it first). A plain
    /// load first: while the ticker is busy, as it is whenever pushes come
    /// fast, this costs no write to a shared cache line.
    pub(crate) fn busy(&self) -> bool {
        fence(Ordering::SeqCst);
        self.idle.load(Ordering::SeqCst) && self.idle.swap(false, Ordering::SeqCst)
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

    #[test]
    fn only_the_first_to_see_work_after_an_idle_spell_wakes_the_ticker() {
        let ticker = Ticker::default();
        assert!(!ticker.busy(), "not idle to begin with: nobody wakes it");
        ticker.looking();
        assert!(ticker.is_idle(), "idle from the start of its look");
        assert!(ticker.busy(), "the first one wakes it");
        assert!(!ticker.busy() && !ticker.is_idle(), "the rest need not");
    }

    #[test]
    fn a_look_that_finds_work_keeps_the_fast_pace() {
        let (busy, idle) = (Duration::from_millis(10), Duration::from_millis(100));
        let ticker = Ticker::default();
        assert_eq!(ticker.look_every(busy, idle), busy, "busy until a look finds nothing");
        ticker.looking();
        assert_eq!(ticker.look_every(busy, idle), idle);
        ticker.found_work();
        assert_eq!(ticker.look_every(busy, idle), busy);
        assert!(!ticker.busy(), "nobody need wake a busy ticker");
    }

    /// The lost wake-up: a push that lands while the ticker looks must
    /// either be seen by the look or wake the ticker, never neither.
    #[test]
    fn a_push_during_the_tickers_look_is_never_lost() {
        for _ in 0..2000 {
            let ticker = Arc::new(Ticker::default());
            let queue = Arc::new(AtomicUsize::new(0));
            let (t, q) = (ticker.clone(), queue.clone());
            let pusher = std::thread::spawn(move || {
                q.fetch_add(1, Ordering::SeqCst);
                t.busy()
            });
            ticker.looking();
            let seen = queue.load(Ordering::SeqCst) > 0;
            if seen {
                ticker.found_work();
            }
            let woken = pusher.join().unwrap();
            assert!(seen || woken, "the push was neither seen nor woke the ticker");
        }
    }
}
