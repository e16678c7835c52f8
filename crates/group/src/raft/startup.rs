//! Bringing a member up: open its durable state (who it is), resume the
//! replica from a checkpoint, start openraft on the group runtime, and
//! either join, rejoin, or found a group.
//!
//! ```text
//!   open:  state dir ──► identity (kept or new) ──► RaftStarter
//!   start: checkpoint ≤ resume_at ──► replica restored ──► Raft::new (replays
//!          the committed log after it) ──► bootstrap | join loop ──► tasks
//! ```
//!
//! Bootstrap with durable state: a member that is already the only voter
//! just starts (openraft elects it); one whose membership names others is
//! made the only voter by a membership entry of its own, in a new term
//! (the operator asked for it; the engine checked `safe_to_bootstrap`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use log::{info, warn};
use openraft::EntryPayload;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;

use super::network::Network;
use super::state_machine::{SharedReplica, StateMachine};
use super::types::{AppPayload, Entry, GroupRaft, LogId, RaftMembership, Vote};
use super::{config, RaftGroup, THREAD_PREFIX};
use crate::shared::Shared;
use crate::store::checkpoint::choose_resume;
use crate::store::log_store::DurableLog;
use crate::store::{self, Opened};
use crate::transport::wires::GroupListener;
use crate::transport::{NetCtx, TlsMode};
use crate::wire::Hello;
use crate::{
    detector, evict, join, submit, transport, GroupChannel, GroupConfig, GroupError, GroupStarter, Identity, MemberId,
    MemberInfo, Replica,
};

/// Blocking-pool threads (DNS lookups, and disk work in `block_in_place`).
const MAX_BLOCKING_THREADS: usize = 4;

/// A member opened but not started (see [`GroupStarter`]).
pub struct RaftStarter {
    config: GroupConfig,
    opened: Opened,
    /// Start on this runtime instead of one of the member's own.
    runtime: Option<Handle>,
}

impl GroupStarter for RaftStarter {
    fn identity(&self) -> Identity {
        let id = &self.opened.identity;
        Identity { member: id.member, uuid: id.uuid, incarnation: id.incarnation, restored: self.opened.restored }
    }

    fn start(self: Box<Self>, app: Vec<u8>, replica: Box<dyn Replica>) -> Result<Arc<dyn GroupChannel>, GroupError> {
        let group: Arc<dyn GroupChannel> = self.start_group(app, replica)?;
        Ok(group)
    }
}

/// The address a member is known by (what its identity is bound to).
fn known_addr(config: &GroupConfig) -> String {
    if config.me.group_addr.is_empty() {
        config.listen_addr.clone()
    } else {
        config.me.group_addr.clone()
    }
}

impl RaftGroup {
    /// Opens a member's durable state and tells who it is; nothing runs yet.
    pub fn open(config: GroupConfig) -> Result<RaftStarter, GroupError> {
        let mut opened =
            store::open(&config.log, &config.cluster_name, &known_addr(&config), config.start_anew.as_deref())?;
        let belongs_to = opened.group.or(config.history);
        if let Some(ours) = belongs_to.filter(|_| opened.restored) {
            let me = opened.identity.member;
            let alone = opened.voters.as_deref() == Some(&[me][..]);
            if let Some(why) = crate::moved_on::check(&config, me, ours, alone) {
                stop_flusher(&opened.log);
                drop(opened);
                opened = store::open(&config.log, &config.cluster_name, &known_addr(&config), Some(&why))?;
            }
        }
        info!(
            "Group state in {}: member {}, incarnation {}{}",
            opened.disk.describe(),
            opened.identity.member,
            opened.identity.incarnation,
            if opened.restored { " (restored)" } else { " (new)" }
        );
        Ok(RaftStarter { config, opened, runtime: None })
    }

    /// Opens and starts a member in one go, with `config.me.app` as its
    /// application data. Returns at once: the join (or bootstrap) goes on in
    /// the background and is reported through [`Replica::connectivity`].
    pub fn start(config: GroupConfig, replica: Box<dyn Replica>) -> Result<Arc<RaftGroup>, GroupError> {
        let app = config.me.app.clone();
        Self::open(config)?.start_group(app, replica)
    }
}

