//! One node of the cluster, the shell around the pure [`NodeCore`]: it owns
//! the threads, locks and I/O, feeds the core its inputs and carries out
//! the commands it returns. The join sequence is decided in `core.rs` and
//! `admission.rs`, and run by the appliers in `applier.rs`; client calls live
//! in `client.rs`.
//!
//! Threads of a node: the server's appliers (in `recv`), the group's own
//! runtime, and one ticker (every 100 ms: resubmissions and log retention;
//! and at once, what waits in the `outbox`).
//!
//! # Locks and the group runtime
//!
//! The group runs on its own runtime, one worker by default
//! (`gcomm.threads=1`), and calls back into this node on it (`dispatch`:
//! `apply`, `restore`, `connectivity`). A worker that blocks on a lock held
//! by a thread that waits for the group stops the whole group, for good: a
//! leader's clean stop under load deadlocked so (`disconnect` held `group`
//! across the leave; the worker, applying a write-set, wanted `group` to
//! read the flow-control level). Three rules keep that class out:
//!
//! 1. No lock of a node is held across a call into the group that waits
//!    for its runtime (`leave`, `shutdown`, `bootstrap`, `read_barrier`,
//!    `promote`, `isolate`, `set_weight`, `reload_tls`), with one
//!    exception: `send_order` across `submit`, which keeps this node's
//!    tokens in the order the group sees them.
//! 2. The group's threads never block on `send_order`: what a callback
//!    sends goes through `Node::send_or_queue`, which waits a millisecond
//!    at most and otherwise queues it in the `outbox` for the next holder
//!    of the lock, or the ticker (`Node::send` asserts this in debug
//!    builds). Flow-control messages always do, so `FlowGate::sending` is
//!    never held across a wait either.
//! 3. No guard is a temporary in a `match`, `if let` or `while let`
//!    scrutinee, where it lives through the whole block, and no std or
//!    parking_lot guard lives across an `.await`: clippy's
//!    `significant_drop_in_scrutinee` and `await_holding_lock`, denied in
//!    the workspace's Cargo.toml and run by `make lint` in `make test`.
//!
//! The order, outermost first; a thread holding one takes only those
//! below it:
//!
//! 1. `send_order`
//! 2. `FlowGate::sending`
//! 3. `options`; `LocalTrxs::open`, then a transaction's `body`
//! 4. `core` (a vote's waiter holds it only inside `votes_changed.wait`)
//! 5. leaves, held for moments, none taken while another is held (but
//!    `Waiters`, whose map is taken before a slot's reply): the receive
//!    queue, the monitors, `InFlight`,
//!    `FlowGate::state`, `outbox`, `sst`, `inconsistent_at`, `group` (to
//!    clone or take the handle, never across a call on it), `me`, the
//!    ticker's and leaver's handles.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use tandem_group::{GroupChannel, GroupConfig, GroupError, GroupStarter};

use crate::app::Application;
use crate::client::LocalTrxs;
use crate::config::{parse_cluster_address, HotOptions};
use crate::core::{Command, NodeCore};
use crate::dispatch::NodeReplica;
use crate::flow_gate::FlowGate;
use crate::message::{Body, JoinInfo};
use crate::monitor::Monitor;
use crate::options::Options;
use crate::outbox::Outbox;
use crate::queue::{Task, TaskQueue};
use crate::saved_state::{local_data, LocalData, SavedState, NOT_SAFE_TO_BOOTSTRAP};
use crate::stats::Stats;
use crate::types::{Gtid, Seqno, Uuid};
use crate::waiter::{Reply, Slot, Waiters};

pub use crate::applier::RecvEnd;
pub use crate::core::LocalState;

/// How long a clean stop waits for the group to let this member go.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the ticker runs the core's timers.
const TICK: Duration = Duration::from_millis(100);

/// How often the ticker looks at the receive queue between the applier's
/// pops and the group's pushes, which are what normally trigger flow
/// control: a slow applier pops seldom, and on busy cores the group's
/// delivery to this node can stall while its log keeps receiving, so
/// without a look of its own a node saw its queue go over the limit only
/// once a burst was delivered (on 2 cores: first seen at 78 write-sets
/// against a limit of 27).
const FLOW_TICK: Duration = Duration::from_millis(10);

