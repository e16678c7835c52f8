//! The group's two helpers for blocking work and locks, a leaf module that
//! imports nothing of the crate: every part of the group uses them, so they
//! live below all of them.

use std::sync::{Mutex, MutexGuard};

/// Runs `f`, which may block or take long: a call into the replica (the
/// engine's own locks, a slow disk), disk work of the log, a frame of tens
/// of MiB. On the group runtime tell tokio first: it moves this worker's
/// other tasks (the Raft core, heartbeats) to another thread meanwhile, so
/// a slow replica or a large copy cannot get this member evicted.
pub fn blocking_section<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Locks `m`, also when a panic poisoned it.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside the replica poisons the mutex; the state machine task is
    // gone by then and openraft reports it as fatal, so keep serving status.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