/// What `launch` takes: a member's settings, durable state, replica and
/// resumed state machine.
pub(crate) type Prepared = (GroupConfig, Opened, SharedReplica, StateMachine);

impl RaftStarter {
    /// Starts the member on `runtime`, a simulation's host, instead of a
    /// runtime of its own. The member's calls then wait for that runtime
    /// from the caller's thread, which must not be the one that drives it
    /// (see `RaftGroup::hosted`). The engine's shell runs so under a
    /// simulated network (crates/engine/tests/shell_simulation.rs).
    pub fn on_runtime(mut self, runtime: Handle) -> RaftStarter {
        self.runtime = Some(runtime);
        self
    }

    /// As [`GroupStarter::start`], keeping the concrete type.
    pub fn start_group(self, app: Vec<u8>, replica: Box<dyn Replica>) -> Result<Arc<RaftGroup>, GroupError> {
        let given = self.runtime.clone();
        let (config, opened, replica, sm) = self.prepare(app, replica)?;
        match given {
            None => launch_member(config, opened, replica, sm),
            Some(handle) => launch_on(handle, config, opened, replica, sm),
        }
    }

    /// Resumes the replica from the checkpoint the start resumes at.
    pub(crate) fn prepare(self, app: Vec<u8>, replica: Box<dyn Replica>) -> Result<Prepared, GroupError> {
        let RaftStarter { mut config, opened, .. } = self;
        config.me.uuid = opened.identity.uuid;
        config.me.app = app;
        let replica: SharedReplica = Arc::new(Mutex::new(replica));
        let cps = opened.checkpoints.clone();
        let resume = choose_resume(&cps.list(), config.resume_at)
            .map(|c| cps.read(c.index))
            .transpose()
            .map_err(|e| GroupError::Other(format!("cannot read the checkpoint to resume from: {e}")))?;
        let sm = StateMachine::resume(replica.clone(), cps, config.log.segment_bytes, resume)
            .map_err(|e| GroupError::Other(format!("cannot resume the replicated state: {e}")))?
            .recording_voters(opened.log.clone())
            .counting_own(opened.identity.member);
        Ok((config, opened, replica, sm))
    }
}

fn launch_member(
    config: GroupConfig,
    opened: Opened,
    replica: SharedReplica,
    sm: StateMachine,
) -> Result<Arc<RaftGroup>, GroupError> {
    let runtime = build_runtime(config.threads)?;
    match on_runtime(&runtime, launch(config, opened, replica, sm)) {
        Ok(up) => {
            let handle = runtime.handle().clone();
            Ok(RaftGroup::assemble_on(up.shared, handle, Some(runtime), up.queue, up.local_addr))
        }
        Err(e) => {
            discard(runtime);
            Err(e)
        }
    }
}

/// Starts a member on a runtime it does not own, waiting on this thread
/// for the runtime's thread to launch it.
fn launch_on(
    handle: Handle,
    config: GroupConfig,
    opened: Opened,
    replica: SharedReplica,
    sm: StateMachine,
) -> Result<Arc<RaftGroup>, GroupError> {
    let (tx, rx) = std_mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(launch(config, opened, replica, sm).await);
    });
    let up = rx.recv().unwrap_or_else(|_| Err(GroupError::Other("the group start task died".into())))?;
    Ok(RaftGroup::assemble_on(up.shared, handle, None, up.queue, up.local_addr))
}

/// A member started on some runtime: what its handles need.
pub(crate) struct Launched {
    pub shared: Arc<Shared>,
    pub queue: mpsc::Sender<AppPayload>,
    pub local_addr: SocketAddr,
}