/// Opens a member of a group channel: the provider passes the openraft one,
/// tests an in-process one.
pub type GroupFactory = Box<dyn Fn(GroupConfig) -> Result<Box<dyn GroupStarter>, GroupError> + Send + Sync>;

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub name: String,
    pub node_address: String,
    pub incoming: String,
    pub data_dir: PathBuf,
    pub options: String,
    /// Position of the local data, if known (`wsrep_start_position`).
    pub start_position: Gtid,
    /// `tandem arbitrator`: a voter that keeps the log but has no database.
    /// It never bootstraps, never donates, takes no state transfer (its
    /// application asks for none) and keeps no grastate.dat.
    pub arbitrator: bool,
}

/// Everything a node's threads share. Decisions about the node's state are
/// taken in `core` (pure); the rest is the machinery that carries them out.
pub(crate) struct Inner {
    pub(crate) app: Arc<dyn Application>,
    pub(crate) config: NodeConfig,
    pub(crate) options: Mutex<Options>,
    /// Values the commit path reads, parsed once per change of the options.
    pub(crate) hot: HotOptions,
    factory: GroupFactory,
    /// This process's identity in the group (set at connect).
    pub(crate) me: RwLock<Uuid>,
    pub(crate) incarnation: AtomicU32,
    /// The lock epoch within the incarnation (`certification::LockSession`):
    /// raised whenever a local transaction lets its row locks go before it
    /// is known how its write-set ends, read under `send_order`.
    pub(crate) lock_epoch: AtomicU32,
    pub(crate) group: Mutex<Option<Arc<dyn GroupChannel>>>,
    pub(crate) queue: TaskQueue,
    /// Flow control: the gate writers wait at while the group is paused.
    pub(crate) flow: FlowGate,
    pub(crate) waiters: Waiters,
    /// Held across `GroupChannel::submit`, which may wait for the group
    /// runtime: never taken on the group's threads (see `outbox`).
    pub(crate) send_order: Mutex<()>,
    /// What the group's threads and flow control send, sent by the ticker.
    pub(crate) outbox: Outbox,
    pub(crate) apply: Monitor,
    pub(crate) commit: Monitor,
    /// Local transactions and TOI statements between their first call and release.
    pub(crate) local: LocalTrxs,
    pub(crate) core: Mutex<NodeCore>,
    pub(crate) stats: Stats,
    pub(crate) sst: Mutex<Option<Result<Gtid, i32>>>,
    pub(crate) sst_done: Condvar,
    pub(crate) closing: AtomicBool,
    pub(crate) receivers: AtomicUsize,
    /// Receivers running a task now (the final view waits for the others).
    pub(crate) busy: AtomicUsize,
    /// Origin of the core's tick times.
    clock: Instant,
    ticker: Mutex<Option<JoinHandle<()>>>,
    /// Ticker threads still running (see `ticker_threads`).
    ticker_live: Arc<AtomicUsize>,
    /// `pc.bootstrap=YES` was in the configuration.
    bootstrap_at_connect: bool,
    /// Woken when the group's ballots change (threads waiting on a vote).
    pub(crate) votes_changed: Condvar,
    /// The seqno on which this node's data was voted inconsistent: it left
    /// the cluster, and only a state transfer brings it back.
    pub(crate) inconsistent_at: Mutex<Option<Seqno>>,
    /// The thread that takes an inconsistent node out of the cluster.
    leaver: Mutex<Option<JoinHandle<()>>>,
}

/// The node, shared by every server thread.
#[derive(Clone)]
pub struct Node {
    pub(crate) inner: Arc<Inner>,
}

/// Why `connect` did not connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectError {
    /// The node refuses on purpose (an unsafe bootstrap, an unknown
    /// position), already logged with its reason.
    Refused(String),
    /// Anything else (a bad address, a port in use): the caller logs it.
    /// Both answer NODE_FAIL at the ABI, as Galera's failed connects do.
    Failed(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Refused(why) | ConnectError::Failed(why) => f.write_str(why),
        }
    }
}

/// What `Node::send` did: the waiter (if asked for), whether the group
/// took the message, and the body handed back.
pub struct Sent {
    pub waiter: Option<(u64, Arc<Slot>)>,
    pub result: Result<(), GroupError>,
    pub body: Body,
}

/// An arbitrator holds no data, so a cluster it founded would have none.
pub const ARBITRATOR_CANNOT_BOOTSTRAP: &str = "An arbitrator cannot bootstrap a cluster: it holds no data. Give it \
     the addresses of the data nodes (gcomm://host1,host2) and bootstrap a data node instead.";

