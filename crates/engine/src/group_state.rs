//! The replicated state: what every member derives, identically, from the
//! total order. Seqnos, views, member states, donor choice and certification
//! are all decided here and nowhere else, so they cannot diverge.
//!
//! This module knows nothing about the local node: it turns each ordered event
//! into an [`Outcome`], and the node decides what the outcome means for it.

use serde::{Deserialize, Serialize};
use tandem_group_api::{MemberId, MemberInfo, Membership, Ordered};

use crate::certification::{Certifier, LockSession, Verdict};
use crate::message::{Body, Envelope, JoinInfo, MemberState};
use crate::types::{Gtid, Seqno, Uuid};
use crate::view::ViewMember;
use crate::voting::{Ballots, Cast, Code, Decision, Voter, SUCCESS};
use crate::writeset::WriteSet;

/// How often (in seqnos) the certification index is purged; it is also
/// purged at every progress report, which is what empties it in a quiet
/// spell.
const PURGE_INTERVAL: Seqno = 256;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub id: MemberId,
    pub uuid: Uuid,
    pub name: String,
    pub incoming: String,
    pub state: MemberState,
    /// Every write-set this member sends from now on has seen at least this.
    pub committed: Seqno,
    /// The member's process incarnation as the group knows it. Messages of
    /// an older incarnation (in flight when that process died) change no
    /// state: only their write-sets still count, they were ordered.
    pub incarnation: u32,
    /// Seqnos this member catches up on by IST, first..=last (accounting
    /// and progress logs only), until it is synced.
    pub ist: Option<(Seqno, Seqno)>,
}

#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct GroupState {
    /// The history this group continues (`wsrep_cluster_state_uuid`).
    pub group_uuid: Uuid,
    /// Last seqno handed out.
    pub seqno: Seqno,
    /// Primary view counter.
    pub view_no: i64,
    /// Members of the current primary view, sorted by uuid.
    pub members: Vec<Member>,
    /// The seqno this history started from (its first view is one above).
    pub first_seqno: Seqno,
    pub cert: Certifier,
    /// Members whose flow-control pause is in effect, sorted: replication is
    /// paused on every node while this is not empty. Encoded after the rest
    /// (see `encode`), so snapshots of builds without it still decode.
    #[serde(skip)]
    pub paused_by: Vec<Uuid>,
    /// Members that are arbitrators (`tandem arbitrator`): they vote and
    /// keep the log, but hold no database, so they are never donors.
    /// Encoded after the paused set, for the same reason.
    #[serde(skip)]
    pub arbitrators: Vec<Uuid>,
    /// Consistency votes (`voting.rs`). Encoded after the arbitrators.
    #[serde(skip)]
    pub ballots: Ballots,
    /// A history founded on Galera's data: the last seqno up to
    /// `first_seqno` that may have carried data; the seqnos above it were
    /// Galera's configuration changes (`inherited.rs`). Encoded last.
    #[serde(skip)]
    pub inherited_last_write: Option<Seqno>,
    /// Each member's site (`gmcast.segment`) where it is not 0, sorted:
    /// donors are chosen in the joiner's site first. Encoded after the
    /// inherited history.
    #[serde(skip)]
    pub segments: Vec<(Uuid, u8)>,
}

/// A primary configuration change, as ordered.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewChange {
    pub state_id: Gtid,
    pub view_no: i64,
    pub members: Vec<ViewMember>,
}

/// Who sent a message: the node and its process incarnation, so that a
/// node recognises its own messages only when this process sent them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sender {
    pub uuid: Uuid,
    pub incarnation: u32,
}

#[derive(Debug, PartialEq)]
pub enum Outcome {
    WriteSet {
        from: Sender,
        token: u64,
        seqno: Seqno,
        verdict: Verdict,
        ws: WriteSet,
    },
    View(ViewChange),
    Causal {
        from: Sender,
        token: u64,
        seqno: Seqno,
    },
    StateRequest {
        from: Sender,
        token: u64,
        donor: Option<Uuid>,
        request: Vec<u8>,
        seqno: Seqno,
        /// An IST's handshake: the joiner's position, which the donor's
        /// script is run in bypass mode with.
        bypass: Option<Seqno>,
    },
    MemberState {
        from: Sender,
        state: MemberState,
        seqno: Seqno,
    },
    /// A member reported how far it has committed.
    Progress {
        member: Uuid,
        committed: Seqno,
    },
    /// A member paused replication (flow control) or lifted its pause.
    FlowControl {
        from: Sender,
        pause: bool,
    },
    /// A donor's live process answers `joiner`'s IST handshake probe.
    DonorReady {
        joiner: Sender,
    },
    /// A donor could not send `joiner` its state transfer.
    TransferFailed {
        donor: Uuid,
        joiner: Sender,
        code: i32,
    },
    /// Nothing for anyone to do (unreadable or stale messages, ...).
    Nothing,
}

