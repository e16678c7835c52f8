//! A named thread of the shell that at most one of runs at a time, and that
//! must be joined before the provider is freed: the library is unmapped
//! right after the provider's `free`, so no thread of ours may outlive it.

use std::thread::JoinHandle;

use parking_lot::Mutex;

pub(crate) struct NamedThread {
    name: &'static str,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl NamedThread {
    pub(crate) const fn new(name: &'static str) -> NamedThread {
        NamedThread { name, handle: Mutex::new(None) }
    }

    /// Runs `body` on a new thread. A thread that cannot be started (out of
    /// memory or threads) is logged and its body dropped unrun: false then.
    /// The caller joined the last one, or knows it has ended.
    pub(crate) fn spawn(&self, body: impl FnOnce() + Send + 'static) -> bool {
        match std::thread::Builder::new().name(self.name.into()).spawn(body) {
            Ok(handle) => {
                *self.handle.lock() = Some(handle);
                true
            }
            Err(e) => {
                log::error!("Could not start the {} thread: {e}", self.name);
                false
            }
        }
    }

    /// Waits for the last thread started to end, if one was and it was not
    /// joined yet. Never from that thread itself. The lock is not held while
    /// waiting, so the thread may start its successor's spawn meanwhile.
    pub(crate) fn join(&self) {
        let handle = self.handle.lock().take();
        if let Some(handle) = handle {
            // A panic in the body was logged by the panic hook; the join
            // only waits for the thread to be gone.
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_joined_thread_has_run_to_its_end_and_a_second_join_is_a_no_op() {
        let thread = NamedThread::new("tandem-test");
        let ran = Arc::new(AtomicBool::new(false));
        let seen = ran.clone();
        assert!(thread.spawn(move || {
            assert_eq!(std::thread::current().name(), Some("tandem-test"));
            std::thread::sleep(std::time::Duration::from_millis(20));
            seen.store(true, Ordering::SeqCst);
        }));
        thread.join();
        assert!(ran.load(Ordering::SeqCst), "join waited for the body");
        thread.join();
    }
}
