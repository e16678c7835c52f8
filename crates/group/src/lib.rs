//! Total order, membership and quorum.
//!
//! Everything Galera-specific (seqnos, views, certification) lives in the engine
//! on top of this crate. The engine sees the group only through [`GroupChannel`]
//! (what it asks of the group) and [`Replica`] (what the group tells it, in total
//! order), so the consensus library behind it can be swapped.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod detector;
pub mod entropy;
mod evict;
mod forward;
mod forward_watch;
mod in_core;
pub mod injected;
mod join;
mod liveness;
mod mesh;
mod moved_on;
mod on_caller;
mod partition;
mod raft;
mod read;
pub mod send_window;
mod shared;
mod store;
mod submit;
mod sync;
mod transport;
mod weight;
pub mod wire;

pub use in_core::MAX_PAYLOADS as MAX_PAYLOADS_IN_CORE;
pub use raft::{HostedMember, RaftGroup, RaftStarter};
pub use store::inspect::{inspect as inspect_state, StateSummary};
pub use transport::tls::{PeerNames, Tls, TlsError, TlsFiles, TlsPolicy};
pub use transport::wires::{self as wires, Wires};
pub use wire::MAX_PAYLOAD_BYTES;

/// Checks a `socket.ssl_cipher` list: `Err` says why it cannot be one.
pub fn check_cipher_list(list: &str) -> Result<(), String> {
    transport::ciphers::choose(list).map(|_| ())
}

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

/// What a member tells the others about itself when it joins.
///
/// Encoded through [`weight::MemberInfoWire`]: the weight travels at the end
/// of `app`, and only when it is not 1, so that logs and snapshots written
/// before weights existed read unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "weight::MemberInfoWire", into = "weight::MemberInfoWire")]
pub struct MemberInfo {
    /// The wsrep node id (Galera's gcomm uuid), random per incarnation.
    pub uuid: [u8; 16],
    /// `wsrep_node_name`.
    pub name: String,
    /// `host:port` of this member's group listener.
    pub group_addr: String,
    /// `wsrep_node_incoming_address`: where clients reach this member.
    pub incoming: String,
    /// Opaque data of the application, carried unchanged in every membership
    /// (the engine puts the position a bootstrapping member starts from here,
    /// so every replica derives the same group uuid and first seqno).
    pub app: Vec<u8>,
    /// `pc.weight`: what this member counts for in the quorum (0 to 255).
    pub weight: u32,
}

impl Default for MemberInfo {
    fn default() -> Self {
        MemberInfo {
            uuid: [0; 16],
            name: String::new(),
            group_addr: String::new(),
            incoming: String::new(),
            app: vec![],
            weight: 1,
        }
    }
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
    /// ([`MAX_PAYLOAD_BYTES`]).
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

/// How the member's log is kept (the gcache).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSettings {
    /// Directory of the durable state (log segments, vote, checkpoints:
    /// plain files named `*.<name>`); `None` keeps everything in memory
    /// (tests, single-process tools).
    pub dir: Option<PathBuf>,
    /// Suffix of every file of the state (`gcache.name`).
    pub name: String,
    /// Purge old segments once the log holds more than this (`gcache.size`).
    pub cache_bytes: u64,
    /// Size of one segment file (`gcache.page_size`, capped so that a purge
    /// frees at most an eighth of the cache at a time).
    pub segment_bytes: u64,
    /// fsync before an append is acknowledged, with group commit
    /// (`gcache.fsync`): survives power loss, not only a killed process.
    pub fsync: bool,
    /// An in-memory directory to keep the state in instead of `dir`: a
    /// simulation's, which it crashes as a kill -9 or a power loss would
    /// (docs/simulation.md). `None` in production.
    pub memory: Option<GivenDisk>,
}

/// [`LogSettings::memory`]: the same directory for every start of a member
/// (equal when it is the same directory, not a copy).
#[derive(Clone, Debug)]
pub struct GivenDisk(pub tandem_gcache::MemStorage);

impl PartialEq for GivenDisk {
    fn eq(&self, other: &Self) -> bool {
        self.0.same_as(&other.0)
    }
}

impl Eq for GivenDisk {}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            dir: None,
            name: "galera.cache".into(),
            cache_bytes: 128 << 20,
            segment_bytes: 16 << 20,
            fsync: false,
            memory: None,
        }
    }
}

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

