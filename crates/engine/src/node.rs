//! One node of the cluster: the join sequence, the applier loop, and what each
//! ordered outcome means locally. Client-side calls live in `client.rs`.
//!
//! Join sequence (all of it is here):
//! 1. `connect` starts the group channel; the first primary view that
//!    includes us arrives as `Task::Connect`.
//! 2. A founder (it has the state by definition) delivers that view and is
//!    synced. Anyone else calls `sst_request`, asks the group for a state
//!    transfer (ordered, so every member agrees on the donor) and blocks the
//!    applier queue until the server reports `sst_received`.
//! 3. Write-sets ordered meanwhile wait in the queue; those already contained
//!    in the transferred state are skipped, the rest applied.
//! 4. The node announces `Synced` through the group; when that comes back
//!    ordered, everything before it has been applied: `synced_cb`, and the
//!    group promotes us to voter.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use tandem_group::{GroupChannel, GroupConfig, GroupError, Replica};

use crate::app::{ApplyJob, Application};
use crate::certification::Verdict;
use crate::client::LocalTrx;
use crate::config::{parse_cluster_address, HotOptions};
use crate::dispatch::NodeReplica;
use crate::group_state::{GroupState, ViewChange};
use crate::message::{Body, Envelope, MemberState};
use crate::monitor::Monitor;
use crate::options::Options;
use crate::queue::{Task, TaskQueue};
use crate::saved_state::SavedState;
use crate::stats::Stats;
use crate::types::{Gtid, Seqno, Uuid};
use crate::view::{View, ViewMember, ViewStatus};
use crate::waiter::{Reply, Slot, Waiters};
use crate::writeset::flags;

/// Every this many seqnos each member reports its safe seqno.
pub(crate) const PROGRESS_INTERVAL: Seqno = 1024;

/// A message a leader change may lose is submitted again this often until
/// its effect is seen (`Node::resubmit_until`).
const RESUBMIT_EVERY: Duration = Duration::from_secs(2);

/// Starts a group channel; the provider passes the openraft one, tests a
/// simulated one.
pub type GroupFactory =
    Box<dyn Fn(GroupConfig, Box<dyn Replica>) -> Result<Arc<dyn GroupChannel>, GroupError> + Send + Sync>;

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub name: String,
    pub node_address: String,
    pub incoming: String,
    pub data_dir: PathBuf,
    pub options: String,
    /// Position of the local data, if known (`wsrep_start_position`).
    pub start_position: Gtid,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalState {
    Initialized,
    Joining,
    ReceivingState,
    Joined,
    Synced,
    Donor,
}

impl LocalState {
    pub fn comment(self) -> &'static str {
        match self {
            LocalState::Initialized => "Initialized",
            LocalState::Joining => "Joining",
            LocalState::ReceivingState => "Joining: receiving State Transfer",
            LocalState::Joined => "Joined",
            LocalState::Synced => "Synced",
            LocalState::Donor => "Donor/Desynced",
        }
    }

    /// `wsrep_member_status_t` numbering.
    pub fn number(self) -> i64 {
        match self {
            LocalState::Initialized => 0,
            LocalState::Joining | LocalState::ReceivingState => 1,
            LocalState::Donor => 2,
            LocalState::Joined => 3,
            LocalState::Synced => 4,
        }
    }
}

#[derive(Debug)]
pub struct Local {
    pub state: LocalState,
    pub group_uuid: Uuid,
    /// Last seqno handed out by the group, as far as we have seen.
    pub last_ordered: Seqno,
    /// We are in the primary component (as the group channel tells us).
    pub primary: bool,
    pub non_primary_since: Option<Instant>,
    /// The group has delivered a view that includes us.
    pub in_group: bool,
    /// A primary view must be followed by `synced_cb` (we were cut off).
    pub resync_on_view: bool,
    /// Views the group has ordered since we started (counts, never resets).
    pub views_ordered: u64,
    /// A thread is announcing that we are synced (see `announce_synced`).
    pub announcing_synced: bool,
    pub members: Vec<ViewMember>,
    /// Members of the latest ordered view, even while the applier queue is
    /// held (a joiner watches its donor through this).
    pub view_members: Vec<Uuid>,
    pub donors: String,
    pub desyncs: u32,
}

