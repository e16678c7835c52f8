//! The node as a pure state machine: ordered outcomes, connectivity, timer
//! ticks and the results of server steps go in; commands come out. No
//! threads, locks, clocks or I/O: the shell (`node.rs`, `applier.rs`) runs
//! the commands, and the simulation drives this directly.
//!
//! ```text
//!   GroupState outcome ─► on_ordered ─┐
//!   primary / cut off  ─► on_connectivity ├─► [Command] ─► shell: submit, wake a
//!   every 100 ms       ─► on_tick ─────┤                    waiter, queue applier
//!   server step done   ─► on_*  ───────┘                    work, release the log
//! ```
//!
//! A process goes through: replaying the history it can see (its own log
//! from a checkpoint, then the group's) → admitted (the server is connected
//! and in step: resumed at its own position, founded, or given a state
//! transfer) → live (the group ordered the view that admits this
//! incarnation) → synced. Admission and liveness are separate because a
//! restarted node resumes at its own position, from its own log, before it
//! has heard from the group.

use crate::admission::{plan_at_view, view_at, Admission, Footing, Plan};
use crate::certification::Verdict;
use crate::group_state::{GroupState, Outcome, Sender, ViewChange};
use crate::message::{Body, MemberState};
use crate::queue::Task;
use crate::retention::{Retention, SETTLE_MS};
use crate::types::{Gtid, Seqno, Uuid};
use crate::view::ViewMember;
use crate::voting::{Code, MyVotes};
use crate::waiter::Reply;
use crate::writeset::WriteSet;

mod invariants;
mod ist;
mod server_steps;
mod transfers;
mod votes;

/// Every this many seqnos each live member reports its safe seqno.
pub const PROGRESS_INTERVAL: Seqno = 1024;

/// And at least this often while its committed seqno moves.
pub const PROGRESS_EVERY_MS: u64 = 1_000;

/// A message a leader change may lose is submitted again this often until
/// its effect is seen.
pub const RESUBMIT_EVERY_MS: u64 = 2_000;

/// Write-sets a restarted node may hold for its own data before it has
/// heard from the group; past this it starts applying them without waiting.
pub const ADMIT_BUDGET_BYTES: usize = 64 << 20;

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