/// Where and how to take part in a group.
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// `wsrep_cluster_name`: members of another cluster are refused.
    pub cluster_name: String,
    /// Address the group listener binds (`gmcast.listen_addr` / `base_port`).
    pub listen_addr: String,
    /// Peers from `gcomm://a,b,c` (may include our own address; ignored then).
    pub peers: Vec<String>,
    /// Form a new group with this member as its only voter.
    pub bootstrap: bool,
    pub me: MemberInfo,
    pub timeouts: Timeouts,
    pub log: LogSettings,
    /// The application position of the local data (the engine: the seqno
    /// the database is at), when known: replay resumes from the newest
    /// checkpoint at or below it, so that nothing after it is skipped.
    pub resume_at: Option<i64>,
    /// Set aside any durable state found and start as a new member, for this
    /// reason (a bootstrap whose local data has no saved position starts a
    /// new history, so the old log describes nothing it holds).
    pub start_anew: Option<String>,
    /// The history the local data belongs to (the engine: the state uuid of
    /// its position), when known. A restored member whose peers are live in
    /// another group sets its durable state aside (see `RaftGroup::open`).
    pub history: Option<[u8; 16]>,
    /// Encrypt the group channel (`socket.ssl`); `None`: plaintext.
    pub tls: Option<TlsSettings>,
    /// Which addresses may connect to the group port (the server's
    /// `wsrep_allowlist`); `None`: any.
    pub admission: Option<Admission>,
    /// What a member cut from the primary component may do without a
    /// majority (`pc.ignore_sb`, `pc.ignore_quorum`); changed at runtime
    /// with [`GroupChannel::set_partition_policy`].
    pub partition: PartitionPolicy,
    /// Entries a live voter may be behind in receiving before the leader
    /// holds new payloads back ([`send_window`]); 0: never. Shared, so the
    /// application may change it while the group runs.
    pub send_window: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Causal reads may take the leader's lease instead of a quorum round
    /// (`repl.causal_read_lease`; see [`read`]). The leader's setting
    /// decides, as the leader answers for every member. Shared, so the
    /// application may change it while the group runs.
    pub read_lease: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Worker threads of the group runtime (`gcomm.threads`; 0 counts as 1).
    /// One, like Galera's one gcomm thread: tasks that hand a commit on to
    /// each other then never wake a second worker (docs/commit-path.md).
    pub threads: usize,
    /// A network to run on instead of TCP, plaintext only: a simulation's
    /// (docs/simulation.md). `None` in production.
    pub wires: Option<Wires>,
}

/// Galera's partition controls. Both off (the default): only a component
/// holding more than half the voters of the last primary component goes on.
/// Either one lets a side of a partition go on alone, so both sides may take
/// writes and their histories diverge: they are for setups where the
/// operator knows the other side is dead or read-only.
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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionPolicy {
    /// `pc.ignore_sb`: exactly half of the voters go on (a 2-node cluster
    /// that lost one node, a 2+2 split).
    pub ignore_split_brain: bool,
    /// `pc.ignore_quorum`: any part goes on, even a minority.
    pub ignore_quorum: bool,
}

/// Whether a peer at this address may connect: the server's allowlist. It
/// may block (MariaDB reads a table), so it is called off the runtime.
#[derive(Clone)]
pub struct Admission(pub Arc<dyn Fn(std::net::IpAddr) -> bool + Send + Sync>);

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission(..)")
    }
}

/// TLS on the group channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    pub files: TlsFiles,
    /// Accept plaintext peers too, and talk plaintext to a member that does
    /// not speak TLS (`socket.dynamic`: a rolling switch-over).
    pub dynamic: bool,
    /// Peer-name checks and cipher suites.
    pub policy: TlsPolicy,
}

#[derive(Clone, Debug)]
pub struct Timeouts {
    /// Leader heartbeat period (`evs.keepalive_period`).
    pub heartbeat: Duration,
    /// No leader contact for this long makes a member non-primary and may
    /// start an election (`evs.suspect_timeout`).
    pub suspect: Duration,
    /// The hard limit on a member's silence (`evs.inactive_timeout`): it is
    /// evicted by the leader after this or `suspect`, whichever is earlier;
    /// a member still heard on the network but not acking, after this
    /// (`evict::unresponsive_after`).
    pub inactive: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            heartbeat: Duration::from_millis(100),
            suspect: Duration::from_secs(5),
            inactive: Duration::from_secs(15),
        }
    }
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