pub struct Inner {
    pub app: Arc<dyn Application>,
    pub config: NodeConfig,
    pub options: Mutex<Options>,
    /// Values the commit path reads, parsed once per change of the options.
    pub hot: HotOptions,
    factory: GroupFactory,
    pub me: RwLock<Uuid>,
    pub group: Mutex<Option<Arc<dyn GroupChannel>>>,
    pub queue: TaskQueue,
    pub waiters: Waiters,
    send_order: Mutex<()>,
    pub apply: Monitor,
    pub commit: Monitor,
    pub trxs: Mutex<HashMap<u64, Arc<LocalTrx>>>,
    pub toi: Mutex<HashMap<u64, Seqno>>,
    /// `last_seen` of local write-sets on their way through the group.
    pub in_flight: Mutex<std::collections::BTreeMap<Seqno, usize>>,
    pub local: Mutex<Local>,
    pub stats: Stats,
    sst: Mutex<Option<Result<Gtid, i32>>>,
    sst_done: Condvar,
    pub closing: AtomicBool,
    receivers: AtomicUsize,
    /// Threads started by `resubmit_until`; `shutdown` joins them, because
    /// the library is unmapped right after the provider's `free`.
    resubmitters: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// How many of them are still running (see `resubmitters_running`).
    resubmitters_live: Arc<AtomicUsize>,
}

/// The node, shared by every server thread.
#[derive(Clone)]
pub struct Node {
    pub inner: Arc<Inner>,
}

/// What `Node::send` did: the waiter (if asked for), whether the group
/// took the message, and the body handed back.
pub struct Sent {
    pub waiter: Option<(u64, Arc<Slot>)>,
    pub result: Result<(), GroupError>,
    pub body: Body,
}

/// How the applier loop ended.
#[derive(Debug, PartialEq, Eq)]
pub enum RecvEnd {
    Closed,
    Fatal,
    /// The joiner's state transfer failed after the server had emptied its
    /// data directory: nothing this process can serve any more. Galera
    /// aborts the server here; the provider does the same, so that a
    /// supervisor restarts it and the new process asks for a fresh SST.
    RestartRequired,
}

enum Step {
    Next,
    ExitThread,
    Fatal,
    RestartRequired,
}

impl Node {
    pub fn new(app: Arc<dyn Application>, mut config: NodeConfig, factory: GroupFactory) -> Result<Node, String> {
        if config.start_position.seqno < 0 {
            if let Some(saved) = SavedState::load(&config.data_dir) {
                log::info!("Found saved state: {} (safe_to_bootstrap: {})", saved.position, saved.safe_to_bootstrap as u8);
                config.start_position = saved.position;
            }
        }
        let mut options = Options::default();
        options.set(&config.options).map_err(|e| e.to_string())?;
        let position = config.start_position.seqno;
        let inner = Inner {
            app,
            hot: HotOptions::from(&options),
            options: Mutex::new(options),
            factory,
            me: RwLock::new(Uuid::random()),
            group: Mutex::new(None),
            queue: TaskQueue::default(),
            waiters: Waiters::default(),
            send_order: Mutex::new(()),
            apply: Monitor::new(position),
            commit: Monitor::new(position),
            trxs: Mutex::new(HashMap::new()),
            toi: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(Default::default()),
            local: Mutex::new(Local {
                state: LocalState::Initialized,
                group_uuid: config.start_position.uuid,
                last_ordered: position,
                primary: false,
                non_primary_since: None,
                in_group: false,
                resync_on_view: false,
                views_ordered: 0,
                announcing_synced: false,
                members: vec![],
                view_members: vec![],
                donors: String::new(),
                desyncs: 0,
            }),
            stats: Stats::default(),
            sst: Mutex::new(None),
            sst_done: Condvar::new(),
            closing: AtomicBool::new(false),
            receivers: AtomicUsize::new(0),
            resubmitters: Mutex::new(Vec::new()),
            resubmitters_live: Arc::new(AtomicUsize::new(0)),
            config,
        };
        Ok(Node { inner: Arc::new(inner) })
    }

    pub fn me(&self) -> Uuid {
        *self.inner.me.read()
    }

    pub fn group(&self) -> Option<Arc<dyn GroupChannel>> {
        self.inner.group.lock().clone()
    }