impl Node {
    pub fn new(app: Arc<dyn Application>, mut config: NodeConfig, factory: GroupFactory) -> Result<Node, String> {
        let saved = if config.arbitrator { None } else { SavedState::load(&config.data_dir) };
        if let Some(s) = saved {
            log::info!("Found saved state: {} (safe_to_bootstrap: {})", s.position, s.safe_to_bootstrap as u8);
        }
        if let LocalData::Known(position) = local_data(config.start_position, saved) {
            config.start_position = position;
        }
        let mut options = Options::default();
        let actions = options.set(&config.options).map_err(|e| e.to_string())?;
        // A wrong certificate or key file stops the start here, named.
        if let Some(tls) = crate::config::tls_settings(&options, &config.data_dir) {
            tandem_group::Tls::load_with(&tls.files, &tls.policy)
                .map_err(|e| format!("TLS on the group channel: {e}"))?;
        }
        // `pc.bootstrap=YES` in the configuration means: bootstrap at connect.
        let bootstrap_at_connect = actions.contains(&crate::options::OptionAction::Bootstrap);
        let position = config.start_position.seqno;
        let core = NodeCore::new(Uuid::NIL, 0, config.start_position, String::new());
        let queue_bound = crate::config::recv_queue_bound(&options);
        let inner = Inner {
            app,
            hot: HotOptions::from(&options),
            options: Mutex::new(options),
            factory,
            me: RwLock::new(Uuid::NIL),
            incarnation: AtomicU32::new(0),
            lock_epoch: AtomicU32::new(0),
            group: Mutex::new(None),
            queue: TaskQueue::with_bound(queue_bound),
            flow: FlowGate::default(),
            waiters: Waiters::default(),
            send_order: Mutex::new(()),
            outbox: Outbox::default(),
            apply: Monitor::new(position),
            commit: Monitor::new(position),
            local: LocalTrxs::default(),
            core: Mutex::new(core),
            stats: Stats::default(),
            sst: Mutex::new(None),
            sst_done: Condvar::new(),
            closing: AtomicBool::new(false),
            receivers: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            clock: Instant::now(),
            ticker: Mutex::new(None),
            ticker_live: Arc::new(AtomicUsize::new(0)),
            bootstrap_at_connect,
            votes_changed: Condvar::new(),
            inconsistent_at: Mutex::new(None),
            leaver: Mutex::new(None),
            config,
        };
        Ok(Node { inner: Arc::new(inner) })
    }

    pub fn me(&self) -> Uuid {
        *self.inner.me.read()
    }

    /// What the server knows this process by ([`crate::view::node_id`]).
    pub fn node_id(&self) -> Uuid {
        crate::view::node_id(self.me(), self.inner.incarnation.load(Ordering::Acquire))
    }

    pub fn group(&self) -> Option<Arc<dyn GroupChannel>> {
        self.inner.group.lock().clone()
    }