/// Starts a member on the runtime this task runs on: its own (`start`),
/// or a simulation's host (`HostedMember`). Listens, starts openraft
/// (bootstrapping if asked), then spawns the member's tasks.
pub(crate) async fn launch(
    config: GroupConfig,
    opened: Opened,
    replica: SharedReplica,
    sm: StateMachine,
) -> Result<Launched, GroupError> {
    let log = opened.log.clone();
    let launched = launch_raft(config, opened, replica, sm).await;
    if launched.is_err() {
        stop_flusher(&log);
    }
    launched
}

async fn launch_raft(
    mut config: GroupConfig,
    opened: Opened,
    replica: SharedReplica,
    sm: StateMachine,
) -> Result<Launched, GroupError> {
    let raft_config = Arc::new(config::raft_config(&config.cluster_name, &config.timeouts)?);
    let tls = tls_mode(&config)?;
    let (listener, local_addr) = listen(&config).await?;
    fill_group_addr(&mut config, local_addr);
    let me = opened.identity.member;
    let suspect = Duration::from_millis(raft_config.election_timeout_max);
    let hello = Hello { cluster: config.cluster_name.clone(), member: me, info: config.me.clone(), group: None };
    let net = Arc::new(
        NetCtx::new(hello, suspect, tls, config.admission.clone())
            .over(config.wires.clone())
            .dialling_from(&config.listen_addr),
    );
    if opened.restored {
        net.set_former_group(opened.group.or(config.history));
    }
    if opened.restored && !config.bootstrap {
        crate::catch_up::from_any_member(&config, &net, &opened.log).await;
    }
    let network = || Network::new(net.clone(), suspect / 2);
    let mut raft = start_raft(me, raft_config.clone(), network(), &opened.log, &sm).await?;
    if config.bootstrap {
        raft = rebootstrap_if_needed(raft, &config, me, &opened.log, &sm, || (raft_config.clone(), network())).await?;
    }
    let config_partition = config.partition;
    let config_weight = config.me.weight;
    let shared = Arc::new(Shared {
        me,
        config,
        raft: std::sync::RwLock::new(raft),
        raft_config,
        net,
        replica,
        primary: AtomicBool::new(false),
        ever_primary: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        suspect,
        restored: opened.restored,
        log: opened.log,
        sm,
        checkpoints: opened.checkpoints,
        released: AtomicI64::new(i64::MIN),
        callers: Default::default(),
        reads: Default::default(),
        partition: std::sync::Mutex::new(config_partition),
        weight: std::sync::atomic::AtomicU32::new(config_weight),
        submit_queued: Default::default(),
        forwards: Default::default(),
        donations: Default::default(),
        in_core: Default::default(),
        appended: Default::default(),
        started: tokio::time::Instant::now(),
        handing_over: AtomicBool::new(false),
    });
    let (queue, queue_rx) = mpsc::channel(submit::QUEUE_CAPACITY);
    spawn_tasks(&shared, listener, queue_rx);
    info!(
        "Tandem group member {} ({}) listening on {local_addr} for cluster '{}'",
        shared.me, shared.config.me.name, shared.config.cluster_name
    );
    Ok(Launched { shared, queue, local_addr })
}

pub(crate) fn stop_flusher(log: &DurableLog) {
    if let Some(f) = log.flusher() {
        f.stop();
    }
}

/// Drops a runtime from a plain thread: dropping it where the caller stands
/// panics if that is inside some other async context.
fn discard(runtime: Runtime) {
    let _ = std::thread::spawn(move || drop(runtime)).join();
}

/// Creates the Raft node on the runtime this task runs on. openraft
/// replays the committed log after the resumed checkpoint in here.
async fn start_raft(
    me: MemberId,
    config: Arc<openraft::Config>,
    network: Network,
    log: &DurableLog,
    sm: &StateMachine,
) -> Result<GroupRaft, GroupError> {
    openraft::Raft::new(me, config, network, log.clone(), sm.clone())
        .await
        .map_err(|e| GroupError::Other(format!("cannot start Raft: {e}")))
}