impl GroupState {
    pub fn position(&self) -> Gtid {
        Gtid { uuid: self.group_uuid, seqno: self.seqno }
    }

    pub fn member(&self, uuid: Uuid) -> Option<&Member> {
        self.members.iter().find(|m| m.uuid == uuid)
    }

    pub fn apply(&mut self, event: Ordered<'_>) -> Outcome {
        let outcome = self.apply_event(event);
        // Any event can end a count: a vote, a member leaving, a member
        // reporting it committed past the seqno.
        if !self.ballots.open.is_empty() {
            self.recount_votes();
        }
        outcome
    }

    fn apply_event(&mut self, event: Ordered<'_>) -> Outcome {
        match event {
            Ordered::Membership(m) => self.apply_membership(&m),
            Ordered::Message { payload, .. } => match Envelope::decode(payload) {
                Ok(envelope) => self.apply_message(envelope),
                Err(why) => {
                    log::error!("Skipping unreadable group message ({} bytes): {why}", payload.len());
                    Outcome::Nothing
                }
            },
        }
    }

    fn apply_membership(&mut self, m: &Membership) -> Outcome {
        if self.group_uuid.is_nil() {
            self.start_history(m);
        }
        let founding = self.members.is_empty();
        let view_seqno = self.seqno + 1;
        let mut members: Vec<Member> =
            m.members.iter().map(|(&id, info)| self.member_from(id, info, founding, view_seqno)).collect();
        members.sort_by_key(|m| m.uuid);
        // A member that left takes its pause with it: nobody could lift it.
        self.paused_by.retain(|p| members.iter().any(|m| m.uuid == *p));
        self.arbitrators = m
            .members
            .values()
            .filter(|info| JoinInfo::decode(&info.app).is_some_and(|j| j.arbitrator))
            .map(|info| Uuid(info.uuid))
            .collect();
        self.arbitrators.sort();
        self.segments = m.members.values().filter(|i| i.segment != 0).map(|i| (Uuid(i.uuid), i.segment)).collect();
        self.segments.sort();
        let same =
            members.iter().map(|m| (m.uuid, m.incarnation)).eq(self.members.iter().map(|m| (m.uuid, m.incarnation)));
        self.members = members;
        if same {
            // Learner promoted to voter and similar: not a change the server sees.
            return Outcome::Nothing;
        }
        self.next_view()
    }

    /// A member of a new membership: kept as it was if the group knew this
    /// incarnation already, else a joiner (the founder has the state by
    /// definition).
    fn member_from(&self, id: MemberId, info: &MemberInfo, founding: bool, view_seqno: Seqno) -> Member {
        let uuid = Uuid(info.uuid);
        let join = JoinInfo::decode(&info.app);
        let incarnation = join.map_or(0, |j| j.incarnation);
        let known = self.member(uuid).filter(|old| old.incarnation >= incarnation);
        Member {
            id,
            uuid,
            name: info.name.clone(),
            incoming: info.incoming.clone(),
            state: known.map_or(if founding { MemberState::Synced } else { MemberState::Joiner }, |o| o.state),
            committed: known.map_or(-1, |o| o.committed),
            incarnation: known.map_or(incarnation, |o| o.incarnation),
            ist: match known {
                Some(o) => o.ist,
                None if founding => None,
                None => join.and_then(|j| self.ist_range(j.position, view_seqno)),
            },
        }
    }

    /// The write-sets a member whose data is at `position` replays before the
    /// view at `view_seqno`, if it can do so from the history at all.
    fn ist_range(&self, position: Gtid, view_seqno: Seqno) -> Option<(Seqno, Seqno)> {
        // Behind the history's start by configuration changes only: the
        // replay starts where the history does.
        let floor = self.inherited_last_write.map_or(self.first_seqno, |w| w.min(self.first_seqno));
        let same_history = position.uuid == self.group_uuid && position.seqno >= floor;
        let from = position.seqno.max(self.first_seqno) + 1;
        (same_history && from < view_seqno).then_some((from, view_seqno - 1))
    }

