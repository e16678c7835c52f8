//! Total order, membership and quorum.
//!
//! Everything Galera-specific (seqnos, views, certification) lives in the engine
//! on top of this crate. The engine sees the group only through [`GroupChannel`]
//! (what it asks of the group) and [`Replica`] (what the group tells it, in total
//! order), so the consensus library behind it can be swapped. Those and the
//! types they speak in live in the leaf crate `tandem-group-api`, re-exported
//! here; this crate adds their openraft implementation and its settings.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod beat;
mod catch_up;
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
mod placement;
mod raft;
mod read;
mod round_trips;
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
pub use tandem_group_api::*;
pub use transport::tls::{PeerNames, Tls, TlsError, TlsFiles, TlsPolicy};
pub use transport::wires::{self as wires, Wires};
pub use wire::MAX_PAYLOAD_BYTES;

/// Checks a `socket.ssl_cipher` list: `Err` says why it cannot be one.
pub fn check_cipher_list(list: &str) -> Result<(), String> {
    transport::ciphers::choose(list).map(|_| ())
}

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
    /// About how many bytes of entries one batch of a restart's catch-up
    /// from another member carries (`catch_up`; 4 MiB; a simulation makes
    /// it small to kill a donor mid-way).
    pub catch_up_batch_bytes: u64,
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
            catch_up_batch_bytes: 4 << 20,
        }
    }
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
    /// `wsrep_sst_donor`: the members a restarting member catches its log
    /// up from first (node names, in order; a trailing comma allows any
    /// other; empty: any), when the leader no longer holds what it missed
    /// (`catch_up`).
    pub donors: String,
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
