//! One node of the cluster, the shell around the pure [`NodeCore`]: it owns
//! the threads, locks and I/O, feeds the core its inputs and carries out
//! the commands it returns. This file holds what a node's threads share
//! (`Inner`) and the small reads of it every part needs.
//!
//! The shell's parts, each a module that uses only those listed before it
//! (tidy checks that no two modules of the engine need each other):
//!
//! 1. `node.rs`: the shared state, `save_state`, the lock epoch;
//! 2. `send.rs`: messages into the total order (`send_order`, the outbox);
//! 3. `flow.rs`: this node's part in flow control;
//! 4. `leave.rs`: the clean stop and the leave of an inconsistent node;
//! 5. `commands.rs`: carrying out the core's commands;
//! 6. `applier.rs` (the `recv` loop, the join sequence), then `client.rs`
//!    (what client threads call), which waits on the appliers;
//! 7. `dispatch.rs` (the replica the group drives), `status.rs`,
//!    `settings.rs` (options changed at runtime), and `connection.rs`
//!    (`connect`, the ticker, `shutdown`), which starts all of the above.
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
//! read the flow-control level; `crates/engine/tests/shell_simulation.rs`
//! puts it back and catches it). Three rules keep that class out:
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
//!    builds). Flow control decides under `FlowGate::sending`, which the
//!    group's threads take too, queues its message in the `outbox` there,
//!    and sends only once it let go (`Node::send_queued_soon`): a submit
//!    made under `sending` waited for a group thread that waited for
//!    `sending` (found by the shell simulation with a slow applier; its
//!    negative test puts it back).
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
//!    `FlowGate::state`, `outbox`, `transfer`, `inconsistency`, `group` (to
//!    clone or take the handle, never across a call on it), `id`,
//!    the ticker's and the leave's handles.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use tandem_group::{GroupChannel, GroupConfig, GroupError, GroupStarter};

use crate::app::Application;
use crate::config::HotOptions;
use crate::core::NodeCore;
use crate::flow_gate::FlowGate;
use crate::inconsistency::Inconsistency;
use crate::local_trx::LocalTrxs;
use crate::message::Body;
use crate::monitor::Monitor;
use crate::options::Options;
use crate::outbox::Outbox;
use crate::process_id::ProcessId;
use crate::queue::TaskQueue;
use crate::saved_state::{local_data, LocalData, SavedState};
use crate::stats::Stats;
use crate::ticker::Ticker;
use crate::transfer_end::TransferEnd;
use crate::types::{Gtid, Seqno, Uuid};
use crate::waiter::{Slot, Waiters};

pub use crate::config::NodeConfig;
pub use crate::core::LocalState;

/// Opens a member of a group channel: the provider passes the openraft one,
/// tests an in-process one.
pub type GroupFactory = Box<dyn Fn(GroupConfig) -> Result<Box<dyn GroupStarter>, GroupError> + Send + Sync>;

/// Everything a node's threads share. Decisions about the node's state are
/// taken in `core` (pure); the rest is the machinery that carries them out.
pub(crate) struct Inner {
    pub(crate) app: Arc<dyn Application>,
    pub(crate) config: NodeConfig,
    pub(crate) options: Mutex<Options>,
    /// Values the commit path reads, parsed once per change of the options.
    pub(crate) hot: HotOptions,
    pub(crate) factory: GroupFactory,
    /// This process's identity in the group (set at connect), and the lock
    /// epoch of its write-sets.
    pub(crate) id: ProcessId,
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
    /// How the state transfer this joiner waits for ended.
    pub(crate) transfer: TransferEnd,
    pub(crate) closing: AtomicBool,
    pub(crate) receivers: AtomicUsize,
    /// Receivers running a task now (the final view waits for the others).
    pub(crate) busy: AtomicUsize,
    /// The core's clock, and the thread that ticks it.
    pub(crate) ticker: Ticker,
    /// `pc.bootstrap=YES` was in the configuration.
    pub(crate) bootstrap_at_connect: bool,
    /// Woken when the group's ballots change (threads waiting on a vote).
    pub(crate) votes_changed: Condvar,
    /// The seqno on which this node's data was voted inconsistent (it left
    /// the cluster, and only a state transfer brings it back), and the
    /// thread that takes it out.
    pub(crate) inconsistency: Inconsistency,
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

/// How the applier loop ended.
#[derive(Debug, PartialEq, Eq)]
pub enum RecvEnd {
    Closed,
    Fatal,
    /// The server cannot go on in this process: a joiner's state transfer
    /// failed after the server had emptied its data directory, or the group
    /// no longer holds the history this node was resuming from. Galera
    /// aborts the server here; the provider does the same, so that a
    /// supervisor restarts it and the new process gets a fresh state.
    RestartRequired,
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
        let core = NodeCore::new(Uuid::NIL, 0, config.start_position, String::new(), !config.arbitrator);
        let queue_bound = crate::config::recv_queue_bound(&options);
        let inner = Inner {
            app,
            hot: HotOptions::from(&options),
            options: Mutex::new(options),
            factory,
            id: ProcessId::default(),
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
            transfer: TransferEnd::default(),
            closing: AtomicBool::new(false),
            receivers: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            ticker: Ticker::default(),
            bootstrap_at_connect,
            votes_changed: Condvar::new(),
            inconsistency: Inconsistency::default(),
            config,
        };
        Ok(Node { inner: Arc::new(inner) })
    }

    pub fn me(&self) -> Uuid {
        self.inner.id.me()
    }

    /// What the server knows this process by ([`crate::view::node_id`]).
    pub fn node_id(&self) -> Uuid {
        self.inner.id.node_id()
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
        self.inner.ticker.now_ms()
    }

    /// Records where the local data is, for the next start.
    pub(crate) fn save_state(&self) {
        if self.inner.config.arbitrator {
            return;
        }
        let (uuid, last_member) = {
            let core = self.inner.core.lock();
            (core.group_uuid(), core.members().len() <= 1)
        };
        if uuid.is_nil() {
            return;
        }
        let state = match self.inner.inconsistency.at() {
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
        let inconsistent_at = self.inner.inconsistency.at();
        let state =
            SavedState { inconsistent_at, ..SavedState::running(uuid, only_member && inconsistent_at.is_none()) };
        if let Err(e) = state.store(&self.inner.config.data_dir) {
            log::warn!("Could not write {}: {e}", crate::saved_state::FILE);
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
        let epoch = self.inner.id.new_lock_epoch();
        log::debug!("Lock epoch {epoch}: {why}");
    }

    /// The last seqno the group ordered to this node (applied or not yet).
    /// After a clean stop of a synced node, `last_committed` is this: its
    /// appliers applied everything the group ordered before it left.
    pub fn last_ordered(&self) -> Seqno {
        self.inner.core.lock().last_ordered()
    }

    /// No write-set we send from now on will have seen less than this.
    pub fn safe_seqno(&self) -> Seqno {
        self.inner.local.in_flight.safe(|| self.inner.apply.last_left())
    }

    /// Whether this node was voted inconsistent and is leaving (or left).
    pub fn is_inconsistent(&self) -> bool {
        self.inner.inconsistency.at().is_some()
    }
}
