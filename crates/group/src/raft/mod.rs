//! [`RaftGroup`]: the [`GroupChannel`] implemented with openraft.
//!
//! ```text
//!   mariadbd threads ──submit/promote/leave/status──► RaftGroup
//!                                                       │ own tokio runtime: 2 workers
//!     ┌──────────────┬─────────────┬──────────────┬─────┴───────┬──────────────┐
//!   server        submitter     detector        evictor     join/bootstrap   openraft core
//!   (TCP in)   (queue→leader) (primary?)   (leader: silent?)               (log, SM, replication)
//!                                                                              │
//!                                                            Replica::apply ◄──┘ in log order
//! ```

pub mod config;
pub mod log_store;
pub mod network;
pub mod state_machine;
pub mod types;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use log::{error, info, warn};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;

pub use self::config::LogRetention;
use self::log_store::MemLogStore;
use self::network::Network;
use self::state_machine::{lock, StateMachine};
use self::types::{AppPayload, Bytes, GroupRaft};
use crate::shared::Shared;
use crate::transport::NetCtx;
use crate::wire::{Hello, Request, MAX_PAYLOAD_BYTES};
use crate::{
    detector, evict, join, submit, transport, CacheStatus, GroupChannel, GroupConfig, GroupError,
    GroupStarter, GroupStatus, Identity, MemberId, Membership, Replica,
};

/// Every thread of every group runtime is named with this prefix.
pub const THREAD_PREFIX: &str = "tandem-group-";
const WORKER_THREADS: usize = 2;
/// Blocking-pool threads (only DNS lookups use it).
const MAX_BLOCKING_THREADS: usize = 4;
/// How long `shutdown` waits for openraft to stop, then for the runtime.
const RAFT_STOP_TIMEOUT: Duration = Duration::from_secs(5);
const RUNTIME_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A member of a Tandem group, ordering payloads with openraft.
pub struct RaftGroup {
    shared: Arc<Shared>,
    handle: Handle,
    runtime: Mutex<Option<Runtime>>,
    queue: mpsc::Sender<AppPayload>,
    local_addr: SocketAddr,
}

/// A member opened but not started (see [`GroupStarter`]).
pub struct RaftStarter {
    config: GroupConfig,
    identity: Identity,
    retention: LogRetention,
}

impl GroupStarter for RaftStarter {
    fn identity(&self) -> Identity {
        self.identity
    }

    fn start(
        self: Box<Self>,
        app: Vec<u8>,
        replica: Box<dyn Replica>,
    ) -> Result<Arc<dyn GroupChannel>, GroupError> {
        let group: Arc<dyn GroupChannel> = self.start_group(app, replica)?;
        Ok(group)
    }
}

impl RaftStarter {
    /// As [`GroupStarter::start`], keeping the concrete type.
    pub fn start_group(
        self,
        app: Vec<u8>,
        replica: Box<dyn Replica>,
    ) -> Result<Arc<RaftGroup>, GroupError> {
        let mut config = self.config;
        config.me.uuid = self.identity.uuid;
        config.me.app = app;
        RaftGroup::launch_member(config, self.identity, replica, self.retention)
    }
}

impl RaftGroup {
    /// Opens a member's state and tells who it is; nothing runs yet.
    pub fn open(config: GroupConfig) -> Result<RaftStarter, GroupError> {
        Self::open_with(config, LogRetention::default())
    }

    /// [`RaftGroup::open`] with an explicit in-memory log retention.
    pub fn open_with(config: GroupConfig, retention: LogRetention) -> Result<RaftStarter, GroupError> {
        let identity = Identity {
            member: fresh_member_id(),
            uuid: fresh_uuid(),
            incarnation: 1,
            restored: false,
        };
        Ok(RaftStarter { config, identity, retention })
    }

    /// Opens and starts a member in one go, with `config.me.app` as its
    /// application data. Returns at once: the join (or bootstrap) goes on in
    /// the background and is reported through [`Replica::connectivity`].
    pub fn start(
        config: GroupConfig,
        replica: Box<dyn Replica>,
    ) -> Result<Arc<RaftGroup>, GroupError> {
        Self::start_with(config, replica, LogRetention::default())
    }

    /// [`RaftGroup::start`] with an explicit in-memory log retention.
    pub fn start_with(
        config: GroupConfig,
        replica: Box<dyn Replica>,
        retention: LogRetention,
    ) -> Result<Arc<RaftGroup>, GroupError> {
        let app = config.me.app.clone();
        Self::open_with(config, retention)?.start_group(app, replica)
    }

