//! [`RaftGroup`]: the [`GroupChannel`] implemented with openraft.
//!
//! ```text
//!   mariadbd threads ──submit/promote/leave/status──► RaftGroup
//!                                                       │ own tokio runtime: gcomm.threads workers (1)
//!     ┌──────────────┬─────────────┬──────────────┬─────┴───────┬──────────────┐
//!   server        submitter     detector        evictor     join/bootstrap   openraft core
//!   (TCP in)   (queue→leader) (primary?)   (leader: silent?)               (log, SM, replication)
//!                                                                              │
//!                                                            Replica::apply ◄──┘ in log order
//! ```

pub mod config;
mod hosted;
pub mod network;
pub(crate) mod rebootstrap;
pub mod runtime;
mod startup;
pub mod state_machine;
pub mod types;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use log::{error, info, warn};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;

pub use self::hosted::HostedMember;
pub use self::startup::RaftStarter;
use self::types::{AppPayload, Bytes};
use crate::on_caller::Closed;
use crate::shared::Shared;
use crate::sync::lock;
use crate::wire::{Request, MAX_PAYLOAD_BYTES};
use crate::{join, submit, CacheStatus, GroupChannel, GroupError, GroupStatus, MemberId, Membership};

/// Every thread of every group runtime is named with this prefix.
pub const THREAD_PREFIX: &str = "tandem-group-";
/// How long `shutdown` waits for openraft to stop, then for the runtime.
const RAFT_STOP_TIMEOUT: Duration = Duration::from_secs(5);
const RUNTIME_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long stopping waits for callers still running group work on their own
/// threads (causal reads) to give up.
const CALLERS_STOP_TIMEOUT: Duration = Duration::from_secs(2);

/// A member of a Tandem group, ordering payloads with openraft.
pub struct RaftGroup {
    shared: Arc<Shared>,
    handle: Handle,
    runtime: Mutex<Option<Runtime>>,
    queue: mpsc::Sender<AppPayload>,
    local_addr: SocketAddr,
    /// Started on a runtime it does not own (`RaftStarter::on_runtime`): a
    /// simulation's host, one thread that steps it and every other host.
    /// Nothing of the group's may then run on a caller's thread (the
    /// simulated network lives on that one thread), so every call goes to
    /// the runtime and waits for it, and a caller on the runtime's thread is
    /// a group thread, which must never wait for it.
    hosted: bool,
    /// A hosted member's Raft was stopped (`shutdown`).
    stopped: AtomicBool,
}

impl RaftGroup {
    /// `runtime`: the member's own, or `None` for one it was given (`hosted`).
    fn assemble_on(
        shared: Arc<Shared>,
        handle: Handle,
        runtime: Option<Runtime>,
        queue: mpsc::Sender<AppPayload>,
        local_addr: SocketAddr,
    ) -> Arc<RaftGroup> {
        let hosted = runtime.is_none();
        let stopped = AtomicBool::new(false);
        Arc::new(RaftGroup { shared, handle, runtime: Mutex::new(runtime), queue, local_addr, hosted, stopped })
    }

    /// Whether this thread is one of the group's, which must never wait
    /// for the group's runtime.
    fn on_group_thread(&self) -> bool {
        on_group_thread() || (self.hosted && Handle::try_current().is_ok())
    }

    /// Worker threads of the group runtime ([`crate::GroupConfig::threads`]).
    pub fn worker_threads(&self) -> usize {
        self.handle.metrics().num_workers()
    }

    /// Calls running group work on their callers' own threads now (causal
    /// reads waiting for their barrier).
    pub fn calls_in_progress(&self) -> usize {
        self.shared.callers.inside()
    }

    /// The most payloads this member's Raft core held at once as leader
    /// (at most [`crate::MAX_PAYLOADS_IN_CORE`], or one batch when that is more), and
    /// how many it answered with an error, never ordering them.
    pub fn core_window(&self) -> (usize, u64) {
        (self.shared.in_core.peak(), self.shared.in_core.lost())
    }

    /// The address the group listener is bound to (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The membership this member currently knows (the last one appended to
    /// its log, which may still be uncommitted or joint).
    pub fn membership(&self) -> Membership {
        membership_of(&self.shared)
    }