/// What the shell must do.
#[derive(Debug, PartialEq)]
pub enum Command {
    /// Hand a message to the group; nobody waits for it.
    Submit(Body),
    /// An ordered write-set. `waiter`: the token of the local client that
    /// sent it, if this process did; if no waiter takes it and `apply`, it
    /// goes to the appliers. `origin`: the sending process's node id
    /// ([`crate::view::node_id`]), the source the server is told.
    WriteSet { waiter: Option<u64>, seqno: Seqno, verdict: Verdict, ws: WriteSet, origin: Uuid, apply: bool },
    /// Wake the local waiter of `token`.
    Reply { token: u64, reply: Reply },
    /// Append to the applier queue.
    Queue(Task),
    /// The server is to be brought in step first: this runs before anything
    /// queued, and holds the queue until it is done.
    Admit(Admission),
    /// Wake every local waiter: they re-check connectivity and closing.
    WakeWaiters,
    /// Report our safe seqno to the group (certification index purge).
    ReportProgress,
    /// The log may forget history up to this seqno (see `retention`).
    ReleaseLog(Seqno),
    /// A member catches up by IST; `committed` is its latest report. The
    /// shell logs it on the member that serves the log (the group leader).
    IstProgress { member: String, committed: Seqno, first: Seqno, last: Seqno },
    /// This process cannot go on: its server was connected on a history the
    /// group no longer has for it. Restarting fixes it (state transfer).
    RestartRequired(String),
    /// The group's ballots changed: wake the threads waiting on a vote.
    VotesChanged,
    /// This node's outcome on `seqno` differs from the group's decision: it
    /// leaves the cluster, and its data must be replaced before it returns.
    Inconsistent { seqno: Seqno, mine: Code, winner: Code },
    /// The donor of this joiner's state transfer says it failed: the
    /// server's wait for the state ends with `code`.
    TransferFailed { donor: Uuid, code: i32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// Never primary since the group channel started.
    Never,
    Primary,
    /// Cut off since this tick time.
    Cut {
        since_ms: u64,
    },
}

/// A message repeated until its effect is seen: when it was last sent.
#[derive(Clone, Copy, Debug, Default)]
struct Resend {
    last_ms: Option<u64>,
}

impl Resend {
    /// Whether to send now; `wanted` false forgets the schedule, so that the
    /// next time it is wanted it goes out at once.
    fn due(&mut self, wanted: bool, now_ms: u64) -> bool {
        if !wanted {
            self.last_ms = None;
            return false;
        }
        if self.last_ms.is_some_and(|t| now_ms < t + RESUBMIT_EVERY_MS) {
            return false;
        }
        self.last_ms = Some(now_ms);
        true
    }
}

#[derive(Debug)]
pub struct NodeCore {
    me: Uuid,
    incarnation: u32,
    /// `wsrep_sst_donor`.
    donors: String,
    footing: Footing,
    state: LocalState,
    /// Last seqno handed out by the group, as far as this process has seen.
    last_ordered: Seqno,
    link: Link,
    admission: Option<Admission>,
    /// A donor's live process answered this process's IST handshake probe.
    donor_ready: bool,
    /// The group ordered the view that admits this incarnation.
    live: bool,
    /// Members of the last view delivered to the server.
    members: Vec<ViewMember>,
    /// Members of the latest ordered view (a joiner watches its donor here).
    view_members: Vec<(Uuid, u32)>,
    /// The members still in touch when the group last said this node is
    /// cut off: a non-primary view lists them.
    reachable: Vec<ViewMember>,
    /// The latest ordered view that includes this node (the configuration a
    /// resumed server is connected with).
    view_with_me: Option<ViewChange>,
    /// This node's incarnation as the group's replicated state knows it.
    group_incarnation: Option<u32>,
    /// The seqno of the view that removed this live process, and when (tick
    /// time), until a view takes it back. Kept apart from `link`: the group
    /// may report this member primary again (it reached the leader) before
    /// the removal, ordered earlier, is delivered, and it reports nothing
    /// more once the member is taken back.
    removed_at: Option<(Seqno, u64)>,
    views_ordered: u64,
    desyncs: u32,
    /// The next primary view must be followed by a synced announcement.
    resync_on_view: bool,
    /// Our synced announcement came back ordered; no need to repeat it.
    synced_ordered: bool,
    /// The joiner process this node is donating to, until the server's
    /// script ends.
    donating_to: Option<Sender>,
    /// After a non-primary spell: views ordered before it (a fresh view is
    /// requested until one more has been ordered).
    bump_after: Option<u64>,
    rejoin: Resend,
    announce: Resend,
    bump: Resend,
    retention: Retention,
    /// Bytes of write-sets held for the server before it is admitted.
    held_bytes: usize,
    /// Past this many held bytes the server is admitted without waiting to
    /// hear from the group (`ADMIT_BUDGET_BYTES`; smaller in tests).
    admit_budget_bytes: usize,
    /// When this node last reported its progress by the clock, and how far
    /// it had committed.
    progress_reported: (u64, Seqno),
    /// Consistency voting, this node's side (`voting.rs`).
    votes: MyVotes,
    /// Whether this process votes at all (an arbitrator holds no data).
    votes_enabled: bool,
    closing: bool,
    now_ms: u64,
    /// What may only move one way, as of the last invariant check.
    marks: invariants::Marks,
    /// A broken invariant panics (debug builds: tests and the simulations
    /// stop on the input that broke it) rather than asking for a restart
    /// (release builds).
    panic_on_broken: bool,
    /// A broken invariant not yet reported in a command.
    unreported: Option<String>,
    /// A broken invariant was logged (only the first is).
    reported_broken: bool,
    /// The state last logged in Galera's words (`server_steps.rs`).
    logged_galera_state: &'static str,
    ist: ist::IstTrack,
    /// The connection ended with the server in step with the group
    /// (JOINED or later): its data is where the monitors stopped.
    ended_in_step: bool,
}

impl NodeCore {
    /// `votes`: whether this process takes part in consistency voting (an
    /// arbitrator holds no data, so it does not).
    pub fn new(me: Uuid, incarnation: u32, start: Gtid, donors: String, votes: bool) -> NodeCore {
        NodeCore {
            me,
            incarnation,
            donors,
            footing: Footing { start, group_uuid: start.uuid, replay_from: Seqno::MAX },
            state: LocalState::Initialized,
            last_ordered: start.seqno,
            link: Link::Never,
            admission: None,
            donor_ready: false,
            live: false,
            members: vec![],
            view_members: vec![],
            reachable: vec![],
            view_with_me: None,
            group_incarnation: None,
            removed_at: None,
            views_ordered: 0,
            desyncs: 0,
            resync_on_view: false,
            synced_ordered: false,
            donating_to: None,
            bump_after: None,
            rejoin: Resend::default(),
            announce: Resend::default(),
            bump: Resend::default(),
            retention: Retention::new(SETTLE_MS),
            held_bytes: 0,
            admit_budget_bytes: ADMIT_BUDGET_BYTES,
            progress_reported: (0, Seqno::MIN),
            votes: MyVotes::default(),
            votes_enabled: votes,
            closing: false,
            now_ms: 0,
            marks: invariants::Marks::default(),
            panic_on_broken: cfg!(debug_assertions),
            unreported: None,
            reported_broken: false,
            logged_galera_state: "CLOSED",
            ist: ist::IstTrack::default(),
            ended_in_step: false,
        }
    }

