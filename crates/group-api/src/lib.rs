//! What the engine and the group say to each other: the group's API, in a
//! leaf crate of plain types and traits with no runtime, no consensus
//! library and no I/O behind it. The engine sees the group only through
//! [`GroupChannel`] (what it asks of the group) and [`Replica`] (what the
//! group tells it, in total order), so the consensus library behind it can
//! be swapped, and the engine's pure core (`NodeCore`, `GroupState`) builds
//! against this crate alone. `tandem-group` implements it with openraft and
//! re-exports all of it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod bytes;
mod member_info;

pub use member_info::{MemberInfo, MAX_WEIGHT};

/// Identity of a member in the group. It survives restarts together with the
/// member's durable log and vote (Raft's ordinary crash recovery); a member
/// whose durable state is gone or not trustworthy gets a fresh one, because a
/// reused id with lost state is undefined behaviour for Raft.
pub type MemberId = u64;

/// Who this process is in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub member: MemberId,
    /// The wsrep node id (Galera's gcomm uuid), as stable as `member`.
    pub uuid: [u8; 16],
    /// Counts the processes that used this identity, this one included.
    pub incarnation: u32,
    /// False when the identity was created now (no durable state, or state
    /// that could not be trusted).
    pub restored: bool,
}

/// A configuration of the group as agreed in total order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Membership {
    /// Members that count for quorum.
    pub voters: Vec<MemberId>,
    /// Members that receive everything but do not vote (joiners until synced).
    pub learners: Vec<MemberId>,
    /// Every voter and learner, with what it told us about itself.
    pub members: BTreeMap<MemberId, MemberInfo>,
}

impl Membership {
    pub fn contains(&self, id: MemberId) -> bool {
        self.members.contains_key(&id)
    }
}

/// One event of the totally ordered stream. Every member applies the same
/// events in the same order (a member that joins late gets a snapshot of the
/// replica state instead of the events before it).
#[derive(Debug)]
pub enum Ordered<'a> {
    /// A payload that `origin` submitted with [`GroupChannel::submit`].
    Message { origin: MemberId, payload: &'a [u8] },
    /// A new (uniform) membership took effect.
    Membership(Membership),
}

/// Local, unordered news about this member's connectivity. Never part of the
/// total order: two members may disagree on it for a while.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connectivity {
    /// This member is in the primary component: its submissions get ordered.
    Primary,
    /// This member lost the majority (or never reached it): nothing it submits
    /// is ordered until it is back. `reachable` are the members it still hears.
    NonPrimary { reachable: Vec<MemberId> },
}

/// The deterministic state machine the group drives. Implemented by the engine.
///
/// Calls are serialised by the group (never two at once). `apply` must not block
/// for long: it runs on the consensus task and stalls heartbeats otherwise.
pub trait Replica: Send + 'static {
    fn apply(&mut self, event: Ordered<'_>);
    /// The replica's whole state as of the last applied event, for a member that
    /// joins after the log it would need was discarded.
    fn snapshot(&self) -> Vec<u8>;
    /// Replace the state with a snapshot taken by [`Replica::snapshot`] on some member.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String>;
    fn connectivity(&mut self, now: Connectivity);
    /// Whether applying messages of `payload_bytes` in all might wait (for
    /// room in a bounded queue, say). When it cannot, the group applies them
    /// on its consensus thread directly, which is cheaper than preparing
    /// that thread for a wait; when it might, or when unsure, say so.
    fn apply_may_wait(&self, payload_bytes: usize) -> bool {
        let _ = payload_bytes;
        true
    }
    /// Where the replica is in the application's own numbering (the engine:
    /// its last seqno). Labels checkpoints, so that the group can resume
    /// replay from one at or below a given position.
    fn position(&self) -> i64;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupError {
    /// Not in the primary component; retry later or give up.
    NonPrimary,
    /// The channel was shut down or never started.
    Closed,
    /// Bad configuration or a peer that cannot be talked to; the text says why.
    Config(String),
    /// A payload larger than the group replicates in one piece
    /// (`tandem_group::MAX_PAYLOAD_BYTES`).
    TooLarge {
        bytes: usize,
        limit: usize,
    },
    Other(String),
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupError::NonPrimary => write!(f, "not in primary component"),
            GroupError::Closed => write!(f, "group channel closed"),
            GroupError::Config(s) => write!(f, "configuration error: {s}"),
            GroupError::TooLarge { bytes, limit } => {
                write!(f, "payload of {bytes} bytes exceeds the {limit} byte limit")
            }
            GroupError::Other(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for GroupError {}

/// The log as a cache of history, for status variables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStatus {
    /// The lowest application position the log can replay from (one above
    /// its oldest checkpoint's position); `None` when unknown.
    pub replay_from: Option<i64>,
    /// Bytes of log on disk (or in memory).
    pub bytes: u64,
    /// Milliseconds since the oldest replayable history was ordered.
    pub reach_ms: Option<u64>,
    /// Bytes appended per second, averaged over the last minute.
    pub append_rate: u64,
}

/// `gmcast.isolate`: a member cut from every other one on purpose (tests,
/// maintenance), as Galera's option does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// 0: talking to the group.
    #[default]
    Off,
    /// 1: every connection closed and every new one refused, both ways,
    /// until set back to 0; the member goes non-primary and rejoins after.
    Isolated,
    /// 2: as 1, for good: the group connection is over until a restart.
    Terminated,
}

/// Galera's partition controls. Both off (the default): only a component
/// holding more than half the voters of the last primary component goes on.
/// Either one lets a side of a partition go on alone, so both sides may take
/// writes and their histories diverge: they are for setups where the
/// operator knows the other side is dead or read-only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionPolicy {
    /// `pc.ignore_sb`: exactly half of the voters go on (a 2-node cluster
    /// that lost one node, a 2+2 split).
    pub ignore_split_brain: bool,
    /// `pc.ignore_quorum`: any part goes on, even a minority.
    pub ignore_quorum: bool,
}

