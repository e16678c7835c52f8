//! [`HostedMember`]: a member started on the runtime its caller stands in,
//! driven by async calls. A simulation runs several on one thread, each on
//! its host's runtime, over a given network (docs/simulation.md).
//!
//! It is the same member as [`RaftGroup`](super::RaftGroup): the same
//! `launch`, tasks, Raft core, store and transport. What differs is only
//! the edge: `RaftGroup` owns a multi-threaded runtime and offers blocking
//! calls to mariadbd's threads (the direct submit path, `block_on` on the
//! caller's thread); here every payload goes through the submit queue, and
//! the caller's runtime owns the tasks, which end with it.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::startup::{launch, Launched};
use super::types::AppPayload;
use super::{admit, membership_of, status_of, RaftGroup};
use crate::shared::Shared;
use crate::wire::Request;
use crate::{join, submit, GroupConfig, GroupError, GroupStatus, MemberId, Membership, Replica};

pub struct HostedMember {
    shared: Arc<Shared>,
    queue: mpsc::Sender<AppPayload>,
    local_addr: SocketAddr,
}

impl HostedMember {
    /// Opens `config`'s durable state and starts the member on the current
    /// runtime, with `config.me.app` as its application data. Returns once
    /// it listens; the join (or bootstrap) goes on in its tasks.
    pub async fn start(config: GroupConfig, replica: Box<dyn Replica>) -> Result<HostedMember, GroupError> {
        let app = config.me.app.clone();
        let (config, opened, replica, sm) = RaftGroup::open(config)?.prepare(app, replica)?;
        let Launched { shared, queue, local_addr } = launch(config, opened, replica, sm).await?;
        Ok(HostedMember { shared, queue, local_addr })
    }

    pub fn me(&self) -> MemberId {
        self.shared.me
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Hands `payload` to the group for ordering, waiting for room in the
    /// submit queue (as `GroupChannel::submit` does on a plain thread).
    pub async fn submit(&self, payload: Vec<u8>) -> Result<(), GroupError> {
        let item = admit(&self.shared, payload)?;
        submit::enqueue_waiting(&self.shared, &self.queue, item).await
    }

    pub fn status(&self) -> GroupStatus {
        status_of(&self.shared)
    }

    /// As [`RaftGroup::membership`].
    pub fn membership(&self) -> Membership {
        membership_of(&self.shared)
    }

    /// Makes `member` a voter (the engine asks for itself once synced).
    pub async fn promote(&self, member: MemberId) -> Result<(), GroupError> {
        let within = self.shared.request_timeout() * 4;
        let req = Request::Promote { member };
        match tokio::time::timeout(within, join::until_done(&self.shared, &req)).await {
            Ok(done) => done.map_err(GroupError::Other),
            Err(_) => Err(GroupError::Other(format!("timed out after {within:?}"))),
        }
    }

    /// Leaves the group cleanly: a leader hands its leadership over first.
    pub async fn leave(&self) -> Result<(), GroupError> {
        join::leave(&self.shared).await.map_err(GroupError::Other)
    }

    /// As `GroupChannel::read_barrier`: returns once every payload ordered
    /// in the group before the call has been handed to this member's
    /// replica (a causal read's wait).
    pub async fn read_barrier(&self, timeout: std::time::Duration) -> Result<(), GroupError> {
        crate::read::barrier(&self.shared, timeout).await
    }

    /// As `GroupChannel::release_upto`: the replica holds durably what it
    /// applied up to `position`, so the log may be purged up to there.
    pub fn release_upto(&self, position: i64) {
        self.shared.released.fetch_max(position, std::sync::atomic::Ordering::AcqRel);
    }

    /// As [`RaftGroup::core_window`].
    pub fn core_window(&self) -> (usize, u64) {
        (self.shared.in_core.peak(), self.shared.in_core.lost())
    }
}