    /// Runs `fut` on the group runtime and waits for it from this (non-tokio)
    /// thread. A std channel, not `block_on`: if the runtime stops meanwhile
    /// the task is dropped and we get `Closed` instead of a panic.
    fn run<T, F>(&self, timeout: Duration, fut: F) -> Result<T, GroupError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, GroupError>> + Send + 'static,
    {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(GroupError::Closed);
        }
        if self.on_group_thread() {
            return Err(GroupError::Other("must not be called from a group callback".into()));
        }
        let (tx, rx) = std_mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(tokio::time::timeout(timeout, fut).await);
        });
        match rx.recv() {
            Ok(Ok(result)) => result,
            Ok(Err(_elapsed)) => Err(GroupError::Other(format!("timed out after {timeout:?}"))),
            Err(_) => Err(GroupError::Closed),
        }
    }
}

/// A payload the member takes for ordering now, or why not.
fn admit(shared: &Shared, payload: Vec<u8>) -> Result<AppPayload, GroupError> {
    if shared.closed.load(Ordering::Acquire) {
        return Err(GroupError::Closed);
    }
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(GroupError::TooLarge { bytes: payload.len(), limit: MAX_PAYLOAD_BYTES });
    }
    if !shared.is_primary() {
        return Err(GroupError::NonPrimary);
    }
    Ok(AppPayload { origin: shared.me, bytes: Bytes::from(payload) })
}

/// The membership a member knows (see [`RaftGroup::membership`]).
fn membership_of(shared: &Shared) -> Membership {
    let m = shared.metrics();
    let raft_membership = m.membership_config.membership();
    Membership {
        voters: raft_membership.voter_ids().collect(),
        learners: raft_membership.learner_ids().collect(),
        members: raft_membership.nodes().map(|(id, info)| (*id, info.clone())).collect(),
    }
}

/// What `GroupChannel::status` says of a member.
fn status_of(shared: &Shared) -> GroupStatus {
    let (leader, leader_name) = shared.with_metrics(|m| {
        let name = m.current_leader.and_then(|id| m.membership_config.membership().get_node(&id));
        (m.current_leader, name.map(|info| info.name.clone()))
    });
    GroupStatus { me: shared.me, primary: shared.is_primary(), leader, leader_name }
}

fn on_group_thread() -> bool {
    std::thread::current().name().is_some_and(|n| n.starts_with(THREAD_PREFIX))
}

/// Stops openraft, then the runtime, joining every runtime thread.
fn stop(runtime: Runtime, shared: Arc<Shared>) {
    match shared.callers.close(CALLERS_STOP_TIMEOUT) {
        Closed::Emptied => {}
        Closed::EmptiedUnsignalled => {
            warn!("The last call into the group left unnoticed until {CALLERS_STOP_TIMEOUT:?}")
        }
        Closed::StillInside(n) => {
            warn!("{n} calls into the group still running after {CALLERS_STOP_TIMEOUT:?}; stopping anyway")
        }
    }
    let raft = shared.raft();
    let stopped = runtime.block_on(async move { tokio::time::timeout(RAFT_STOP_TIMEOUT, raft.shutdown()).await });
    if stopped.is_err() {
        warn!("Raft of member {} did not stop within {RAFT_STOP_TIMEOUT:?}", shared.me);
    }
    runtime.shutdown_timeout(RUNTIME_STOP_TIMEOUT);
    startup::stop_flusher(&shared.log);
    info!("Tandem group member {} stopped", shared.me);
}

impl GroupChannel for RaftGroup {
    fn me(&self) -> MemberId {
        self.shared.me
    }

    fn submit(&self, payload: Vec<u8>) -> Result<(), GroupError> {
        let item = admit(&self.shared, payload)?;
        // A group runtime thread (or any caller inside a runtime) must not
        // block: it only queues, and fails when the queue is full.
        if Handle::try_current().is_ok() {
            return submit::enqueue(&self.shared, &self.queue, item, false);
        }
        if self.hosted {
            let (shared, queue) = (self.shared.clone(), self.queue.clone());
            let within = self.shared.request_timeout() * 4;
            return self.run(within, async move { submit::enqueue_waiting(&shared, &queue, item).await });
        }
        match submit::direct(&self.shared, &self.handle, item) {
            Ok(()) => Ok(()),
            Err(item) => submit::enqueue(&self.shared, &self.queue, item, true),
        }
    }