    /// Joins (or founds) the group. Returns at once: everything else arrives
    /// through `recv()`.
    pub fn connect(&self, cluster_name: &str, url: &str, donors: &str, bootstrap: bool) -> Result<(), String> {
        let peers = parse_cluster_address(url)?;
        let bootstrap = bootstrap || peers.is_empty();
        let config = self.group_config(cluster_name, peers, bootstrap);
        *self.inner.me.write() = Uuid(config.me.uuid);
        self.inner.closing.store(false, Ordering::Release);
        self.inner.queue.reopen();
        {
            let mut l = self.inner.local.lock();
            l.donors = donors.to_string();
            l.in_group = false;
            l.primary = false;
        }
        log::info!(
            "Connecting to cluster '{cluster_name}' at '{url}' as {} ({}), listening on {}{}",
            config.me.name,
            self.me(),
            config.listen_addr,
            if bootstrap { ", bootstrapping a new cluster" } else { "" }
        );
        let replica = NodeReplica { node: self.clone(), state: GroupState::default() };
        let group = (self.inner.factory)(config, Box::new(replica)).map_err(|e| e.to_string())?;
        *self.inner.group.lock() = Some(group);
        Ok(())
    }

    /// Leaves the group; the final view follows through `recv()`.
    pub fn disconnect(&self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.sst_done.notify_all();
        self.inner.waiters.wake_all();
        if let Some(group) = self.inner.group.lock().take() {
            if let Err(e) = group.leave(Duration::from_secs(5)) {
                // Several members stopping at once race to leave; the last voter
                // cannot be removed. Nothing an operator must act on.
                log::info!("Leaving the group: {e}");
            }
            group.shutdown();
        }
        self.save_state();
        self.inner.queue.push(Task::Final);
    }

    /// Records where the local data is, for the next start.
    fn save_state(&self) {
        let (uuid, last_member) = {
            let l = self.inner.local.lock();
            (l.group_uuid, l.members.len() <= 1)
        };
        if uuid.is_nil() {
            return;
        }
        let state = SavedState { position: Gtid { uuid, seqno: self.inner.apply.last_left() }, safe_to_bootstrap: last_member };
        if let Err(e) = state.store(&self.inner.config.data_dir) {
            log::error!("Could not write {}: {e}", crate::saved_state::FILE);
        }
    }

    /// While running, the saved seqno is -1: the data moves on.
    fn mark_running(&self, uuid: Uuid) {
        let state = SavedState { position: Gtid { uuid, seqno: -1 }, safe_to_bootstrap: false };
        if let Err(e) = state.store(&self.inner.config.data_dir) {
            log::warn!("Could not write {}: {e}", crate::saved_state::FILE);
        }
    }