    /// The server's data directory, where a state transfer lands.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.inner.config.data_dir
    }

    /// Milliseconds since the node was created: the core's clock.
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.inner.clock.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Joins (or founds) the group. Returns at once: everything else arrives
    /// through `recv()`.
    pub fn connect(&self, cluster_name: &str, url: &str, donors: &str, bootstrap: bool) -> Result<(), ConnectError> {
        let peers = parse_cluster_address(url).map_err(ConnectError::Failed)?;
        let bootstrap = bootstrap || peers.is_empty() || self.inner.bootstrap_at_connect;
        let start = self.check_start(bootstrap)?;
        let mut config = self.group_config(cluster_name, peers, bootstrap);
        config.resume_at = (start.seqno >= 0).then_some(start.seqno);
        config.history = (start.uuid != Uuid::NIL).then_some(start.uuid.0);
        if bootstrap && start.seqno < 0 {
            // As Galera: bootstrapping data of no known position starts a new
            // history, and the old log describes nothing this node holds.
            config.start_anew = Some(
                "this node bootstraps a new cluster from data with no saved position (no grastate.dat or \
                 wsrep_start_position), which starts a new history"
                    .into(),
            );
        }
        let (listen, name) = (config.listen_addr.clone(), config.me.name.clone());
        let starter = (self.inner.factory)(config).map_err(|e| ConnectError::Failed(e.to_string()))?;
        let identity = starter.identity();
        let (me, incarnation) = (Uuid(identity.uuid), identity.incarnation);
        *self.inner.me.write() = me;
        self.inner.incarnation.store(incarnation, Ordering::Release);
        self.inner.closing.store(false, Ordering::Release);
        self.inner.queue.reopen();
        self.inner.apply.reopen();
        self.inner.commit.reopen();
        {
            let mut core = self.inner.core.lock();
            *core = NodeCore::new(me, incarnation, start, donors.to_string());
            core.votes_enabled = !self.inner.config.arbitrator;
        }
        let freeze = self.inner.options.lock().get("gcache.freeze_purge_at_seqno").to_string();
        self.freeze_purge(&freeze);
        log::info!(
            "Connecting to cluster '{cluster_name}' at '{url}' as {name} ({me}, incarnation {incarnation}{}; node id {}), listening on {listen}{}",
            if identity.restored { ", restored" } else { "" },
            crate::view::node_id(me, incarnation),
            if bootstrap { ", bootstrapping a new cluster" } else { "" }
        );
        let app = JoinInfo { incarnation, position: start, arbitrator: self.inner.config.arbitrator }.encode();
        let replica = NodeReplica::new(self.clone());
        let group = starter.start(app, Box::new(replica)).map_err(|e| ConnectError::Failed(e.to_string()))?;
        *self.inner.group.lock() = Some(group);
        // Messages of an earlier connection's last moments are not ours to send now.
        drop(self.inner.outbox.take_now());
        self.start_ticker();
        Ok(())
    }

    /// Where the local data starts from, or why this node must not connect:
    /// Galera refuses to bootstrap from a node that was not the last to
    /// leave, and no node joins on a guessed position.
    fn check_start(&self, bootstrap: bool) -> Result<Gtid, ConnectError> {
        if self.inner.config.arbitrator {
            if bootstrap {
                log::error!("{ARBITRATOR_CANNOT_BOOTSTRAP}");
                return Err(ConnectError::Refused(ARBITRATOR_CANNOT_BOOTSTRAP.into()));
            }
            return Ok(Gtid::UNDEFINED);
        }
        let saved = SavedState::load(&self.inner.config.data_dir);
        if bootstrap && saved.is_some_and(|s| !s.safe_to_bootstrap && !s.position.uuid.is_nil()) {
            log::error!("{NOT_SAFE_TO_BOOTSTRAP}");
            return Err(ConnectError::Refused(NOT_SAFE_TO_BOOTSTRAP.into()));
        }
        match local_data(self.inner.config.start_position, saved) {
            LocalData::Known(position) => Ok(position),
            LocalData::Fresh => Ok(Gtid::UNDEFINED),
            LocalData::Unknown { history } => self.unknown_position(history),
            LocalData::Inconsistent { history, at } => {
                log::info!(
                    "This node left the cluster as inconsistent at {}: a full state transfer replaces its data",
                    Gtid { uuid: history, seqno: at }
                );
                // Kept until the transfer is in: a crash before it must not
                // let the old data join.
                *self.inner.inconsistent_at.lock() = Some(at);
                Ok(Gtid::UNDEFINED)
            }
        }
    }

    fn unknown_position(&self, history: Uuid) -> Result<Gtid, ConnectError> {
        if self.inner.options.lock().get("repl.unknown_position").eq_ignore_ascii_case("sst") {
            log::warn!(
                "The position of this node's data in history {history} is unknown; a full state transfer \
                 replaces it (repl.unknown_position=sst)"
            );
            return Ok(Gtid::UNDEFINED);
        }
        let why = format!(
            "The position of this node's data in history {history} is unknown: it did not shut down cleanly \
             (grastate.dat has seqno -1), the server passed no wsrep_start_position, and `mariadbd \
             --wsrep-recover` could not read it. Joining on a guess could skip or repeat transactions, so \
             this node does not join. To fix: run `mariadbd --wsrep-recover` and start with \
             --wsrep_start_position=<uuid:seqno> (the systemd unit's galera_recovery and `tandem cluster \
             start-node` do this), or let a full state transfer replace this node's data: \
             wsrep_provider_options='repl.unknown_position=sst'"
        );
        log::error!("{why}");
        Err(ConnectError::Refused(why))
    }

    /// Leaves the group; the final view follows through `recv()`.
    pub fn disconnect(&self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.core.lock().close();
        self.inner.sst_done.notify_all();
        self.inner.waiters.wake_all();
        self.inner.flow.wake_all();
        self.stop_ticker();
        // Taken out first: the group's threads read `group` while it leaves
        // (a guard in the `if let` would live through the leave, and the
        // runtime would wait on it: the clean stop of a leader under load
        // deadlocked so).
        let group = self.inner.group.lock().take();
        if let Some(group) = group {
            if let Err(e) = group.leave(LEAVE_TIMEOUT) {
                // Several members stopping at once race to leave; the last voter
                // cannot be removed. Nothing an operator must act on.
                log::info!("Leaving the group: {e}");
            }
            group.shutdown();
        }
        self.inner.votes_changed.notify_all();
        let undecided = self.inner.core.lock().undecided_failure();
        let voted_out = self.is_inconsistent();
        if let (Some(seqno), true) = (undecided, voted_out) {
            // Already leaving as inconsistent (said so at error level): a
            // later failure's open vote changes nothing.
            log::info!("Leaving with the vote on seqno {seqno} undecided; this node is inconsistent already");
        } else if let Some(seqno) = undecided {
            log::error!(
                "Leaving while the vote on seqno {seqno} this node failed is not decided: assuming inconsistency; \
                 a full state transfer replaces this node's data at its next start"
            );
            self.inner.inconsistent_at.lock().get_or_insert(seqno);
        }
        self.save_state();
        // A synced node's final view goes behind what the group ordered
        // before it left: its appliers apply that (flow control keeps it
        // short), so the local clients ordered among it commit. (With the
        // final view first they waited for seqnos nobody would apply, for
        // good, and the clean stop of a loaded node never ended.) A node
        // catching up or donating (a backlog flow control does not bound)
        // stops at once: a client ordered behind it is rolled back, and
        // the next start applies the rest by IST.
        let drain = self.inner.core.lock().state == crate::core::LocalState::Synced;
        if self.inner.queue.push_final(drain) {
            log::info!("Applying what the group ordered before this node left, then the final view");
        }
    }

    /// Records where the local data is, for the next start.
    pub(crate) fn save_state(&self) {
        if self.inner.config.arbitrator {
            return;
        }
        let (uuid, last_member) = {
            let core = self.inner.core.lock();
            (core.group_uuid(), core.members.len() <= 1)
        };
        if uuid.is_nil() {
            return;
        }
        let inconsistent_at = *self.inner.inconsistent_at.lock();
        let state = match inconsistent_at {
            Some(at) => SavedState { inconsistent_at: Some(at), ..SavedState::running(uuid, false) },
            None => SavedState {
                position: Gtid { uuid, seqno: self.inner.apply.last_left() },
                safe_to_bootstrap: last_member,
                inconsistent_at: None,
            },
        };
        if let Err(e) = state.store(&self.inner.config.data_dir) {
            log::error!("Could not write {}: {e}", crate::saved_state::FILE);
        }
    }

    /// While running, the saved seqno is -1 (the data moves on), and the
    /// node is safe to bootstrap from only while it is the primary
    /// component's only member (Galera keeps grastate.dat the same way).
    pub(crate) fn mark_running(&self, only_member: bool) {
        // A view still draining after `disconnect` saved the position must
        // not put -1 back: the next connect would find the position unknown.
        if self.inner.config.arbitrator || self.inner.closing.load(Ordering::Acquire) {
            return;
        }
        let uuid = self.inner.core.lock().group_uuid();
        let inconsistent_at = *self.inner.inconsistent_at.lock();
        let state =
            SavedState { inconsistent_at, ..SavedState::running(uuid, only_member && inconsistent_at.is_none()) };
        if let Err(e) = state.store(&self.inner.config.data_dir) {
            log::warn!("Could not write {}: {e}", crate::saved_state::FILE);
        }
    }

    /// Stops everything for good (provider `free`): no thread of ours may
    /// run once it returns.
    pub fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.core.lock().close();
        let leaver = self.inner.leaver.lock().take();
        if let Some(handle) = leaver {
            let _ = handle.join();
        }
        self.stop_ticker();
        let group = self.inner.group.lock().take();
        if let Some(group) = group {
            group.shutdown();
        }
        self.end_applying();
    }

    /// Ticker threads still running: the library is unmapped right after
    /// the provider's `free`, so none may outlive `shutdown` (tests check).
    pub fn ticker_threads(&self) -> usize {
        self.inner.ticker_live.load(Ordering::Acquire)
    }

    fn start_ticker(&self) {
        let node = self.clone();
        let live = self.inner.ticker_live.clone();
        live.fetch_add(1, Ordering::AcqRel);
        let spawned = std::thread::Builder::new().name("tandem-ticker".into()).spawn(move || {
            struct Leaving(Arc<AtomicUsize>);
            impl Drop for Leaving {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::AcqRel);
                }
            }
            let _leaving = Leaving(live);
            let mut last_tick = std::time::Instant::now();
            let mut last_flow = std::time::Instant::now();
            while !node.inner.closing.load(Ordering::Acquire) {
                let left = FLOW_TICK.saturating_sub(last_flow.elapsed());
                if node.inner.outbox.wait(left) {
                    node.send_queued();
                }
                if last_flow.elapsed() < FLOW_TICK {
                    continue;
                }
                last_flow = std::time::Instant::now();
                node.check_flow_control();
                if last_tick.elapsed() < TICK {
                    continue;
                }
                last_tick = std::time::Instant::now();
                let commands = node.inner.core.lock().on_tick(node.now_ms(), node.inner.apply.last_left());
                node.execute(commands);
                node.tick_flow_control();
            }
        });
        match spawned {
            Ok(handle) => *self.inner.ticker.lock() = Some(handle),
            Err(e) => {
                self.inner.ticker_live.fetch_sub(1, Ordering::AcqRel);
                log::error!("Could not start the ticker thread: {e}")
            }
        }
    }

    /// Joins the ticker; it sees `closing` within one tick. Never from the
    /// ticker itself (it only runs commands, which never stop the node).
    fn stop_ticker(&self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.outbox.wake();
        let handle = self.inner.ticker.lock().take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    /// `FLUSH STATUS`.
    pub fn reset_stats(&self) {
        self.inner.stats.reset();
        self.inner.flow.reset();
    }

    /// Whether this node still has to tell the group it is synced.
    pub fn awaits_synced(&self) -> bool {
        self.inner.core.lock().awaits_synced()
    }

    /// A local transaction is about to release its row locks although its
    /// write-set was (or may yet be) ordered and certified: its client gave
    /// up waiting, or a BF abort rolls it back to replay it. Our write-sets
    /// sent from now on were not ordered after it by our locks, so the
    /// group must certify them against it. Must be called before the
    /// locks go: another transaction can only send after taking them.
    pub(crate) fn new_lock_epoch(&self, why: &str) {
        let epoch = self.inner.lock_epoch.fetch_add(1, Ordering::AcqRel) + 1;
        log::debug!("Lock epoch {epoch}: {why}");
    }

    /// Carries out what the core decided, in order.
    pub(crate) fn execute(&self, commands: Vec<Command>) {
        for command in commands {
            self.execute_one(command);
        }
    }

    fn execute_one(&self, command: Command) {
        let inner = &self.inner;
        match command {
            // The group's threads never wait for `send_order` (see `outbox`).
            Command::Submit(body) if crate::dispatch::in_replica_callback() => self.send_or_queue(body),
            Command::Submit(body) => self.submit_now(body),
            Command::WriteSet { waiter, seqno, verdict, ws, origin, apply } => {
                if let crate::certification::Verdict::Pass { depends_on } = verdict {
                    inner.stats.note_dependency(seqno - depends_on);
                }
                let taken = waiter.is_some_and(|token| {
                    inner.waiters.complete(token, Reply::Ordered { seqno, verdict: verdict.clone() })
                });
                // Remote, or local whose client gave up: apply like any other.
                // A rollback fragment is applied on its origin as well.
                if (!taken || ws.is_stream_rollback()) && apply {
                    inner.queue.push(Task::Apply { seqno, verdict, ws, origin });
                    self.check_flow_control();
                }
            }
            Command::Reply { token, reply } => {
                inner.waiters.complete(token, reply);
            }
            Command::Queue(task) => inner.queue.push(task),
            Command::Admit(admission) => inner.queue.push_front(Task::Connect(admission)),
            Command::WakeWaiters => {
                inner.waiters.wake_all();
                inner.flow.wake_all();
            }
            Command::ReportProgress => {
                let _ = self.submit(Body::Progress(self.safe_seqno()));
            }
            Command::ReleaseLog(seqno) => {
                if let Some(group) = self.group() {
                    group.release_upto(seqno);
                }
            }
            Command::IstProgress { member, committed, first, last } => {
                self.log_ist_progress(&member, committed, first, last)
            }
            Command::RestartRequired(why) => {
                log::error!("{why}. This is unrecoverable, restart required.");
                inner.queue.push_front(Task::RestartRequired);
            }
            Command::VotesChanged => {
                inner.votes_changed.notify_all();
            }
            Command::Inconsistent { seqno, mine, winner } => self.leave_inconsistent(seqno, mine, winner),
            Command::TransferFailed { donor, code } => {
                // Galera's shape ("<donor>: State transfer to <joiner> failed"),
                // which the suite's suppressions and operators' greps know.
                log::warn!("{donor}: State transfer to this node failed: {code}");
                let mut result = inner.sst.lock();
                if result.is_none() {
                    *result = Some(Err(code));
                }
                inner.sst_done.notify_all();
            }
        }
    }

    /// This node's outcome on `seqno` lost the vote: it leaves the cluster,
    /// as Galera's does, and grastate.dat says its data must be replaced.
    /// The server stays up, disconnected, until restarted. The leave runs on
    /// its own thread: this may be the group's delivery thread, which a
    /// leave waits on.
    fn leave_inconsistent(&self, seqno: Seqno, mine: crate::voting::Code, winner: crate::voting::Code) {
        let gtid = Gtid { uuid: self.inner.core.lock().group_uuid(), seqno };
        if mine == crate::voting::SUCCESS {
            log::error!("Vote 0 (success) on {gtid} is inconsistent with group. Leaving cluster.");
        } else {
            log::error!(
                "Inconsistency detected: Inconsistent by consensus on {gtid} (this node voted {mine:016x}, the \
                 group {winner:016x}). Leaving cluster; a full state transfer replaces this node's data at its \
                 next start."
            );
        }
        self.leave_as_inconsistent(seqno);
    }

    /// The server failed to apply `seqno` and gave no error the group could
    /// vote on: this node's data is no longer the group's. It leaves as one
    /// voted out does (Galera: "Node consistency compromised, leaving
    /// cluster"), rather than stay a member that applies nothing.
    pub(crate) fn leave_after_failed_apply(&self, seqno: Seqno, source: Uuid) {
        let gtid = Gtid { uuid: self.inner.core.lock().group_uuid(), seqno };
        log::error!(
            "Failed to apply write-set {gtid} from {source}: node consistency compromised, leaving cluster; a full \
             state transfer replaces this node's data at its next start."
        );
        self.leave_as_inconsistent(seqno);
    }

    fn leave_as_inconsistent(&self, seqno: Seqno) {
        {
            let mut at = self.inner.inconsistent_at.lock();
            if at.is_some() {
                return; // already leaving
            }
            *at = Some(seqno);
        }
        self.inner.votes_changed.notify_all();
        let node = self.clone();
        let spawned = std::thread::Builder::new().name("tandem-leave".into()).spawn(move || node.disconnect());
        match spawned {
            Ok(handle) => *self.inner.leaver.lock() = Some(handle),
            Err(e) => log::error!("Could not start the thread that leaves the cluster: {e}"),
        }
    }

    /// Whether this node was voted inconsistent and is leaving (or left).
    pub fn is_inconsistent(&self) -> bool {
        self.inner.inconsistent_at.lock().is_some()
    }

    /// IST progress of a joiner, logged by the member that serves the log
    /// (the group's leader), about every tenth of the range.
    fn log_ist_progress(&self, member: &str, committed: Seqno, first: Seqno, last: Seqno) {
        let Some(group) = self.group() else { return };
        let status = group.status();
        if status.leader != Some(status.me) || last < first {
            return;
        }
        let done = (committed - first + 1).clamp(0, last - first + 1);
        log::info!(
            "IST to {member}: {}% complete, applied seqno {committed} of {first}-{last}",
            done * 100 / (last - first + 1)
        );
    }

    /// Handles a connectivity report from the group.
    pub(crate) fn on_connectivity(&self, primary: bool, reachable: Vec<crate::view::ViewMember>) {
        let commands = {
            let mut core = self.inner.core.lock();
            core.reachable = reachable;
            core.on_connectivity(primary, self.now_ms())
        };
        self.execute(commands);
    }
}