    // ---- queries -----------------------------------------------------------

    pub fn group_uuid(&self) -> Uuid {
        self.footing.group_uuid
    }

    pub fn start(&self) -> Gtid {
        self.footing.start
    }

    /// In the primary component: connected to it, and a member of its view.
    pub fn is_primary(&self) -> bool {
        self.link == Link::Primary && self.removed_at.is_none()
    }

    /// Since when (tick time) this node has been out of the primary
    /// component, cut off or removed, if it is.
    pub fn cut_since_ms(&self) -> Option<u64> {
        let removed = self.removed_at.map(|(_, since_ms)| since_ms);
        let cut = match self.link {
            Link::Cut { since_ms } => Some(since_ms),
            _ => None,
        };
        [cut, removed].into_iter().flatten().min()
    }

    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Whether this node still has to tell the group it is synced (its
    /// announcement is sent, and repeated, while it is primary).
    pub fn awaits_synced(&self) -> bool {
        self.live && self.state == LocalState::Joined && self.desyncs == 0 && !self.synced_ordered
    }

    pub fn admission(&self) -> Option<&Admission> {
        self.admission.as_ref()
    }

    pub fn freeze_purge_at(&mut self, seqno: Seqno) {
        self.retention.freeze(seqno);
        self.checked();
    }

    pub fn frozen_at(&self) -> Option<Seqno> {
        self.retention.frozen_at()
    }

    /// `wsrep_sst_donor`, as this process was started with.
    pub fn donors(&self) -> &str {
        &self.donors
    }

    /// `wsrep_local_state`.
    pub fn state(&self) -> LocalState {
        self.state
    }

    /// Last seqno handed out by the group, as far as this process has seen.
    pub fn last_ordered(&self) -> Seqno {
        self.last_ordered
    }

    /// Members of the last view delivered to the server.
    pub fn members(&self) -> &[ViewMember] {
        &self.members
    }

    /// Whether the latest ordered view has `member` as this process
    /// (incarnation) of it.
    pub fn in_view(&self, member: (Uuid, u32)) -> bool {
        self.view_members.contains(&member)
    }

    /// The members still in touch when the group last said this node is
    /// cut off.
    pub fn reachable(&self) -> &[ViewMember] {
        &self.reachable
    }

    /// How many `wsrep_desync=ON` (and desyncs of the server's own, such as
    /// a backup's) are in effect.
    pub fn desyncs(&self) -> u32 {
        self.desyncs
    }

    fn is_mine(&self, from: Sender) -> bool {
        from.uuid == self.me && from.incarnation == self.incarnation
    }

    /// Whether the server needs this seqno from the ordered stream.
    fn wants(&self, seqno: Seqno) -> bool {
        match self.admission.as_ref().map(|a| &a.plan) {
            Some(Plan::Resume { position }) => seqno > *position,
            Some(_) => true,
            None => self.footing.resumable() && seqno > self.footing.start.seqno,
        }
    }

    // ---- inputs ------------------------------------------------------------

    /// The replicated state was replaced by a snapshot or a checkpoint:
    /// ordered history before it cannot be replayed by this process.
    pub fn on_restored(&mut self, state: &GroupState) -> Vec<Command> {
        let mut out = self.restored(state);
        self.checked_restored(state, &mut out);
        out
    }

    fn restored(&mut self, state: &GroupState) -> Vec<Command> {
        let mut out = vec![];
        self.footing.replay_from = state.seqno + 1;
        self.observe(state);
        let resuming = self.admission.as_ref().is_some_and(|a| matches!(a.plan, Plan::Resume { .. }));
        if self.live || (resuming && !self.footing.resumable()) {
            // The ordered events between what we had and the snapshot are
            // gone for us: the local data can no longer be brought in step.
            out.push(Command::RestartRequired(format!(
                "this node received the group's state at seqno {} instead of the history it was \
                 catching up on (from seqno {})",
                state.seqno,
                self.last_applied_hint()
            )));
            return out;
        }
        if !self.footing.resumable() {
            self.held_bytes = 0;
        }
        // A snapshot taken after this incarnation was admitted carries the
        // view that admits it; no membership event will follow.
        if state.member(self.me).is_some_and(|m| m.incarnation == self.incarnation) {
            self.on_view(state.current_view(), state, &mut out);
        }
        self.try_admit(&mut out);
        self.announcements(&mut out);
        out
    }

    fn last_applied_hint(&self) -> Seqno {
        match self.admission.as_ref().map(|a| &a.plan) {
            Some(Plan::Resume { position }) => *position,
            _ => self.footing.start.seqno,
        }
    }

    pub fn on_ordered(&mut self, outcome: Outcome, state: &GroupState) -> Vec<Command> {
        let outcome_seqno = outcome.seqno();
        let mut out = self.ordered(outcome, state);
        self.checked_ordered(outcome_seqno, state, &mut out);
        out
    }

    fn ordered(&mut self, outcome: Outcome, state: &GroupState) -> Vec<Command> {
        let mut out = vec![];
        let from_start = self.footing.replay_from == Seqno::MAX;
        if from_start {
            // Replayed from the very start of the history.
            self.footing.replay_from = state.first_seqno + 1;
        }
        self.observe(state);
        if from_start {
            self.skip_inherited_changes(state);
        }
        match outcome {
            Outcome::Nothing => {}
            Outcome::WriteSet { from, token, seqno, verdict, ws } => {
                self.on_write_set(from, token, seqno, verdict, ws, &mut out)
            }
            Outcome::View(vc) => self.on_view(vc, state, &mut out),
            Outcome::Causal { from, token, seqno } => {
                if self.is_mine(from) {
                    out.push(Command::Reply { token, reply: Reply::Causal(seqno) });
                }
            }
            Outcome::StateRequest { from, token, donor, request, seqno, bypass } => {
                let r = transfers::Request { from, token, donor, request, seqno, bypass };
                self.on_state_request(r, state, &mut out);
            }
            Outcome::DonorReady { joiner } => self.on_donor_ready(joiner),
            Outcome::MemberState { from, state: MemberState::Synced, seqno } if self.is_mine(from) && self.live => {
                self.synced_ordered = true;
                out.push(Command::Queue(Task::Synced { after: seqno }));
            }
            Outcome::MemberState { .. } => {}
            // The shell's flow-control gate follows the ordered paused set.
            Outcome::FlowControl { .. } => {}
            // Only the process that asked: a joiner restarted since then
            // has asked again, maybe of the same donor. Admitted or not
            // yet: a node resuming runs its IST handshake before the group
            // has ordered the view that admits it.
            Outcome::TransferFailed { donor, joiner, code } => {
                if self.is_mine(joiner) {
                    out.push(Command::TransferFailed { donor, code });
                }
            }
            Outcome::Progress { member, committed } => {
                if let Some(m) = state.member(member) {
                    if let Some((first, last)) = m.ist {
                        out.push(Command::IstProgress { member: m.name.clone(), committed, first, last });
                    }
                }
            }
        }
        self.try_admit(&mut out);
        self.announcements(&mut out);
        out
    }

    /// What every ordered event tells us, whatever it is.
    fn observe(&mut self, state: &GroupState) {
        self.last_ordered = state.seqno;
        if !state.group_uuid.is_nil() {
            self.footing.group_uuid = state.group_uuid;
        }
        self.group_incarnation = state.member(self.me).map(|m| m.incarnation);
        if state.member(self.me).is_some() && !state.members.is_empty() {
            self.view_with_me = Some(state.current_view());
        }
    }

    fn on_write_set(
        &mut self,
        from: Sender,
        token: u64,
        seqno: Seqno,
        verdict: Verdict,
        ws: WriteSet,
        out: &mut Vec<Command>,
    ) {
        let apply = self.wants(seqno);
        if self.live && seqno % PROGRESS_INTERVAL == 0 {
            out.push(Command::ReportProgress);
        }
        if apply && self.admission.is_none() {
            self.held_bytes += ws.data.len();
        }
        let waiter = self.is_mine(from).then_some(token);
        let origin = crate::view::node_id(from.uuid, from.incarnation);
        out.push(Command::WriteSet { waiter, seqno, verdict, ws, origin, apply });
    }

    fn on_view(&mut self, vc: ViewChange, state: &GroupState, out: &mut Vec<Command>) {
        self.views_ordered += 1;
        self.view_members = vc.members.iter().map(|m| (m.uuid, m.incarnation)).collect();
        let included = vc.members.iter().any(|m| m.uuid == self.me);
        if included && !self.live && self.group_incarnation == Some(self.incarnation) {
            self.live = true;
            let seqno = vc.state_id.seqno;
            self.admit_at_view(vc, state, out);
            self.ist_ends_before(seqno);
        } else if self.live && included {
            if let Some((removal, _)) = self.removed_at.take() {
                let last = vc.state_id.seqno - 1;
                log::info!(
                    "Taken back into the primary component: Receiving IST of seqnos {}-{last} ({} events) ordered \
                     while this node was out",
                    removal + 1,
                    last - removal
                );
            }
            out.push(Command::Queue(Task::View(vc)));
        } else if self.live && !included {
            if self.closing {
                // Our own graceful leave: nothing for the server, but its
                // seqno must pass the monitors, or the drain before the final
                // view waits for it in vain.
                out.push(Command::Queue(Task::Pass { seqno: vc.state_id.seqno }));
                return;
            }
            // The group layer asks to take it back once it reaches the
            // group again (`rejoin_watch`); what it misses comes as IST.
            log::info!("This node was removed from the primary component; it rejoins when it reaches the group again");
            // The group forgot this node's desync with it: it comes back as
            // a joiner, through IST, and is synced after (Galera clears the
            // desync count on a state transfer in the same way).
            self.desyncs = 0;
            self.removed_at = Some((vc.state_id.seqno, self.now_ms));
            out.push(Command::Queue(Task::NonPrimary {
                after: vc.state_id.seqno - 1,
                removal: Some(vc.state_id.seqno),
            }));
        } else if self.wants(vc.state_id.seqno) {
            // History this node was away for: part of its IST.
            out.push(Command::Queue(Task::View(vc)));
        }
    }

    /// The view that admits this incarnation has been ordered.
    fn admit_at_view(&mut self, vc: ViewChange, state: &GroupState, out: &mut Vec<Command>) {
        if self.admission.is_some() {
            out.push(Command::Queue(Task::View(vc)));
            return;
        }
        let founder = vc.members.len() == 1 && vc.state_id.seqno == state.first_seqno + 1;
        match plan_at_view(&self.footing, vc.state_id.seqno, founder) {
            Err(why) => out.push(Command::RestartRequired(why)),
            Ok(Plan::Resume { position }) => {
                let view = view_at(&vc, position);
                self.admit(Admission { plan: Plan::Resume { position }, view }, out);
                out.push(Command::Queue(Task::View(vc)));
            }
            Ok(plan) => {
                self.log_transfer_reason(&plan);
                self.admit(Admission { plan, view: vc }, out);
            }
        }
    }

    /// Local data behind a history founded on Galera's data by Galera's
    /// configuration changes only counts as being at the history's start.
    fn skip_inherited_changes(&mut self, state: &GroupState) {
        if let Some(was) = self.footing.skip_inherited_changes(state.first_seqno, state.inherited_last_write) {
            log::info!(
                "Local seqno {was}: seqnos {}-{} before this group's history were Galera's configuration \
                 changes (no data), as its cache showed on the founder; continuing from seqno {} without \
                 a state transfer",
                was + 1,
                state.first_seqno,
                state.first_seqno
            );
        }
    }

    fn log_transfer_reason(&self, plan: &Plan) {
        let start = self.footing.start;
        if *plan != Plan::Transfer || start.seqno < 0 {
            return;
        }
        if start.uuid != self.footing.group_uuid {
            log::info!(
                "Local state {start} belongs to another history than the group's ({}): full state transfer (SST)",
                self.footing.group_uuid
            );
        } else {
            log::warn!(
                "IST is not possible: local seqno {} is older than the history the group still holds \
                 (from seqno {}); falling back to a full state transfer (SST)",
                start.seqno,
                self.footing.replay_from
            );
        }
    }

    /// A resumable node is connected as soon as its replay has reached its
    /// own data and it has heard from the group (or holds too much to wait).
    fn try_admit(&mut self, out: &mut Vec<Command>) {
        if self.admission.is_some() || self.closing || !self.footing.resumable() {
            return;
        }
        let position = self.footing.start.seqno;
        if self.last_ordered < position {
            return; // the replay has not reached the local data yet
        }
        let Some(view) = self.view_with_me.clone() else { return };
        let ready = self.link == Link::Primary || self.held_bytes > self.admit_budget_bytes;
        if !ready {
            return;
        }
        let view = self.as_this_process(view);
        self.admit(Admission { plan: Plan::Resume { position }, view: view_at(&view, position) }, out);
    }

    /// `view` with this node shown as this process. A node resuming is
    /// connected before the group has ordered the view that admits its new
    /// incarnation, with the last view it was in, which names its previous
    /// process; the server takes its own id from the view it is connected
    /// with (`view::node_id`), and would not find itself in the group's
    /// views after (wsrep_auto_increment_control then stopped following
    /// them: MTR galera_pc_ignore_sb).
    fn as_this_process(&self, mut view: ViewChange) -> ViewChange {
        for m in view.members.iter_mut().filter(|m| m.uuid == self.me) {
            m.incarnation = self.incarnation;
        }
        view
    }

    fn admit(&mut self, admission: Admission, out: &mut Vec<Command>) {
        match admission.plan {
            Plan::Resume { position } => {
                log::info!("Resuming at local seqno {position}: replaying what follows from the ordered history (IST)")
            }
            Plan::Found => log::info!("Founding the group's history at seqno {}", admission.view.state_id.seqno),
            Plan::Transfer => {}
        }
        self.held_bytes = 0;
        self.admission = Some(admission.clone());
        out.push(Command::Admit(admission));
    }

    /// The group says whether this node is in the primary component;
    /// `reachable`: the members still in touch when it is not.
    pub fn on_connectivity(&mut self, primary: bool, reachable: Vec<ViewMember>, now_ms: u64) -> Vec<Command> {
        self.now_ms = self.now_ms.max(now_ms);
        self.reachable = reachable;
        let mut out = vec![];
        if primary {
            let was_cut = matches!(self.link, Link::Cut { .. }) && self.live;
            self.link = Link::Primary;
            if was_cut {
                log::info!("Back in the primary component");
                self.bump_after = Some(self.views_ordered);
            }
        } else {
            if self.link == Link::Primary {
                self.link = Link::Cut { since_ms: now_ms };
                // A removed member's server was told already.
                if self.live && self.removed_at.is_none() {
                    out.push(Command::Queue(Task::NonPrimary { after: self.last_ordered, removal: None }));
                }
            }
            out.push(Command::WakeWaiters);
        }
        self.try_admit(&mut out);
        self.announcements(&mut out);
        self.checked_into(&mut out);
        out
    }

    /// Every 100 ms; `committed` is the server's last committed seqno.
    pub fn on_tick(&mut self, now_ms: u64, committed: Seqno) -> Vec<Command> {
        self.now_ms = self.now_ms.max(now_ms);
        let mut out = vec![];
        if self.admission.is_some() {
            if let Some(point) = self.retention.tick(now_ms, committed) {
                out.push(Command::ReleaseLog(point));
            }
        }
        self.report_progress(now_ms, committed, &mut out);
        self.ist_applied_to(committed);
        self.announcements(&mut out);
        if self.votes.active() {
            self.vote_step(committed, &mut out);
        }
        self.checked_into(&mut out);
        out
    }

    /// Tells the group how far this node has committed, once a second while
    /// that moves (on top of the report every `PROGRESS_INTERVAL` seqnos).
    /// The group purges its certification index below the lowest member's
    /// report: without this, the keys of the last write-sets before a quiet
    /// spell stayed indexed, in every checkpoint, and in the snapshot a
    /// joiner is sent (241 MB after a 2 GB bulk load of 1,800 write-sets).
    /// A node catching up by IST also shows the member serving it how far
    /// it got.
    fn report_progress(&mut self, now_ms: u64, committed: Seqno, out: &mut Vec<Command>) {
        let (at, reported) = self.progress_reported;
        let connected = self.live && self.is_primary() && !self.closing;
        if connected && committed > reported && now_ms >= at + PROGRESS_EVERY_MS {
            self.progress_reported = (now_ms, committed);
            out.push(Command::ReportProgress);
        }
    }

    /// The group refused a submission (not primary yet): the announcements
    /// are due again at once, so the next tick repeats them.
    pub fn on_submit_refused(&mut self) {
        for resend in [&mut self.rejoin, &mut self.announce, &mut self.bump] {
            resend.last_ms = None;
        }
        self.checked();
    }

    /// The messages repeated until the group has seen them: the rejoin of a
    /// restarted incarnation, our synced state, a fresh view after a cut.
    fn announcements(&mut self, out: &mut Vec<Command>) {
        let primary = self.is_primary() && !self.closing;
        let now = self.now_ms;
        let rejoin = primary && !self.live && self.group_incarnation.is_some_and(|i| i < self.incarnation);
        if self.rejoin.due(rejoin, now) {
            out.push(Command::Submit(Body::Rejoin { position: self.footing.start.seqno }));
        }
        let synced =
            primary && self.live && self.state == LocalState::Joined && self.desyncs == 0 && !self.synced_ordered;
        if self.announce.due(synced, now) {
            out.push(Command::Submit(Body::State(MemberState::Synced)));
        }
        if self.bump_after.is_some_and(|before| self.views_ordered > before) || !primary {
            self.bump_after = None;
        }
        if self.bump.due(self.bump_after.is_some(), now) {
            out.push(Command::Submit(Body::ViewBump));
        }
    }

    pub fn close(&mut self) {
        self.closing = true;
        self.checked();
    }
}

#[cfg(test)]
#[path = "core_tests/mod.rs"]
mod tests;