fn on_runtime<T: Send + 'static>(
    runtime: &Runtime,
    fut: impl std::future::Future<Output = Result<T, GroupError>> + Send + 'static,
) -> Result<T, GroupError> {
    let (tx, rx) = std_mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().unwrap_or_else(|_| Err(GroupError::Other("the group start task died".into())))
}

/// `bootstrap` on a member with durable state: found a group where there is
/// none, keep the group where this member is the only voter, else make it
/// the only voter (a forced new primary component).
async fn rebootstrap_if_needed(
    raft: GroupRaft,
    config: &GroupConfig,
    me: MemberId,
    log: &DurableLog,
    sm: &StateMachine,
    fresh: impl Fn() -> (Arc<openraft::Config>, Network),
) -> Result<GroupRaft, GroupError> {
    let initialized = raft.is_initialized().await.map_err(|e| GroupError::Other(e.to_string()))?;
    if !initialized {
        let members = BTreeMap::from([(me, config.me.clone())]);
        raft.initialize(members).await.map_err(|e| GroupError::Other(format!("cannot bootstrap a new group: {e}")))?;
        info!("Bootstrapped a new group as member {me} ({})", config.me.name);
        return Ok(raft);
    }
    let voters: BTreeSet<MemberId> = {
        use openraft::async_runtime::WatchReceiver;
        raft.metrics().borrow_watched().membership_config.membership().voter_ids().collect()
    };
    if voters == BTreeSet::from([me]) {
        info!("Bootstrapping from durable state: member {me} is the only voter of its group");
        return Ok(raft);
    }
    warn!(
        "Bootstrapping a new primary component from this member's durable state: the other voters {:?} \
         must rejoin it",
        voters.iter().filter(|v| **v != me).collect::<Vec<_>>()
    );
    raft.shutdown().await.map_err(|e| GroupError::Other(e.to_string()))?;
    crate::sync::blocking_section(|| make_only_voter(log, me, config))?;
    let (raft_config, network) = fresh();
    start_raft(me, raft_config, network, log, sm).await
}

/// Appends a membership with this member as the only voter, in a term above
/// any seen, and votes for itself in that term: on start it is elected
/// alone, and the entry commits with its first one.
pub(crate) fn make_only_voter(log: &DurableLog, me: MemberId, config: &GroupConfig) -> Result<(), GroupError> {
    let nodes = BTreeMap::from([(me, config.me.clone())]);
    make_voters(log, me, nodes, BTreeSet::from([me]))
}

/// Appends a membership of `nodes` with `voters` voting (the others are
/// learners) after everything in this member's log, in a term above any it
/// has seen, and votes for itself in that term. Entries it holds that were
/// never committed commit with that membership: a commit waiting for them
/// completes instead of being lost.
pub(crate) fn make_voters(
    log: &DurableLog,
    me: MemberId,
    nodes: BTreeMap<MemberId, MemberInfo>,
    voters: BTreeSet<MemberId>,
) -> Result<(), GroupError> {
    assert!(voters.contains(&me), "the member forming a component votes in it");
    assert!(voters.iter().all(|v| nodes.contains_key(v)), "every voter is a node");
    let (vote, last) = log.vote_and_last();
    let term = vote.map_or(0, |v| v.leader_id.term).max(last.map_or(0, |l| l.leader_id.term)) + 1;
    let leader = openraft::impls::leader_id_adv::LeaderId { term, node_id: me };
    let recorded: Vec<MemberId> = voters.iter().copied().collect();
    let membership = RaftMembership::new(vec![voters], nodes)
        .map_err(|e| GroupError::Other(format!("cannot form a new membership: {e}")))?;
    let entry = Entry {
        log_id: LogId::new(leader, last.map_or(1, |l| l.index + 1)),
        payload: EntryPayload::Membership(membership),
    };
    log.force_append(entry, Vote::new(term, me))
        .map_err(|e| GroupError::Other(format!("cannot write the bootstrap entry: {e}")))?;
    // Recorded now, not when the entry is applied: a crash before that
    // would leave a start of this state believing it a member of the old
    // component (`crate::moved_on`).
    if let Err(e) = log.save_voters(&recorded) {
        warn!("Could not record the voters of the component formed: {e}");
    }
    Ok(())
}