    /// The first configuration founds the history: continue the founder's
    /// saved position if it brought one, else start a new history at 0.
    fn start_history(&mut self, m: &Membership) {
        let founder = m.members.values().next();
        let join = founder.and_then(|f| JoinInfo::decode(&f.app));
        self.inherited_last_write = None;
        match join.map(|j| j.position) {
            Some(g) if !g.uuid.is_nil() && g.seqno >= 0 => {
                self.group_uuid = g.uuid;
                self.seqno = g.seqno;
                self.inherited_last_write =
                    join.and_then(|j| j.inherited_last_write).filter(|w| (0..g.seqno).contains(w));
            }
            _ => {
                // Deterministic from the founder's id, distinct from it.
                let mut bytes = founder.map_or([0x5a; 16], |f| f.uuid);
                bytes.iter_mut().for_each(|b| *b ^= 0xa5);
                bytes[6] = (bytes[6] & 0x0f) | 0x40;
                bytes[8] = (bytes[8] & 0x3f) | 0x80;
                self.group_uuid = Uuid(bytes);
                self.seqno = 0;
            }
        }
        self.first_seqno = self.seqno;
        self.cert = Certifier::new(self.seqno);
    }

    fn next_view(&mut self) -> Outcome {
        self.seqno += 1;
        self.view_no += 1;
        Outcome::View(self.current_view())
    }

    /// The current primary view, positioned at the current seqno.
    pub fn current_view(&self) -> ViewChange {
        ViewChange {
            state_id: self.position(),
            view_no: self.view_no,
            members: self
                .members
                .iter()
                .map(|m| ViewMember {
                    uuid: m.uuid,
                    incarnation: m.incarnation,
                    name: m.name.clone(),
                    incoming: m.incoming.clone(),
                })
                .collect(),
        }
    }

    fn apply_message(&mut self, e: Envelope) -> Outcome {
        let from = Sender { uuid: e.source, incarnation: e.incarnation };
        // A member that was removed may still have messages in flight; only
        // members of the current view speak.
        let Some(member) = self.member(from.uuid) else {
            log::info!("Dropping message from {}, not a member of the primary view", from.uuid);
            return Outcome::Nothing;
        };
        let stale = e.incarnation < member.incarnation;
        match e.body {
            // Ordered before the sender died: a transaction like any other.
            Body::WriteSet(ws) => {
                let session = LockSession { incarnation: e.incarnation, epoch: e.epoch };
                self.apply_write_set(from, session, e.token, ws)
            }
            _ if stale => Outcome::Nothing,
            Body::Causal => Outcome::Causal { from, token: e.token, seqno: self.seqno },
            Body::StateRequest { donors, request } => self.apply_state_request(from, e.token, &donors, request, None),
            Body::IstRequest { donors, request, position } => {
                self.apply_state_request(from, e.token, &donors, request, Some(position))
            }
            Body::State(state) => {
                self.set_state(from.uuid, state);
                Outcome::MemberState { from, state, seqno: self.seqno }
            }
            Body::Progress(committed) => {
                self.note_progress(from.uuid, committed);
                // At this point of the order on every member, so that every
                // index forgets the same uses (it decides verdicts).
                self.purge();
                Outcome::Progress { member: from.uuid, committed }
            }
            Body::ViewBump => self.next_view(),
            Body::Rejoin { position } => self.apply_rejoin(from, position),
            Body::FlowControl { pause } => self.apply_flow_control(from, pause),
            Body::Vote { seqno, code, reason, policy } => self.apply_vote(from.uuid, seqno, code, &reason, policy),
            Body::DonorReady { joiner, incarnation } => {
                Outcome::DonorReady { joiner: Sender { uuid: joiner, incarnation } }
            }
            Body::TransferFailed { joiner, incarnation, code } => {
                let name = |u: Uuid| self.member(u).map_or(String::new(), |m| m.name.clone());
                log::info!(
                    "State transfer to {joiner} ({}) from {} ({}) failed: {code}",
                    name(joiner),
                    from.uuid,
                    name(from.uuid)
                );
                Outcome::TransferFailed { donor: from.uuid, joiner: Sender { uuid: joiner, incarnation }, code }
            }
        }
    }