    fn launch_member(
        mut config: GroupConfig,
        identity: Identity,
        replica: Box<dyn Replica>,
        retention: LogRetention,
    ) -> Result<Arc<RaftGroup>, GroupError> {
        let raft_config = config::raft_config(&config.cluster_name, &config.timeouts, &retention)?;
        let listener = bind(&config.listen_addr)?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| GroupError::Config(e.to_string()))?;
        fill_group_addr(&mut config, local_addr);
        let runtime = build_runtime()?;
        let launched = launch(&runtime, config, identity.member, replica, raft_config, listener);
        let (shared, queue) = match launched {
            Ok(started) => started,
            Err(e) => {
                discard(runtime);
                return Err(e);
            }
        };
        info!(
            "Tandem group member {} ({}) listening on {local_addr} for cluster '{}'",
            shared.me, shared.config.me.name, shared.config.cluster_name
        );
        let handle = runtime.handle().clone();
        Ok(Arc::new(RaftGroup {
            shared,
            handle,
            runtime: Mutex::new(Some(runtime)),
            queue,
            local_addr,
        }))
    }

    /// The address the group listener is bound to (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The membership this member currently knows (the last one appended to
    /// its log, which may still be uncommitted or joint).
    pub fn membership(&self) -> Membership {
        let m = self.shared.metrics();
        let raft_membership = m.membership_config.membership();
        Membership {
            voters: raft_membership.voter_ids().collect(),
            learners: raft_membership.learner_ids().collect(),
            members: raft_membership
                .nodes()
                .map(|(id, info)| (*id, info.clone()))
                .collect(),
        }
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
        if on_group_thread() {
            return Err(GroupError::Other(
                "must not be called from a group callback".into(),
            ));
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

/// Creates the Raft node and the member's tasks on `runtime`.
fn launch(
    runtime: &Runtime,
    config: GroupConfig,
    me: MemberId,
    replica: Box<dyn Replica>,
    raft_config: openraft::Config,
    listener: std::net::TcpListener,
) -> Result<(Arc<Shared>, mpsc::Sender<AppPayload>), GroupError> {
    let suspect = Duration::from_millis(raft_config.election_timeout_max);
    let replica = Arc::new(Mutex::new(replica));
    let hello = Hello {
        cluster: config.cluster_name.clone(),
        member: me,
        info: config.me.clone(),
    };
    let net = Arc::new(NetCtx::new(hello, suspect));
    let network = Network::new(net.clone(), suspect / 2);
    let sm = StateMachine::new(replica.clone());
    let raft = start_raft(runtime, me, Arc::new(raft_config), network, sm)?;
    let shared = Arc::new(Shared {
        me,
        config,
        raft,
        net,
        replica,
        primary: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        suspect,
    });
    let (queue, queue_rx) = mpsc::channel(submit::QUEUE_CAPACITY);
    spawn_tasks(runtime, &shared, listener, queue_rx)?;
    Ok((shared, queue))
}

/// Drops a runtime from a plain thread: dropping it where the caller stands
/// panics if that is inside some other async context.
fn discard(runtime: Runtime) {
    let _ = std::thread::spawn(move || drop(runtime)).join();
}

/// Creates the Raft node on the group runtime. Not `block_on`: that panics
/// when `start` is called from inside some other tokio runtime.
fn start_raft(
    runtime: &Runtime,
    me: MemberId,
    config: Arc<openraft::Config>,
    network: Network,
    sm: StateMachine,
) -> Result<GroupRaft, GroupError> {
    let (tx, rx) = std_mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(openraft::Raft::new(me, config, network, MemLogStore::default(), sm).await);
    });
    match rx.recv() {
        Ok(Ok(raft)) => Ok(raft),
        Ok(Err(e)) => Err(GroupError::Other(format!("cannot start Raft: {e}"))),
        Err(_) => Err(GroupError::Other("the Raft start task died".into())),
    }
}

fn fresh_member_id() -> MemberId {
    // Zero is reserved so that an unset id never looks like a member.
    loop {
        let id: MemberId = rand::random();
        if id != 0 {
            return id;
        }
    }
}

/// A random version-4 uuid (wsrep-lib prints ids that look like short text
/// as text, so they must be real random uuids).
fn fresh_uuid() -> [u8; 16] {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

fn build_runtime() -> Result<Runtime, GroupError> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_name_fn(|| format!("{THREAD_PREFIX}{}", SEQ.fetch_add(1, Ordering::Relaxed)))
        .enable_all()
        .build()
        .map_err(|e| GroupError::Other(format!("cannot create the group runtime: {e}")))
}

/// Bound synchronously so that a taken port fails `start` itself.
fn bind(addr: &str) -> Result<std::net::TcpListener, GroupError> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| GroupError::Config(format!("cannot listen on group address {addr}: {e}")))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| GroupError::Config(e.to_string()))?;
    Ok(listener)
}