    fn promote(&self, member: MemberId) -> Result<(), GroupError> {
        let shared = self.shared.clone();
        let req = Request::Promote { member };
        if self.on_group_thread() {
            // Called from a replica callback: blocking here could stall the
            // very state machine the promotion waits on. Fire and forget.
            self.handle.spawn(async move {
                if let Err(e) = join::until_done(&shared, &req).await {
                    error!("Could not promote member {member}: {e}");
                }
            });
            return Ok(());
        }
        let timeout = self.shared.request_timeout() * 4;
        self.run(timeout, async move { join::until_done(&shared, &req).await.map_err(GroupError::Other) })
    }

    fn status(&self) -> GroupStatus {
        status_of(&self.shared)
    }

    fn leave(&self, timeout: Duration) -> Result<(), GroupError> {
        let shared = self.shared.clone();
        let result = self.run(timeout, async move { join::leave(&shared).await.map_err(GroupError::Other) });
        match result {
            Err(GroupError::Other(e)) if !self.shared.is_primary() => {
                // Expected of a node cut off (a partition, gmcast.isolate): a note.
                info!("Leave did not complete ({e}) and this member is not primary");
                Err(GroupError::NonPrimary)
            }
            other => other,
        }
    }

    fn bootstrap(&self) -> Result<(), GroupError> {
        let shared = self.shared.clone();
        let timeout = self.shared.request_timeout() * 4;
        self.run(timeout, rebootstrap::bootstrap(shared))
    }

    fn release_upto(&self, position: i64) {
        self.shared.released.fetch_max(position, Ordering::AcqRel);
    }

    fn cache(&self) -> CacheStatus {
        let oldest = self.shared.checkpoints.oldest();
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        CacheStatus {
            replay_from: oldest.map(|c| c.position + 1),
            bytes: self.shared.log.disk_bytes(),
            reach_ms: oldest.map(|c| now_ms.saturating_sub(c.time_ms)),
            append_rate: self.shared.log.append_rate(),
        }
    }

    fn undelivered(&self) -> u64 {
        let last = self.shared.log.vote_and_last().1.map_or(0, |l| l.index);
        last.saturating_sub(self.shared.sm.delivered())
    }

    fn links(&self) -> Vec<crate::Link> {
        let m = self.shared.metrics();
        let membership = m.membership_config.membership();
        membership
            .nodes()
            .filter(|(id, _)| **id != self.shared.me)
            .map(|(_, info)| crate::Link {
                name: info.name.clone(),
                addr: info.group_addr.clone(),
                encrypted: self.shared.net.link_encrypted(&info.group_addr),
            })
            .collect()
    }

    fn read_barrier(&self, timeout: Duration) -> Result<(), GroupError> {
        let shared = self.shared.clone();
        // On mariadbd's thread itself: a causal read pays every hand-off.
        if Handle::try_current().is_err() && !self.hosted {
            let read = crate::read::barrier(&shared, timeout);
            return self.shared.callers.run(&self.handle, &self.shared.closed, timeout, read);
        }
        self.run(timeout, async move { crate::read::barrier(&shared, timeout).await })
    }

    fn announce_group(&self, group: Option<[u8; 16]>) {
        self.shared.net.set_group(group);
        // The durable state now belongs to this group: if it is ever left
        // and the cluster moves on to another, this member cannot rejoin.
        if let Some(g) = group.filter(|g| self.shared.net.former_group() != Some(*g)) {
            self.shared.net.set_former_group(Some(g));
            if let Err(e) = self.shared.log.save_group(g) {
                warn!("Could not record the group this member is in: {e}");
            }
        }
    }

    fn set_partition_policy(&self, policy: crate::PartitionPolicy) {
        *lock(&self.shared.partition) = policy;
    }

