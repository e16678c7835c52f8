//! Defects put back on purpose, so that the shell simulation's negative
//! tests can show it catches them (crates/engine/tests/shell_simulation.rs).
//! Compiled in only with the feature `negative-tests`, which nothing that
//! ships enables; without it every defect is off, a constant the compiler
//! folds away.
//!
//! A defect is switched on for the current thread: the test switches it on
//! in the thread that calls into the node, so it breaks only its own run.

/// The defects that can be put back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defect {
    /// `disconnect` holds the node's `group` lock across the group's
    /// leave, as the clean stop of issue 44 did: the group's worker,
    /// applying a write-set meanwhile, waits for the lock to read the
    /// flow-control level, and the leave waits for the worker.
    HoldsGroupAcrossLeave,
    /// Flow control's message is sent while its decision lock
    /// (`FlowGate::sending`) is held: an applier that asks the group to
    /// pause waits in the group's submit for a group thread, which waits
    /// for that lock to check its own queue.
    SendsFlowControlUnderItsLock,
    /// The clean stop ends before what the group ordered to the node: the
    /// final view goes to the front of the appliers' queue, and the
    /// applier that takes it drops what is queued behind it, as before
    /// 5ad24f3 (issue 44's other hang: a seqno nobody would apply). On the
    /// stopping thread (the final view's place) and on the appliers (the
    /// drop).
    EndsBeforeItsBacklog,
}

/// Where the engine's defects start in the switch the group crate keeps
/// (`tandem_group::injected::set`), after the group's own.
const FIRST_CODE: u16 = 1000;

/// Puts `defect` back on this thread (`None`: the code as it ships).
#[cfg(feature = "negative-tests")]
pub fn inject(defect: Option<Defect>) {
    tandem_group::injected::set(defect.map(|d| FIRST_CODE + d as u16));
}

/// Whether `defect` is on for this thread.
#[inline]
pub fn active(defect: Defect) -> bool {
    tandem_group::injected::is_set(FIRST_CODE + defect as u16)
}