    fn apply_vote(&mut self, from: Uuid, seqno: Seqno, code: Code, reason: &str, policy: u32) -> Outcome {
        let gtid = Gtid { uuid: self.group_uuid, seqno };
        let name = self.member(from).map_or(String::new(), |m| m.name.clone());
        match self.ballots.cast(seqno, from, code, policy) {
            Cast::Opened | Cast::Counted if code != SUCCESS => {
                log::info!("Member {name} ({from}) votes failure {code:016x} on {gtid}: {reason}")
            }
            Cast::Opened | Cast::Counted => log::info!("Member {name} ({from}) votes success on {gtid}"),
            Cast::Late { winner } => {
                log::info!(
                    "Member {name} ({from}) voted {code:016x} on {gtid} after the vote ended ({winner:016x} won)"
                )
            }
            Cast::Ignored => {}
        }
        Outcome::Nothing
    }

    fn recount_votes(&mut self) {
        let voters: Vec<Voter> = self
            .members
            .iter()
            .filter(|m| !self.arbitrators.contains(&m.uuid))
            .map(|m| Voter {
                uuid: m.uuid,
                eligible: matches!(m.state, MemberState::Synced | MemberState::Donor),
                committed: m.committed,
            })
            .collect();
        for d in self.ballots.recount(&voters) {
            self.log_decision(&d);
        }
    }

    fn log_decision(&self, d: &Decision) {
        let tally: Vec<String> = d.counts.iter().map(|(c, n)| format!("{c:016x}: {n}/{}", d.voters)).collect();
        log::info!(
            "Votes over {}: {}. Winner: {:016x}{}",
            Gtid { uuid: self.group_uuid, seqno: d.seqno },
            tally.join(", "),
            d.winner,
            if d.winner == SUCCESS { " (success)" } else { "" }
        );
    }

    /// A restarted member's new incarnation. Resubmissions of the same
    /// incarnation change nothing.
    fn apply_rejoin(&mut self, from: Sender, position: Seqno) -> Outcome {
        let view_seqno = self.seqno + 1;
        let range = self.ist_range(Gtid { uuid: self.group_uuid, seqno: position }, view_seqno);
        let Some(m) = self.members.iter_mut().find(|m| m.uuid == from.uuid) else { return Outcome::Nothing };
        if from.incarnation <= m.incarnation {
            return Outcome::Nothing;
        }
        m.incarnation = from.incarnation;
        m.state = MemberState::Joiner;
        m.ist = range;
        // The process that asked for a pause is gone.
        self.paused_by.retain(|p| *p != from.uuid);
        self.next_view()
    }

    fn apply_flow_control(&mut self, from: Sender, pause: bool) -> Outcome {
        match (self.paused_by.binary_search(&from.uuid), pause) {
            (Err(at), true) => self.paused_by.insert(at, from.uuid),
            (Ok(at), false) => {
                self.paused_by.remove(at);
            }
            _ => {} // a repeat
        }
        Outcome::FlowControl { from, pause }
    }

    /// Whether replication is paused by flow control.
    pub fn paused(&self) -> bool {
        !self.paused_by.is_empty()
    }

    fn apply_write_set(&mut self, from: Sender, session: LockSession, token: u64, ws: WriteSet) -> Outcome {
        self.seqno += 1;
        let seqno = self.seqno;
        self.note_progress(ws.source, ws.safe);
        let verdict = self.cert.certify(&ws, seqno, session);
        if seqno % PURGE_INTERVAL == 0 {
            self.purge();
        }
        Outcome::WriteSet { from, token, seqno, verdict, ws }
    }

    fn note_progress(&mut self, member: Uuid, committed: Seqno) {
        if let Some(m) = self.members.iter_mut().find(|m| m.uuid == member) {
            m.committed = m.committed.max(committed);
        }
    }

    /// Forget index entries no member can still be certifying against: below
    /// the lowest position any member reported. Members that never reported
    /// are not waited for (a stale write-set of theirs fails certification).
    fn purge(&mut self) {
        let horizon = self.members.iter().map(|m| m.committed).filter(|&c| c >= 0).min();
        if let Some(h) = horizon {
            self.cert.purge(h.min(self.seqno));
        }
    }

    fn set_state(&mut self, member: Uuid, state: MemberState) {
        if let Some(m) = self.members.iter_mut().find(|m| m.uuid == member) {
            m.state = state;
            if state == MemberState::Synced {
                m.ist = None;
            }
        }
    }