    fn isolate(&self, to: crate::Isolation) -> Result<(), GroupError> {
        self.shared.net.isolate(to).map_err(GroupError::Config)?;
        match to {
            crate::Isolation::Off => info!("Member {} is no longer isolated (gmcast.isolate=0)", self.shared.me),
            // A note, as Galera's: the operator asked for it.
            crate::Isolation::Isolated => info!(
                "Member {} is isolated from the group (gmcast.isolate=1): it leaves the primary component \
                 until gmcast.isolate=0",
                self.shared.me
            ),
            // MariaDB's test suites expect this line, in these words.
            crate::Isolation::Terminated => error!(
                "exception from gcomm, backend must be restarted: Gcomm backend termination was requested by \
                 setting gmcast.isolate=2."
            ),
        }
        Ok(())
    }

    fn set_weight(&self, weight: u32) -> Result<(), GroupError> {
        if weight > crate::weight::MAX_WEIGHT {
            return Err(GroupError::Config(format!(
                "pc.weight {weight} is out of range 0 to {}",
                crate::weight::MAX_WEIGHT
            )));
        }
        let shared = self.shared.clone();
        let within = self.shared.request_timeout();
        self.run(
            within * 2,
            async move { crate::weight::set(&shared, weight, within).await.map_err(GroupError::Other) },
        )
    }

    fn cluster_weight(&self) -> Option<u64> {
        let m = self.shared.metrics();
        let membership = m.membership_config.membership();
        Some(membership.nodes().map(|(_, n)| u64::from(n.weight)).sum())
    }

    fn reload_tls(&self) -> Result<(), GroupError> {
        let tls = self.shared.net.tls.tls().ok_or_else(|| {
            GroupError::Config("socket.ssl_reload: the group channel is not encrypted (socket.ssl=NO)".into())
        })?;
        // Links opened with the identity in force outlive the swap, as
        // Galera's sockets do: open those still missing first (a member
        // that joined a moment ago may have none from here yet).
        let shared = self.shared.clone();
        let _ = self.run(self.shared.request_timeout(), async move {
            crate::mesh::warm_all(&shared).await;
            Ok(())
        });
        tls.reload().map_err(|e| GroupError::Config(e.to_string()))?;
        info!("Reloaded the TLS certificate and key: new connections use them");
        Ok(())
    }

    fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::Release);
        if self.hosted {
            return self.stop_hosted();
        }
        // Held until the runtime is gone, so a concurrent second call returns
        // only once everything has stopped.
        let mut runtime_slot = lock(&self.runtime);
        let Some(runtime) = runtime_slot.take() else {
            return; // already stopped
        };
        let shared = self.shared.clone();
        if Handle::try_current().is_err() {
            stop(runtime, shared); // a plain thread, as mariadbd's are
            return;
        }
        // A runtime cannot be shut down from inside an async context: stop it
        // from a thread of our own.
        let stopper =
            std::thread::Builder::new().name(format!("{THREAD_PREFIX}stop")).spawn(move || stop(runtime, shared));
        match stopper {
            // On one of our own workers, joining would wait for ourselves.
            Ok(handle) if !on_group_thread() => {
                let _ = handle.join();
            }
            Ok(_) => {
                warn!("Group shutdown requested from a group thread; finishing in the background")
            }
            Err(e) => error!("Cannot spawn the group shutdown thread: {e}"),
        }
    }
}

impl RaftGroup {
    /// Stops openraft on the runtime it was started on, which goes on: a
    /// simulation's host ends its tasks with it.
    fn stop_hosted(&self) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return; // already stopped
        }
        let raft = self.shared.raft();
        let stopping = async move { tokio::time::timeout(RAFT_STOP_TIMEOUT, raft.shutdown()).await.is_ok() };
        if self.on_group_thread() {
            // Waiting here would wait for this very thread: it finishes on
            // the runtime.
            self.handle.spawn(stopping);
            return;
        }
        let (tx, rx) = std_mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(stopping.await);
        });
        if rx.recv() != Ok(true) {
            warn!("Raft of member {} did not stop within {RAFT_STOP_TIMEOUT:?}", self.shared.me);
        }
        info!("Tandem group member {} stopped", self.shared.me);
    }
}

impl Drop for RaftGroup {
    fn drop(&mut self) {
        self.shutdown();
    }
}
