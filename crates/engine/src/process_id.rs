//! Who this process is in the group: its node uuid and incarnation, set
//! together at connect (so no reader sees one without the other), and the
//! lock epoch its write-sets carry. A leaf of the shell's lock order
//! (node.rs).

use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::RwLock;

use crate::types::Uuid;

pub(crate) struct ProcessId {
    /// The node's uuid and this process's incarnation of it.
    id: RwLock<(Uuid, u32)>,
    /// The lock epoch within the incarnation (`certification::LockSession`):
    /// raised whenever a local transaction lets its row locks go before it
    /// is known how its write-set ends, read under `send_order`.
    lock_epoch: AtomicU32,
}

impl Default for ProcessId {
    fn default() -> ProcessId {
        ProcessId { id: RwLock::new((Uuid::NIL, 0)), lock_epoch: AtomicU32::new(0) }
    }
}

impl ProcessId {
    /// At connect: the identity the group gave this process.
    pub(crate) fn set(&self, me: Uuid, incarnation: u32) {
        *self.id.write() = (me, incarnation);
    }

    /// The node's uuid and this process's incarnation.
    pub(crate) fn get(&self) -> (Uuid, u32) {
        *self.id.read()
    }

    pub(crate) fn me(&self) -> Uuid {
        self.get().0
    }

    pub(crate) fn incarnation(&self) -> u32 {
        self.get().1
    }

    /// What the server knows this process by ([`crate::view::node_id`]).
    pub(crate) fn node_id(&self) -> Uuid {
        let (me, incarnation) = self.get();
        crate::view::node_id(me, incarnation)
    }

    pub(crate) fn lock_epoch(&self) -> u32 {
        self.lock_epoch.load(Ordering::Acquire)
    }

    /// Raises the lock epoch; returns the new one.
    pub(crate) fn new_lock_epoch(&self) -> u32 {
        self.lock_epoch.fetch_add(1, Ordering::AcqRel) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_set_whole_and_the_epoch_only_rises() {
        let p = ProcessId::default();
        assert_eq!(p.get(), (Uuid::NIL, 0));
        p.set(Uuid([4; 16]), 3);
        assert_eq!((p.me(), p.incarnation()), (Uuid([4; 16]), 3));
        assert_eq!(p.node_id(), crate::view::node_id(Uuid([4; 16]), 3));
        assert_eq!(p.lock_epoch(), 0);
        assert_eq!((p.new_lock_epoch(), p.new_lock_epoch()), (1, 2));
        assert_eq!(p.lock_epoch(), 2);
    }
}
