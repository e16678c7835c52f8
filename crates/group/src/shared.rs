//! State shared by the public handle and the background tasks of one member.
//!
//! Tasks hold an `Arc<Shared>`, never the [`crate::RaftGroup`] itself, so that
//! dropping the last handle runs its `Drop` and stops them.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;

use crate::raft::state_machine::{SharedReplica, StateMachine};
use crate::raft::types::{GroupRaft, Metrics};
use crate::store::checkpoint::Checkpoints;
use crate::store::log_store::DurableLog;
use crate::transport::NetCtx;
use crate::wire::Response;
use crate::{GroupConfig, MemberId};

pub struct Shared {
    pub me: MemberId,
    /// As given to `start`, with `me.group_addr` filled in.
    pub config: GroupConfig,
    /// Replaced only by a forced bootstrap (`pc.bootstrap=YES`), which
    /// restarts openraft on the same log and state machine.
    pub raft: RwLock<GroupRaft>,
    pub raft_config: Arc<openraft::Config>,
    pub net: Arc<NetCtx>,
    pub replica: SharedReplica,
    /// Written only by the detector task; read by `submit` and `status`.
    pub primary: AtomicBool,
    /// Set by the detector the first time this member is primary: only a
    /// member that was in the primary component asks to be taken back.
    pub ever_primary: AtomicBool,
    pub closed: AtomicBool,
    /// No quorum / leader contact for this long makes us non-primary. It is
    /// openraft's `election_timeout_max`, which is also the leader lease.
    pub suspect: Duration,
    /// This member's identity and log came from an earlier process.
    pub restored: bool,
    pub log: DurableLog,
    pub sm: StateMachine,
    pub checkpoints: Arc<Checkpoints>,
    /// What the application released (`GroupChannel::release_upto`).
    pub released: AtomicI64,
    /// Callers running group futures on their own threads, sent home
    /// before the runtime stops.
    pub callers: crate::on_caller::Gate,
    /// Read-index rounds shared by concurrent causal reads.
    pub reads: crate::read::Rounds,
    /// Starts as `config.partition`; `SET` changes it.
    pub partition: std::sync::Mutex<crate::PartitionPolicy>,
    /// `pc.weight` as this member was last given it (`config.me.weight`,
    /// then `SET`); `weight::watch` carries it into the membership.
    pub weight: std::sync::atomic::AtomicU32,
    /// Payloads handed to the submit task and not yet passed on by it: a
    /// caller may go around the task only when nothing waits there.
    pub submit_queued: std::sync::atomic::AtomicUsize,
    /// A follower's connection to its leader for submitted payloads.
    pub forwards: crate::forward::Forwarder,
    /// The catch-ups this member serves from its log (`catch_up::donor`).
    pub donations: crate::catch_up::Donations,
    /// As leader: the payloads handed to the Raft core and not yet answered.
    pub in_core: crate::in_core::Window,
    /// As leader: when its log reached which index (the send window's
    /// measure of what is in flight to each voter).
    pub appended: std::sync::Mutex<crate::send_window::Appended>,
    /// When this process started its Raft instance: a restored member
    /// grants no vote for a while after it ([`crate::read::votes_withheld`]).
    pub started: tokio::time::Instant,
    /// Set once this member, as leader, hands its leadership over on
    /// leaving: the others may then elect a successor inside its lease, so
    /// no causal read may rest on that lease any more.
    pub handing_over: AtomicBool,
}

impl Shared {
    /// The current openraft instance (a cheap handle).
    pub fn raft(&self) -> GroupRaft {
        self.raft.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn metrics(&self) -> Metrics {
        self.with_metrics(Metrics::clone)
    }

    /// Reads the metrics in place: the hot paths (every AppendEntries passes
    /// the membership check) should not clone the whole struct each time.
    /// `f` must not block: the watch is read-locked while it runs.
    pub fn with_metrics<R>(&self, f: impl FnOnce(&Metrics) -> R) -> R {
        let raft = self.raft();
        let watch = raft.metrics();
        let m = watch.borrow_watched();
        f(&m)
    }

    pub fn partition_policy(&self) -> crate::PartitionPolicy {
        *crate::sync::lock(&self.partition)
    }

    pub fn is_primary(&self) -> bool {
        self.primary.load(Ordering::Acquire)
    }

    /// What this member tells the others about itself: its configuration,
    /// with the weight it was last given.
    pub fn my_info(&self) -> crate::MemberInfo {
        crate::MemberInfo { weight: self.weight.load(Ordering::Acquire), ..self.config.me.clone() }
    }

    /// The current leader and its group address, as far as we know.
    pub fn leader(&self) -> Option<(MemberId, String)> {
        self.with_metrics(|m| {
            let id = m.current_leader?;
            let info = m.membership_config.membership().get_node(&id)?;
            Some((id, info.group_addr.clone()))
        })
    }

    /// The answer to a leader-only request that reached a follower.
    pub fn not_leader(&self) -> Response {
        Response::NotLeader { leader_addr: self.leader().map(|(_, addr)| addr) }
    }

    /// Budget for one request of ours (join, forward, promote, leave): long
    /// enough for a membership change to commit, short enough to notice a
    /// dead leader within a couple of election rounds.
    pub fn request_timeout(&self) -> Duration {
        (self.suspect * 2).max(Duration::from_secs(2))
    }

    /// A short pause between retries, tied to the heartbeat.
    pub fn retry_pause(&self) -> Duration {
        self.config.timeouts.heartbeat.clamp(Duration::from_millis(10), Duration::from_millis(500))
    }
}
