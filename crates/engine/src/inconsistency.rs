//! This node's data voted, or assumed, inconsistent with the group's: from
//! which seqno, and the thread that takes the node out of the cluster.
//! Nothing after that seqno is applied, grastate.dat says so until a state
//! transfer replaces the data, and the leave runs on a thread of its own
//! (the vote may be decided on the group's delivery thread, which a leave
//! waits on). A leaf of the shell's lock order (node.rs).

use parking_lot::Mutex;

use crate::named_thread::NamedThread;
use crate::types::Seqno;

pub(crate) struct Inconsistency {
    at: Mutex<Option<Seqno>>,
    leaver: NamedThread,
}

impl Default for Inconsistency {
    fn default() -> Inconsistency {
        Inconsistency { at: Mutex::new(None), leaver: NamedThread::new("tandem-leave") }
    }
}

impl Inconsistency {
    /// The seqno from which this node's data is not the group's, if so.
    pub(crate) fn at(&self) -> Option<Seqno> {
        *self.at.lock()
    }

    /// Whether the applier must leave `seqno` alone: it comes after the
    /// data went its own way.
    pub(crate) fn is_past(&self, seqno: Seqno) -> bool {
        self.at().is_some_and(|at| seqno > at)
    }

    /// The data is inconsistent from `seqno` on, unless it was from earlier
    /// already; true when this is the first time (the caller leaves then).
    pub(crate) fn mark(&self, seqno: Seqno) -> bool {
        let mut at = self.at.lock();
        let first = at.is_none();
        at.get_or_insert(seqno);
        first
    }

    /// A state transfer replaced the data.
    pub(crate) fn clear(&self) {
        *self.at.lock() = None;
    }

    /// Runs the leave on a thread of its own.
    pub(crate) fn leave(&self, leave: impl FnOnce() + Send + 'static) {
        self.leaver.spawn(leave);
    }

    /// Waits for the leave's thread to end, if one ran.
    pub(crate) fn join_leaver(&self) {
        self.leaver.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_seqno_marked_stands_until_a_transfer() {
        let i = Inconsistency::default();
        assert!(!i.is_past(5));
        assert!(i.mark(7), "the first");
        assert!(!i.mark(3), "marked already: the node is leaving");
        assert_eq!(i.at(), Some(7));
        assert!(!i.is_past(7) && i.is_past(8));
        i.clear();
        assert_eq!(i.at(), None);
        let (tx, rx) = std::sync::mpsc::channel();
        i.leave(move || tx.send(()).unwrap());
        i.join_leaver();
        assert!(rx.try_recv().is_ok(), "the leave ran and was joined");
    }
}
