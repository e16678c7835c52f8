//! Whether this thread runs one of the group's callbacks into this node
//! (`crate::dispatch`): such a thread is the group's own and must never
//! wait for anything that waits for the group (`crate::send`).

use std::cell::Cell;

thread_local! {
    /// Set while this thread runs one of the replica's callbacks.
    static IN_REPLICA: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside a callback of the group (`apply`,
/// `restore`, `connectivity`): the group's own thread, which must not wait
/// for anything that waits for the group (see `crate::send`).
pub(crate) fn in_replica_callback() -> bool {
    IN_REPLICA.with(Cell::get)
}

/// Marks this thread as inside a callback until dropped (nested calls keep
/// the outer mark).
pub(crate) struct Inside(bool);

impl Inside {
    pub(crate) fn enter() -> Inside {
        Inside(IN_REPLICA.with(|c| c.replace(true)))
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        IN_REPLICA.with(|c| c.set(self.0));
    }
}