    fn apply_state_request(
        &mut self,
        from: Sender,
        token: u64,
        donors: &str,
        request: Vec<u8>,
        bypass: Option<Seqno>,
    ) -> Outcome {
        let donor = self.choose_donor(from.uuid, donors);
        // An IST handshake's empty request only asks whether there is one.
        let probe = bypass.is_some() && request.is_empty();
        if let (Some(d), false) = (donor, probe) {
            self.set_state(d, MemberState::Donor);
        }
        // A state transfer replaces whatever an IST would have brought; an
        // IST's handshake is how that IST starts.
        if let (Some(m), None) = (self.members.iter_mut().find(|m| m.uuid == from.uuid), bypass) {
            m.ist = None;
        }
        Outcome::StateRequest { from, token, donor, request, seqno: self.seqno, bypass }
    }

    /// `wsrep_sst_donor`: a comma list of node names in preference order; a
    /// trailing comma allows any other synced node; empty means any. Of
    /// any other, one in the joiner's site (`gmcast.segment`) first: a
    /// transfer from across a WAN takes its round trips and its bandwidth.
    /// With every member in one site this is the first synced member, as
    /// before sites existed, so members of both builds choose alike.
    fn choose_donor(&self, joiner: Uuid, spec: &str) -> Option<Uuid> {
        let synced =
            |m: &&Member| m.uuid != joiner && m.state == MemberState::Synced && !self.arbitrators.contains(&m.uuid);
        let names: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        let by_name = names.iter().find_map(|name| self.members.iter().filter(synced).find(|m| m.name == *name));
        let any_allowed = names.is_empty() || spec.trim_end().ends_with(',');
        let site = self.segment_of(joiner);
        // The first of the least: the first synced member of the joiner's site.
        let any = || self.members.iter().filter(synced).min_by_key(|m| self.segment_of(m.uuid) != site);
        by_name.or_else(|| if any_allowed { any() } else { None }).map(|m| m.uuid)
    }

    /// A member's site; 0 unless its membership entry said otherwise.
    pub fn segment_of(&self, member: Uuid) -> u8 {
        self.segments.iter().find(|(u, _)| *u == member).map_or(0, |(_, s)| *s)
    }

    /// The state, then the sections added since, each after the last: the
    /// paused set, the arbitrators, the ballots, the certifier's lock
    /// epochs, the inherited history, the members' sites. A build that knows fewer sections reads those and ignores
    /// the bytes after them.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = bincode::serialize(self).expect("encode group state");
        bincode::serialize_into(&mut out, &self.paused_by).expect("encode paused set");
        bincode::serialize_into(&mut out, &self.arbitrators).expect("encode arbitrators");
        bincode::serialize_into(&mut out, &self.ballots).expect("encode ballots");
        bincode::serialize_into(&mut out, &self.cert.epochs).expect("encode lock epochs");
        bincode::serialize_into(&mut out, &self.inherited_last_write).expect("encode inherited history");
        bincode::serialize_into(&mut out, &self.segments).expect("encode segments");
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<GroupState, String> {
        let mut rest = bytes;
        let mut state: GroupState =
            bincode::deserialize_from(&mut rest).map_err(|e| format!("corrupt group snapshot: {e}"))?;
        if !rest.is_empty() {
            state.paused_by = bincode::deserialize_from(&mut rest)
                .map_err(|e| format!("corrupt group snapshot (flow control): {e}"))?;
        }
        if !rest.is_empty() {
            state.arbitrators = bincode::deserialize_from(&mut rest)
                .map_err(|e| format!("corrupt group snapshot (arbitrators): {e}"))?;
        }
        if !rest.is_empty() {
            state.ballots =
                bincode::deserialize_from(&mut rest).map_err(|e| format!("corrupt group snapshot (ballots): {e}"))?;
        }
        if !rest.is_empty() {
            state.cert.epochs = bincode::deserialize_from(&mut rest)
                .map_err(|e| format!("corrupt group snapshot (lock epochs): {e}"))?;
        }
        if !rest.is_empty() {
            state.inherited_last_write = bincode::deserialize_from(&mut rest)
                .map_err(|e| format!("corrupt group snapshot (inherited history): {e}"))?;
        }
        if !rest.is_empty() {
            state.segments =
                bincode::deserialize(rest).map_err(|e| format!("corrupt group snapshot (segments): {e}"))?;
        }
        // What the state's own code keeps must hold in what a peer sent too.
        state.check_invariants().map_err(|why| format!("inconsistent group snapshot: {why}"))?;
        Ok(state)
    }
}

#[cfg(test)]
#[path = "group_state_tests.rs"]
mod tests;