    /// Stops everything for good (provider `free`): no thread of ours may
    /// run once it returns.
    pub fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::Release);
        if let Some(group) = self.inner.group.lock().take() {
            group.shutdown();
        }
        self.inner.queue.close();
        // They see `closing` within one tick (100 ms).
        let resubmitters = std::mem::take(&mut *self.inner.resubmitters.lock());
        for thread in resubmitters {
            let _ = thread.join();
        }
    }

    /// Threads of `resubmit_until` still running (observability for tests).
    pub fn resubmitters_running(&self) -> usize {
        self.inner.resubmitters_live.load(Ordering::Acquire)
    }

    /// Sends a message nobody waits for.
    pub fn submit(&self, body: Body) -> Result<(), GroupError> {
        self.send(body, false).result
    }

    /// Sends a message, optionally registering a waiter for its return.
    /// Tokens are taken and messages submitted under one lock, so tokens
    /// reach the group in increasing order (what loss detection relies on).
    pub fn send(&self, body: Body, wait: bool) -> Sent {
        let group = self.group();
        let _order = self.inner.send_order.lock();
        let token = self.inner.waiters.next_token();
        let slot = wait.then(|| (token, self.inner.waiters.register(token)));
        let envelope = Envelope { source: self.me(), token, body };
        let sent = match group {
            Some(g) => g.submit(envelope.encode()),
            None => Err(GroupError::Closed),
        };
        if sent.is_err() {
            if let Some((token, _)) = &slot {
                self.inner.waiters.abandon(*token);
            }
        }
        Sent { waiter: slot, result: sent, body: envelope.body }
    }

    /// The applier loop of one server thread.
    pub fn recv(&self, ctx: usize) -> RecvEnd {
        self.inner.receivers.fetch_add(1, Ordering::AcqRel);
        let end = loop {
            let Some(task) = self.inner.queue.pop() else { break RecvEnd::Closed };
            self.inner.stats.note_queue(self.inner.queue.len() as i64);
            match self.run(ctx, task) {
                Step::Next => {}
                Step::ExitThread if self.inner.receivers.load(Ordering::Acquire) > 1 => break RecvEnd::Closed,
                Step::ExitThread => {}
                Step::Fatal => {
                    self.inner.queue.close();
                    break RecvEnd::Fatal;
                }
                Step::RestartRequired => {
                    self.inner.queue.close();
                    break RecvEnd::RestartRequired;
                }
            }
        };
        self.inner.receivers.fetch_sub(1, Ordering::AcqRel);
        end
    }

    fn run(&self, ctx: usize, task: Task) -> Step {
        match task {
            Task::Apply { seqno, verdict, ws } => self.apply_write_set(ctx, seqno, &verdict, &ws),
            Task::Connect(vc) => self.join(ctx, &vc),
            Task::View(vc) => self.deliver_view(ctx, &vc),
            Task::NonPrimary { after } => self.deliver_non_primary(ctx, after),
            Task::Donate { after, request, joiner } => self.donate(ctx, after, &request, joiner),
            Task::Synced { after } => self.become_synced(after),
            Task::Final => {
                let group_uuid = self.inner.local.lock().group_uuid;
                self.inner.app.view(ctx, &View::final_view(group_uuid));
                self.inner.local.lock().state = LocalState::Initialized;
                self.inner.queue.close();
                Step::Next
            }
        }
    }

    fn apply_write_set(&self, ctx: usize, seqno: Seqno, verdict: &Verdict, ws: &crate::writeset::WriteSet) -> Step {
        let inner = &self.inner;
        if inner.apply.has_left(seqno) {
            return Step::Next; // contained in the state we received
        }
        let (depends_on, extra) = match verdict {
            Verdict::Pass { depends_on } => (*depends_on, 0),
            // A loser still consumes its seqno, as an empty ordered event.
            Verdict::Fail => (seqno - 1, flags::ROLLBACK),
        };
        if inner.apply.last_left() < depends_on {
            inner.stats.apply_waits.fetch_add(1, Ordering::Relaxed);
        }
        if inner.apply.enter(seqno, depends_on, None, None).is_err() {
            return Step::Next;
        }
        let job = ApplyJob {
            trx_id: ws.trx_id,
            conn_id: ws.conn_id,
            source: ws.source,
            flags: ws.flags | extra,
            data: &ws.data,
            gtid: Gtid { uuid: inner.local.lock().group_uuid, seqno },
            depends_on,
            opaque: 0,
        };
        let applied = inner.app.apply(ctx, &job);
        // The server leaves commit order itself; this covers paths where it
        // did not (a failed apply), so later seqnos never stall.
        inner.commit.leave(seqno);
        inner.apply.leave(seqno);
        Stats::add(&inner.stats.received, 1);
        Stats::add(&inner.stats.received_bytes, ws.data.len() as u64);
        if !applied.ok {
            log::error!("Failed to apply write-set {seqno} from {}: node is inconsistent", ws.source);
            return Step::Fatal;
        }
        if applied.exit_loop {
            Step::ExitThread
        } else {
            Step::Next
        }
    }

    fn view_for(&self, vc: &ViewChange) -> View {
        View {
            status: ViewStatus::Primary,
            state_id: vc.state_id,
            view_no: vc.view_no,
            my_idx: View::index_of(&vc.members, self.me()),
            members: vc.members.clone(),
        }
    }

    /// Waits until `seqno` may enter `monitor`; false if the provider closes first.
    fn wait_turn(&self, monitor: &Monitor, seqno: Seqno) -> bool {
        loop {
            if monitor.enter(seqno, seqno - 1, None, Some(Duration::from_millis(500))).is_ok() {
                return true;
            }
            if self.inner.closing.load(Ordering::Acquire) {
                return false;
            }
        }
    }

    /// A primary view consumes its seqno: it goes through both monitors alone.
    fn deliver_view(&self, ctx: usize, vc: &ViewChange) -> Step {
        let s = vc.state_id.seqno;
        let inner = &self.inner;
        if inner.apply.has_left(s) {
            return Step::Next;
        }
        // While closing, what comes before the view may never be applied (the
        // queue is dropped): a view is not worth a hung shutdown.
        if !self.wait_turn(&inner.apply, s) || !self.wait_turn(&inner.commit, s) {
            return Step::Next;
        }
        let ok = inner.app.view(ctx, &self.view_for(vc));
        inner.commit.leave(s);
        inner.apply.leave(s);
        let resync = {
            let mut l = inner.local.lock();
            l.members = vc.members.clone();
            std::mem::take(&mut l.resync_on_view)
        };
        log::info!("New primary view {} with {} member(s) at seqno {s}", vc.view_no, vc.members.len());
        if !ok {
            log::error!("The server refused view {}", vc.view_no);
            return Step::Fatal;
        }
        if resync {
            {
                let mut l = inner.local.lock();
                // An operator's desync outlives the non-primary spell.
                l.state = if l.desyncs > 0 {
                    LocalState::Donor
                } else {
                    LocalState::Joined
                };
            }
            self.announce_synced();
        }
        Step::Next
    }

    fn join(&self, ctx: usize, vc: &ViewChange) -> Step {
        let inner = &self.inner;
        // The view a joiner gets through connected_cb is its current view
        // (a later non-primary view and the status variables are built from it).
        inner.local.lock().members = vc.members.clone();
        let view = self.view_for(vc);
        if !inner.app.connected(&view) {
            log::error!("The server refused to connect to view {}", vc.view_no);
            inner.queue.release_hold();
            return Step::Fatal;
        }
        let founder = vc.members.len() == 1;
        let step = if founder { self.found(ctx, vc) } else { self.receive_state(vc) };
        inner.queue.release_hold();
        step
    }

    fn found(&self, ctx: usize, vc: &ViewChange) -> Step {
        let s = vc.state_id.seqno;
        self.inner.apply.reset(s - 1);
        self.inner.commit.reset(s - 1);
        let step = self.deliver_view(ctx, vc);
        if matches!(step, Step::Next) {
            self.set_synced();
        }
        step
    }

    fn receive_state(&self, vc: &ViewChange) -> Step {
        let inner = &self.inner;
        inner.local.lock().state = LocalState::Joining;
        let request = inner.app.sst_request().unwrap_or_default();
        let position = if request.is_empty() || request.starts_with(b"trivial") {
            // wsrep_sst_method=skip: the data is declared to be at the view.
            log::info!("State transfer skipped at the server's request");
            vc.state_id.seqno
        } else {
            match self.request_and_wait_state(&request) {
                Ok(gtid) => gtid.seqno,
                Err(StateTransferEnd::Closing) => return Step::Fatal,
                Err(StateTransferEnd::Failed) => return Step::RestartRequired,
            }
        };
        inner.apply.reset(position);
        inner.commit.reset(position);
        inner.local.lock().state = LocalState::Joined;
        log::info!("Joined at seqno {position}; catching up with the group");
        self.announce_synced();
        Step::Next
    }

    /// Asks the group for a donor until one is found, then waits for the
    /// server's `sst_received`. If the donor leaves the group first, asks
    /// again: the server's receiver is still listening for any donor.
    fn request_and_wait_state(&self, request: &[u8]) -> Result<Gtid, StateTransferEnd> {
        let inner = &self.inner;
        loop {
            let donor = self.find_donor(request).ok_or(StateTransferEnd::Closing)?;
            inner.local.lock().state = LocalState::ReceivingState;
            let mut result = inner.sst.lock();
            while result.is_none() && !inner.closing.load(Ordering::Acquire) {
                inner.sst_done.wait_for(&mut result, Duration::from_millis(500));
                if result.is_none() && !inner.local.lock().view_members.contains(&donor) {
                    break;
                }
            }
            match result.take() {
                Some(Ok(gtid)) => return Ok(gtid),
                Some(Err(rc)) => {
                    log::error!("State transfer failed: {rc}. This is unrecoverable, restart required.");
                    return Err(StateTransferEnd::Failed);
                }
                None if inner.closing.load(Ordering::Acquire) => return Err(StateTransferEnd::Closing),
                None => log::warn!("Donor {donor} left the group before the state transfer completed; asking again"),
            }
        }
    }

    /// Submits the state transfer request until the group names a donor.
    /// None: the provider is closing.
    fn find_donor(&self, request: &[u8]) -> Option<Uuid> {
        let inner = &self.inner;
        let donors = inner.local.lock().donors.clone();
        loop {
            if inner.closing.load(Ordering::Acquire) {
                return None;
            }
            let sent = self.send(Body::StateRequest { donors: donors.clone(), request: request.to_vec() }, true);
            let (token, slot) = sent.waiter.expect("waiter registered");
            let reply = sent.result.ok().and_then(|_| slot.wait(Duration::from_secs(10)));
            inner.waiters.abandon(token);
            if let Some(Reply::Donor(Some(donor))) = reply {
                log::info!("State transfer from {donor} requested");
                return Some(donor);
            }
            // Galera's wording: operators and the MTR suite know this line.
            log::warn!(
                "Member {} requested state transfer from '{donors}' but it is impossible to select State Transfer donor: Resource temporarily unavailable",
                self.me()
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// The server reports the end of a received state transfer.
    pub fn sst_received(&self, gtid: Gtid, rcode: i32) {
        let outcome = if rcode < 0 { Err(rcode) } else { Ok(gtid) };
        *self.inner.sst.lock() = Some(outcome);
        self.inner.sst_done.notify_all();
    }

    /// The server reports the end of a state transfer it sent.
    pub fn sst_sent(&self, gtid: Gtid, rcode: i32) {
        if rcode < 0 {
            log::error!("State transfer to joiner failed: {rcode}");
        } else {
            log::info!("State transfer sent at {gtid}");
        }
        self.inner.local.lock().state = LocalState::Joined;
        self.announce_synced();
    }

    fn donate(&self, ctx: usize, after: Seqno, request: &[u8], joiner: Uuid) -> Step {
        let inner = &self.inner;
        let _ = inner.apply.wait_left(after, None);
        // Back from a non-primary spell, the group may pick us before our
        // Synced announcement is ordered; the server then is not ready and
        // the SST script's backup is refused ("WSREP has not yet prepared
        // node for application use"). Everything up to `after` is applied
        // and we are in the primary component: we are synced.
        let resyncing = {
            let l = inner.local.lock();
            l.state == LocalState::Joined && l.desyncs == 0
        };
        if resyncing {
            self.set_synced();
        }
        inner.local.lock().state = LocalState::Donor;
        let state = Gtid { uuid: inner.local.lock().group_uuid, seqno: after };
        log::info!("Donating state {state} to {joiner}");
        if !inner.app.sst_donate(ctx, request, state, false) {
            log::error!("The server refused to donate to {joiner}");
            self.sst_sent(Gtid::UNDEFINED, -libc_einval());
        }
        Step::Next
    }

    fn become_synced(&self, after: Seqno) -> Step {
        let _ = self.inner.apply.wait_left(after, None);
        let state = {
            let l = self.inner.local.lock();
            if l.desyncs > 0 {
                return Step::Next; // still desynced by the operator
            }
            l.state
        };
        // A repeated announcement (see `announce_synced`) changes nothing.
        if state != LocalState::Synced {
            self.set_synced();
        }
        if let Some(group) = self.group() {
            if let Err(e) = group.promote(group.me()) {
                log::warn!("Promotion to voter failed: {e}");
            }
        }
        Step::Next
    }

    /// Tells the group we are synced, until it has heard it: the message is
    /// lost if the leader changes before ordering it (as happens right after
    /// a non-primary spell), and a member that stays "joined" is never
    /// ready for clients. Runs on its own thread (one at a time) until we are
    /// Synced, Donor or desynced again, out of the group, or closing.
    ///
    /// The primary view that asks for this can be applied a moment before
    /// the group channel reports us primary again; the thread then waits
    /// for that instead of giving up (a node stayed "joined" for good that way).
    pub(crate) fn announce_synced(&self) {
        {
            let mut l = self.inner.local.lock();
            if l.announcing_synced {
                return;
            }
            l.announcing_synced = true;
        }
        let synced = || Body::State(MemberState::Synced);
        if let Err(e) = self.resubmit_until("tandem-announce-synced", synced, Node::synced_announcement) {
            self.inner.local.lock().announcing_synced = false;
            log::warn!("Could not start the synced announcement thread: {e}");
        }
    }

    /// The announcer's next step. Ending it clears `announcing_synced` under
    /// the same lock, so a later `announce_synced` never finds the flag of a
    /// thread that has already decided to stop.
    fn synced_announcement(&self) -> Resubmit {
        let mut l = self.inner.local.lock();
        let done = matches!(l.state, LocalState::Synced | LocalState::Donor)
            || l.desyncs > 0
            || !l.in_group
            || self.inner.closing.load(Ordering::Acquire);
        if done {
            l.announcing_synced = false;
            return Resubmit::Done;
        }
        if l.primary { Resubmit::Send } else { Resubmit::Wait }
    }

    /// On a thread of its own, submits `body()` every `RESUBMIT_EVERY` while
    /// `next` says `Send`, until it says `Done`. For messages a leader change
    /// may lose and nobody waits for (`submit` gives no receipt).
    pub(crate) fn resubmit_until(
        &self,
        name: &'static str,
        body: fn() -> Body,
        next: impl Fn(&Node) -> Resubmit + Send + 'static,
    ) -> std::io::Result<()> {
        let node = self.clone();
        let live = LiveCount::enter(&self.inner.resubmitters_live);
        let thread = std::thread::Builder::new().name(name.into());
        let handle = thread.spawn(move || {
            let _live = live;
            let mut last_sent: Option<Instant> = None;
            loop {
                match next(&node) {
                    Resubmit::Done => return,
                    Resubmit::Wait => last_sent = None,
                    Resubmit::Send if last_sent.is_none_or(|t| t.elapsed() >= RESUBMIT_EVERY) => {
                        match node.submit(body()) {
                            Ok(()) => last_sent = Some(Instant::now()),
                            Err(e) => log::debug!("{name}: not accepted yet: {e}"),
                        }
                    }
                    Resubmit::Send => {}
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })?;
        let mut threads = self.inner.resubmitters.lock();
        threads.retain(|t| !t.is_finished());
        threads.push(handle);
        Ok(())
    }

    fn set_synced(&self) {
        let uuid = self.inner.local.lock().group_uuid;
        self.mark_running(uuid);
        self.inner.local.lock().state = LocalState::Synced;
        log::info!("Synced with group");
        self.inner.app.synced();
    }

    fn deliver_non_primary(&self, ctx: usize, after: Seqno) -> Step {
        let _ = self.inner.apply.wait_left(after, Some(Duration::from_secs(1)));
        let (group_uuid, me) = (self.inner.local.lock().group_uuid, self.me());
        let member = {
            let l = self.inner.local.lock();
            l.members.iter().find(|m| m.uuid == me).cloned()
        };
        let members = member.into_iter().collect::<Vec<_>>();
        let view = View {
            status: ViewStatus::NonPrimary,
            state_id: Gtid { uuid: group_uuid, seqno: -1 },
            view_no: -1,
            my_idx: View::index_of(&members, me),
            members,
        };
        log::info!("Lost the primary component: non-primary view");
        self.inner.app.view(ctx, &view);
        let mut l = self.inner.local.lock();
        l.state = LocalState::Initialized;
        l.resync_on_view = true;
        Step::Next
    }
}

/// One running thread in a shared count, for as long as this lives (also
/// when the thread could not be started and the closure is dropped unrun).
struct LiveCount(Arc<AtomicUsize>);

impl LiveCount {
    fn enter(count: &Arc<AtomicUsize>) -> LiveCount {
        count.fetch_add(1, Ordering::AcqRel);
        LiveCount(count.clone())
    }
}

impl Drop for LiveCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a resubmitting thread does next (see `Node::resubmit_until`).
pub(crate) enum Resubmit {
    Done,
    /// Not now (out of the primary component); send at once when it is time.
    Wait,
    Send,
}

/// Why a joiner stopped waiting for its state transfer.
enum StateTransferEnd {
    /// The provider is closing (disconnect or shutdown).
    Closing,
    /// The server reported a failed transfer.
    Failed,
}

fn libc_einval() -> i32 {
    22
}

