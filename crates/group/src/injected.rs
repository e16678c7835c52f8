//! Defects put back on purpose, so that the simulation's negative tests
//! can show its checkers catch them (docs/simulation.md). Compiled in only
//! with the feature `negative-tests`, which nothing that ships enables;
//! without it every defect is off, a constant the compiler folds away.
//!
//! A defect is switched on for the current thread: a simulation steps all
//! its members on the thread of its test, so a negative test breaks only
//! its own run, not a test running beside it.

/// The defects that can be put back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defect {
    /// A leader handing its leadership over still appends what followers
    /// forward to it, instead of handing it back: its Raft core drops them
    /// without a word (the loss fixed in issue 44).
    HandOverTakesForwards,
    /// A follower's forwarding link is never taken for stalled: a dead
    /// connection swallows every payload written to it while the members
    /// live (`crate::forward_watch`).
    ForwardLinkNeverStalls,
    /// A leader that handed payloads back is passed over for the rest of
    /// its term, whatever the membership: a follower it evicted and took
    /// back forwards nothing to it until the next election.
    HandBackKeyedOnTermOnly,
    /// A leader that handed a follower's payloads back on a connection
    /// takes the later ones on it again (once the follower is a member
    /// again, say): they are ordered before the earlier ones it resends.
    TakesForwardsAfterHandingBack,
    /// A read barrier takes the member's own applied index for the read
    /// index instead of asking the leader: a follower behind the others
    /// answers a causal read from before a commit already acknowledged.
    FollowerReadsItsOwnIndex,
    /// The log acknowledges an append before it is fsynced, with
    /// `gcache.fsync` on: entries count towards a commit while a power cut
    /// can still take them.
    AcknowledgesBeforeSync,
    /// A snapshot installed from the leader is applied but not written as
    /// a checkpoint: the log after it is then not replayable from the
    /// member's disk, and a restart cannot resume it.
    ForgetsInstalledSnapshot,
    /// A leader that was itself stopped, or whose clock jumped, counts the
    /// time it did not run as its members' silence, and evicts members
    /// that are fine (`evict::asleep_itself` not asked).
    CountsItsOwnStallAsSilence,
}

#[cfg(feature = "negative-tests")]
thread_local! {
    static ON: std::cell::Cell<Option<u16>> = const { std::cell::Cell::new(None) };
}

/// Puts `defect` back on this thread (`None`: the code as it ships).
#[cfg(feature = "negative-tests")]
pub fn inject(defect: Option<Defect>) {
    set(defect.map(|d| d as u16));
}

/// Whether `defect` is on for this thread.
#[inline]
pub fn active(defect: Defect) -> bool {
    is_set(defect as u16)
}

/// Puts back the defect numbered `code` on this thread: the switch the
/// crates above share for defects of their own (the engine's number
/// theirs from 1000; this crate's are its `Defect`s' indexes).
#[cfg(feature = "negative-tests")]
pub fn set(code: Option<u16>) {
    ON.with(|on| on.set(code));
}

/// Whether the defect numbered `code` is on for this thread; a constant
/// `false` without the feature.
#[inline]
pub fn is_set(code: u16) -> bool {
    #[cfg(feature = "negative-tests")]
    {
        ON.with(|on| on.get() == Some(code))
    }
    #[cfg(not(feature = "negative-tests"))]
    {
        let _ = code;
        false
    }
}