/// A snapshot of the channel's own view of things, for status variables.
#[derive(Clone, Debug, Default)]
pub struct GroupStatus {
    pub me: MemberId,
    pub primary: bool,
    pub leader: Option<MemberId>,
    /// The leader's `wsrep_node_name`, when it is known and in the membership.
    pub leader_name: Option<String>,
}

/// How this member last talked to another member of the membership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The other member's name (`wsrep_node_name`).
    pub name: String,
    /// Its group address.
    pub addr: String,
    /// `Some(true)`: TLS; `Some(false)`: plaintext; `None`: no connection
    /// yet since this process started.
    pub encrypted: Option<bool>,
}

/// What the engine asks of the group.
pub trait GroupChannel: Send + Sync + 'static {
    fn me(&self) -> MemberId;
    /// Hand a payload to the group for total ordering. Returns once accepted for
    /// ordering; the ordering itself is observed through [`Replica::apply`]. A
    /// payload may still be lost if the member loses the primary component before
    /// it is ordered: the engine must not wait for it forever.
    ///
    /// On a thread of the caller's it may wait for the group's runtime: for room
    /// in the submit queue, or for the leader to read (back-pressure). So the
    /// caller must hold no lock that the group's callbacks take; on the group's
    /// own threads it never waits (it queues, or fails when the queue is full).
    fn submit(&self, payload: Vec<u8>) -> Result<(), GroupError>;
    /// Make a learner a voter (the engine calls this once a joiner is synced).
    /// Any member may call it; it is carried out by the leader.
    fn promote(&self, member: MemberId) -> Result<(), GroupError>;
    fn status(&self) -> GroupStatus;
    /// Leave gracefully: the others remove us from the membership, so quorum is
    /// computed without us. Blocks until done or the timeout passes.
    fn leave(&self, timeout: Duration) -> Result<(), GroupError>;
    /// Stop every task and thread of the channel. Idempotent.
    fn shutdown(&self);
    /// Forms a new primary component of this member alone from its state
    /// (`pc.bootstrap=YES`), when no majority can form; refused when a
    /// reachable member is more advanced.
    fn bootstrap(&self) -> Result<(), GroupError>;
    /// The application no longer needs history up to `position` replayed
    /// (it is durably applied): the log may forget it once it is over its
    /// size. Never called with a lower position than before.
    fn release_upto(&self, position: i64);
    fn cache(&self) -> CacheStatus;
    /// Entries in this member's log not yet handed to its replica: the part
    /// of the receive queue the group still holds (flow control counts it).
    fn undelivered(&self) -> u64 {
        0
    }
    /// Re-reads the TLS certificate and key (`socket.ssl_reload`): new
    /// connections use them. Fails, keeping the old ones, when a file is
    /// wrong, or when the channel is not encrypted.
    fn reload_tls(&self) -> Result<(), GroupError>;
    /// The group uuid of the primary component this member is in, `None`
    /// when it is in none. Sent in the handshake: a member of another live
    /// group with the same cluster name is refused.
    fn announce_group(&self, group: Option<[u8; 16]>);
    /// Each other member of the membership, and whether the last
    /// connection with it (either way) was encrypted.
    fn links(&self) -> Vec<Link>;
    /// Returns once every payload ordered in the group before the call has
    /// been handed to this member's replica ([`Replica::apply`]): the point
    /// a causal read waits for, found without ordering anything. Transient
    /// failures (no leader yet, a round lost to a re-forming group) are
    /// retried inside until `timeout`; only `NonPrimary` and `Closed` end it
    /// early, so a caller needs no retry loop of its own.
    fn read_barrier(&self, timeout: Duration) -> Result<(), GroupError>;
    /// `pc.ignore_sb` / `pc.ignore_quorum` changed: the next loss of the
    /// primary component is judged by the new policy.
    fn set_partition_policy(&self, policy: PartitionPolicy);
    /// `gmcast.isolate`. Refused only when asked to end a termination.
    fn isolate(&self, to: Isolation) -> Result<(), GroupError>;
    /// `pc.weight`: what this member counts for in the quorum from now on.
    /// Agreed in total order, as a membership change; returns once the
    /// membership carries it, or at once when not in the primary component
    /// (it is carried in when this member is back).
    fn set_weight(&self, weight: u32) -> Result<(), GroupError> {
        let _ = weight;
        Err(GroupError::Config("pc.weight cannot be changed on this group channel".into()))
    }
    /// The sum of the weights of the members of the current membership
    /// (`wsrep_cluster_weight` while primary); `None` when not known.
    fn cluster_weight(&self) -> Option<u64> {
        None
    }
}

/// A member whose durable state is open but not started yet: the engine
/// learns who it is before the replay of its history begins.
pub trait GroupStarter: Send {
    fn identity(&self) -> Identity;
    /// Starts the member. `app` is carried in every membership as this
    /// member's `MemberInfo::app`.
    fn start(self: Box<Self>, app: Vec<u8>, replica: Box<dyn Replica>) -> Result<Arc<dyn GroupChannel>, GroupError>;
}