/// The group's runtime, with `workers` worker threads (at least one). A
/// multi-threaded runtime even with one: `block_in_place` hands that
/// worker's tasks (heartbeats, the Raft core) to another thread while the
/// engine may wait.
pub(crate) fn build_runtime(workers: usize) -> Result<Runtime, GroupError> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_name_fn(|| format!("{THREAD_PREFIX}{}", SEQ.fetch_add(1, Ordering::Relaxed)))
        .enable_all()
        .build()
        .map_err(|e| GroupError::Other(format!("cannot create the group runtime: {e}")))
}

/// The group listener, bound now so that a taken port fails `start`
/// itself: on TCP, or on the given network (`GroupConfig::wires`).
async fn listen(config: &GroupConfig) -> Result<(GroupListener, SocketAddr), GroupError> {
    let addr = &config.listen_addr;
    let cannot = |e: std::io::Error| GroupError::Config(format!("cannot listen on group address {addr}: {e}"));
    let Some(wires) = &config.wires else {
        // std's bind, as before: no SO_REUSEADDR (tokio's sets it).
        let listener = std::net::TcpListener::bind(addr).map_err(cannot)?;
        listener.set_nonblocking(true).map_err(cannot)?;
        let local = listener.local_addr().map_err(cannot)?;
        return Ok((GroupListener::Tcp(tokio::net::TcpListener::from_std(listener).map_err(cannot)?), local));
    };
    if config.tls.is_some() {
        return Err(GroupError::Config("a given network (GroupConfig::wires) carries plaintext only: no TLS".into()));
    }
    let listener = wires.0.listen(addr).await.map_err(cannot)?;
    let local = listener.local_addr().map_err(cannot)?;
    Ok((GroupListener::Given(listener), local))
}

/// Peers dial `me.group_addr`; default it to where we actually listen.
fn fill_group_addr(config: &mut GroupConfig, local: std::net::SocketAddr) {
    let addr = &config.me.group_addr;
    if addr.is_empty() || addr.ends_with(":0") {
        if local.ip().is_unspecified() {
            warn!(
                "Group listener bound to {local}: set the member's group address, peers cannot dial a wildcard address"
            );
        }
        config.me.group_addr = local.to_string();
    }
}

fn spawn_tasks(shared: &Arc<Shared>, listener: GroupListener, queue_rx: mpsc::Receiver<AppPayload>) {
    let local_addr = shared.config.me.group_addr.clone();
    tokio::spawn(transport::server::serve(listener, shared.clone()));
    tokio::spawn(submit::run(shared.clone(), queue_rx));
    tokio::spawn(detector::run(shared.clone()));
    tokio::spawn(evict::run(shared.clone()));
    tokio::spawn(crate::mesh::run(shared.clone()));
    tokio::spawn(crate::weight::watch(shared.clone()));
    tokio::spawn(crate::placement::watch(shared.clone()));
    tokio::spawn(crate::store::purger::run(shared.clone()));
    if !shared.config.bootstrap {
        tokio::spawn(join::join_loop(shared.clone(), local_addr.clone()));
    }
    tokio::spawn(join::rejoin_watch(shared.clone(), local_addr));
}

/// The channel's encryption, its certificate loaded and checked now: a
/// wrong file stops the start with its name rather than every connection.
fn tls_mode(config: &GroupConfig) -> Result<TlsMode, GroupError> {
    let mode = TlsMode::load(config.tls.as_ref()).map_err(GroupError::Config)?;
    if let Some(settings) = &config.tls {
        info!(
            "The group channel is encrypted with TLS (certificate {}, CA {}){}",
            settings.files.cert.display(),
            settings.files.ca.display(),
            if settings.dynamic { "; plaintext peers accepted too (socket.dynamic=YES)" } else { "" }
        );
    }
    Ok(mode)
}