/// Peers dial `me.group_addr`; default it to where we actually listen.
fn fill_group_addr(config: &mut GroupConfig, local: SocketAddr) {
    let addr = &config.me.group_addr;
    if addr.is_empty() || addr.ends_with(":0") {
        if local.ip().is_unspecified() {
            warn!(
                "Group listener bound to {local}: set the member's group address, \
                 peers cannot dial a wildcard address"
            );
        }
        config.me.group_addr = local.to_string();
    }
}

fn on_group_thread() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with(THREAD_PREFIX))
}

fn spawn_tasks(
    runtime: &Runtime,
    shared: &Arc<Shared>,
    listener: std::net::TcpListener,
    queue_rx: mpsc::Receiver<AppPayload>,
) -> Result<(), GroupError> {
    let local_addr = shared.config.me.group_addr.clone();
    let listener = {
        let _guard = runtime.enter();
        tokio::net::TcpListener::from_std(listener)
            .map_err(|e| GroupError::Config(e.to_string()))?
    };
    runtime.spawn(transport::server::serve(listener, shared.clone()));
    runtime.spawn(submit::run(shared.clone(), queue_rx));
    runtime.spawn(detector::run(shared.clone()));
    runtime.spawn(evict::run(shared.clone()));
    if shared.config.bootstrap {
        runtime.spawn(bootstrap(shared.clone()));
    } else {
        runtime.spawn(join::join_loop(shared.clone(), local_addr));
    }
    Ok(())
}

async fn bootstrap(shared: Arc<Shared>) {
    let members = BTreeMap::from([(shared.me, shared.config.me.clone())]);
    match shared.raft.initialize(members).await {
        Ok(()) => info!(
            "Bootstrapped a new group as member {} ({})",
            shared.me, shared.config.me.name
        ),
        Err(e) => error!("Could not bootstrap a new group: {e}"),
    }
}

/// Stops openraft, then the runtime, joining every runtime thread.
fn stop(runtime: Runtime, shared: Arc<Shared>) {
    let raft = shared.raft.clone();
    let stopped = runtime
        .block_on(async move { tokio::time::timeout(RAFT_STOP_TIMEOUT, raft.shutdown()).await });
    if stopped.is_err() {
        warn!(
            "Raft of member {} did not stop within {RAFT_STOP_TIMEOUT:?}",
            shared.me
        );
    }
    runtime.shutdown_timeout(RUNTIME_STOP_TIMEOUT);
    info!("Tandem group member {} stopped", shared.me);
}

impl GroupChannel for RaftGroup {
    fn me(&self) -> MemberId {
        self.shared.me
    }

    fn submit(&self, payload: Vec<u8>) -> Result<(), GroupError> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(GroupError::Closed);
        }
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(GroupError::Other(format!(
                "payload of {} bytes exceeds the {MAX_PAYLOAD_BYTES} byte limit",
                payload.len()
            )));
        }
        if !self.shared.is_primary() {
            return Err(GroupError::NonPrimary);
        }
        let item = AppPayload {
            origin: self.shared.me,
            bytes: Bytes::from(payload),
        };
        // `blocking_send` panics inside a runtime; there, fail instead of blocking.
        if Handle::try_current().is_ok() {
            return self.queue.try_send(item).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => GroupError::Other("submit queue full".into()),
                mpsc::error::TrySendError::Closed(_) => GroupError::Closed,
            });
        }
        self.queue
            .blocking_send(item)
            .map_err(|_| GroupError::Closed)
    }

    fn promote(&self, member: MemberId) -> Result<(), GroupError> {
        let shared = self.shared.clone();
        let req = Request::Promote { member };
        if on_group_thread() {
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
        self.run(timeout, async move {
            join::until_done(&shared, &req)
                .await
                .map_err(GroupError::Other)
        })
    }

    fn status(&self) -> GroupStatus {
        let m = self.shared.metrics();
        GroupStatus {
            me: self.shared.me,
            primary: self.shared.is_primary(),
            leader: m.current_leader,
        }
    }

    fn leave(&self, timeout: Duration) -> Result<(), GroupError> {
        let shared = self.shared.clone();
        let result = self.run(timeout, async move {
            join::leave(&shared).await.map_err(GroupError::Other)
        });
        match result {
            Err(GroupError::Other(e)) if !self.shared.is_primary() => {
                warn!("Leave did not complete ({e}) and this member is not primary");
                Err(GroupError::NonPrimary)
            }
            other => other,
        }
    }

    fn release_upto(&self, _position: i64) {}

    fn cache(&self) -> CacheStatus {
        CacheStatus::default()
    }

    fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::Release);
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
        let stopper = std::thread::Builder::new()
            .name(format!("{THREAD_PREFIX}stop"))
            .spawn(move || stop(runtime, shared));
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

impl Drop for RaftGroup {
    fn drop(&mut self) {
        self.shutdown();
    }
}
