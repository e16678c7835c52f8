//! The server's own steps, as the appliers report them once done:
//! connected, donor found, state received, view delivered, synced,
//! donating, SST sent, desync and resync. Each moves the local state
//! (`wsrep_local_state`) and may have something to tell the group.

use super::{Command, LocalState, NodeCore};
use crate::admission::Plan;
use crate::group_state::{Sender, ViewChange};
use crate::message::{Body, MemberState};
use crate::types::Seqno;

impl NodeCore {
    /// The join task starts: the server is about to be connected with
    /// `view`, its current view from now on (a later non-primary view and
    /// the status variables are built from it).
    pub fn on_joining(&mut self, view: &ViewChange) {
        self.members = view.members.clone();
        self.checked();
    }

    /// The join task connected the server as `plan` says.
    pub fn on_connected(&mut self, plan: &Plan) {
        self.state = match plan {
            Plan::Found => LocalState::Synced,
            Plan::Resume { .. } => LocalState::Joined,
            Plan::Transfer => LocalState::Joining,
        };
        self.checked();
    }

    pub fn on_donor_found(&mut self) {
        self.state = LocalState::ReceivingState;
        self.checked();
    }

    /// The state transfer arrived; `synced_ordered` starts over.
    pub fn on_state_received(&mut self) -> Vec<Command> {
        self.state = LocalState::Joined;
        self.synced_ordered = false;
        self.with_announcements(vec![])
    }

    pub fn on_view_delivered(&mut self, vc: &ViewChange) -> Vec<Command> {
        self.members = vc.members.clone();
        if std::mem::take(&mut self.resync_on_view) {
            // An operator's desync outlives the non-primary spell.
            self.state = if self.desyncs > 0 { LocalState::Donor } else { LocalState::Joined };
            self.synced_ordered = false;
        }
        self.with_announcements(vec![])
    }

    pub fn on_non_primary_delivered(&mut self) {
        self.state = LocalState::Initialized;
        self.resync_on_view = true;
        self.checked();
    }

    /// Everything up to our synced announcement is applied. True when the
    /// server must now be told it is synced.
    pub fn on_synced_reached(&mut self) -> bool {
        // Applied up to our synced announcement: past any IST's end.
        self.ist_applied_to(Seqno::MAX);
        let now_synced = self.desyncs == 0 && self.state != LocalState::Synced;
        if now_synced {
            self.state = LocalState::Synced;
        }
        self.checked();
        now_synced
    }

    /// This node was picked as donor of `joiner`. True when it must first
    /// tell the server it is synced: it was resyncing after a non-primary
    /// spell and the group picked it before its announcement was ordered;
    /// everything up to the request is applied and it is primary, so it is
    /// synced.
    pub fn on_donating(&mut self, joiner: Sender) -> bool {
        let resyncing = self.state == LocalState::Joined && self.desyncs == 0;
        self.state = LocalState::Donor;
        self.donating_to = Some(joiner);
        self.checked();
        resyncing
    }

    /// The server's SST script ended: `rcode` < 0 is its failure, which the
    /// joiner must hear of (it would wait for the state until its own
    /// script gave up).
    pub fn on_sst_sent(&mut self, rcode: i32) -> Vec<Command> {
        self.state = LocalState::Joined;
        self.synced_ordered = false;
        let mut out = vec![];
        if let (Some(joiner), true) = (self.donating_to.take(), rcode < 0) {
            out.push(Command::Submit(Body::TransferFailed {
                joiner: joiner.uuid,
                incarnation: joiner.incarnation,
                code: rcode,
            }));
        }
        self.with_announcements(out)
    }

    /// `wsrep_desync=ON`; the first one tells the group.
    pub fn desync(&mut self) -> Vec<Command> {
        self.desyncs += 1;
        let mut out = vec![];
        if self.desyncs == 1 {
            self.state = LocalState::Donor;
            out.push(Command::Submit(Body::State(MemberState::Donor)));
        }
        self.checked_into(&mut out);
        out
    }

    pub fn resync(&mut self) -> Vec<Command> {
        self.desyncs = self.desyncs.saturating_sub(1);
        if self.desyncs > 0 {
            let mut out = vec![];
            self.checked_into(&mut out);
            return out;
        }
        // Not connected: nothing to catch up with.
        let connected = self.is_primary() && self.live;
        self.state = if connected { LocalState::Joined } else { LocalState::Synced };
        self.synced_ordered = false;
        self.with_announcements(vec![])
    }

    /// The final view was delivered: this connection is over.
    pub fn on_final(&mut self) {
        self.ended_in_step = matches!(self.state, LocalState::Joined | LocalState::Synced | LocalState::Donor);
        self.state = LocalState::Initialized;
        self.checked();
    }

    /// The connection that ended had the server in step with the group,
    /// of history `group_uuid`: a new connection in this process starts
    /// from what the server committed then, not from its start position.
    pub fn ended_in_step(&self) -> bool {
        self.ended_in_step && !self.footing.group_uuid.is_nil()
    }

    /// This node's state in the words of Galera's own state machine (its
    /// "Shifting A -> B (TO: n)" lines, which operators' scripts and
    /// MariaDB's tests look for): CLOSED, OPEN (connected, not in a primary
    /// component), PRIMARY (in one, not yet in step), JOINER (waiting for a
    /// state transfer), JOINED (in step, catching up), SYNCED and
    /// DONOR/DESYNCED.
    pub fn galera_state(&self) -> &'static str {
        match self.state {
            LocalState::Initialized if self.closing => "CLOSED",
            LocalState::Initialized if self.is_primary() => "PRIMARY",
            LocalState::Initialized => "OPEN",
            LocalState::Joining | LocalState::ReceivingState => "JOINER",
            LocalState::Joined => "JOINED",
            LocalState::Synced => "SYNCED",
            LocalState::Donor => "DONOR/DESYNCED",
        }
    }

    /// Whether this node may order write-sets of its own: in the primary
    /// component and in step with it (JOINED or later), as Galera refuses
    /// them before its JOINED state. Earlier, one ordered just after the
    /// node's own position would commit through the client's path, ahead of
    /// the join task that brings the server in step and of the history
    /// (IST) held for it, and the join would then start the monitors below
    /// what the server had committed.
    pub fn takes_local_write_sets(&self) -> bool {
        self.is_primary() && matches!(self.state, LocalState::Joined | LocalState::Synced | LocalState::Donor)
    }

    /// Logs a change of `galera_state` as Galera does, beside our own lines;
    /// "TO" is the last seqno this node has seen ordered.
    pub(super) fn log_state_shift(&mut self) {
        let now = self.galera_state();
        if now != self.logged_galera_state {
            log::info!("Shifting {} -> {now} (TO: {})", self.logged_galera_state, self.last_ordered.max(0));
            self.logged_galera_state = now;
        }
    }

    /// `out`, then what a step that may have moved this node's state has
    /// to tell the group; the invariants are checked after it.
    fn with_announcements(&mut self, mut out: Vec<Command>) -> Vec<Command> {
        self.announcements(&mut out);
        self.checked_into(&mut out);
        out
    }
}
