//! The replicated state: what every member derives, identically, from the
//! total order. Seqnos, views, member states, donor choice and certification
//! are all decided here and nowhere else, so they cannot diverge.
//!
//! This module knows nothing about the local node: it turns each ordered event
//! into an [`Outcome`], and the node decides what the outcome means for it.

use serde::{Deserialize, Serialize};
use tandem_group::{MemberId, Membership, Ordered};

use crate::certification::{Certifier, Verdict};
use crate::message::{Body, Envelope, MemberState};
use crate::types::{Gtid, Seqno, Uuid};
use crate::view::ViewMember;
use crate::writeset::WriteSet;

/// How often (in seqnos) the certification index is purged.
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
    pub cert: Certifier,
}

/// A primary configuration change, as ordered.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewChange {
    pub state_id: Gtid,
    pub view_no: i64,
    pub members: Vec<ViewMember>,
}

#[derive(Debug, PartialEq)]
pub enum Outcome {
    WriteSet { token: u64, seqno: Seqno, verdict: Verdict, ws: WriteSet },
    View(ViewChange),
    Causal { source: Uuid, token: u64, seqno: Seqno },
    StateRequest { joiner: Uuid, token: u64, donor: Option<Uuid>, request: Vec<u8>, seqno: Seqno },
    MemberState { member: Uuid, state: MemberState, seqno: Seqno },
    /// Nothing for anyone to do (progress reports, unreadable messages, ...).
    Nothing,
}

/// What a bootstrapping member puts in `MemberInfo::app`: the position its
/// data is at, so the new group continues that history.
pub fn encode_start_position(position: Gtid) -> Vec<u8> {
    bincode::serialize(&position).unwrap_or_default()
}

impl GroupState {
    pub fn position(&self) -> Gtid {
        Gtid { uuid: self.group_uuid, seqno: self.seqno }
    }

    pub fn member(&self, uuid: Uuid) -> Option<&Member> {
        self.members.iter().find(|m| m.uuid == uuid)
    }

    pub fn apply(&mut self, event: Ordered<'_>) -> Outcome {
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
        let mut members: Vec<Member> = m
            .members
            .iter()
            .map(|(&id, info)| {
                let uuid = Uuid(info.uuid);
                let old = self.member(uuid);
                Member {
                    id,
                    uuid,
                    name: info.name.clone(),
                    incoming: info.incoming.clone(),
                    // The founder has the state by definition; others must get it.
                    state: old.map_or(if self.members.is_empty() { MemberState::Synced } else { MemberState::Joiner }, |o| o.state),
                    committed: old.map_or(-1, |o| o.committed),
                }
            })
            .collect();
        members.sort_by_key(|m| m.uuid);
        let same = members.iter().map(|m| m.uuid).eq(self.members.iter().map(|m| m.uuid));
        self.members = members;
        if same {
            // Learner promoted to voter and similar: not a change the server sees.
            return Outcome::Nothing;
        }
        self.next_view()
    }

    /// The first configuration founds the history: continue the founder's
    /// saved position if it brought one, else start a new history at 0.
    fn start_history(&mut self, m: &Membership) {
        let founder = m.members.values().next();
        let saved: Option<Gtid> = founder.and_then(|f| bincode::deserialize(&f.app).ok());
        match saved {
            Some(g) if !g.uuid.is_nil() && g.seqno >= 0 => {
                self.group_uuid = g.uuid;
                self.seqno = g.seqno;
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
                .map(|m| ViewMember { uuid: m.uuid, name: m.name.clone(), incoming: m.incoming.clone() })
                .collect(),
        }
    }

    fn apply_message(&mut self, e: Envelope) -> Outcome {
        let source = e.source;
        // A member that was removed may still have messages in flight; only
        // members of the current view speak.
        if self.member(source).is_none() {
            log::info!("Dropping message from {source}, not a member of the primary view");
            return Outcome::Nothing;
        }
        match e.body {
            Body::WriteSet(ws) => self.apply_write_set(e.token, ws),
            Body::Causal => Outcome::Causal { source, token: e.token, seqno: self.seqno },
            Body::StateRequest { donors, request } => self.apply_state_request(source, e.token, &donors, request),
            Body::State(state) => {
                self.set_state(source, state);
                Outcome::MemberState { member: source, state, seqno: self.seqno }
            }
            Body::Progress(committed) => {
                self.note_progress(source, committed);
                Outcome::Nothing
            }
            Body::ViewBump => self.next_view(),
        }
    }

    fn apply_write_set(&mut self, token: u64, ws: WriteSet) -> Outcome {
        self.seqno += 1;
        let seqno = self.seqno;
        self.note_progress(ws.source, ws.safe);
        let verdict = self.cert.certify(&ws, seqno);
        if seqno % PURGE_INTERVAL == 0 {
            self.purge();
        }
        Outcome::WriteSet { token, seqno, verdict, ws }
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
        }
    }

    fn apply_state_request(&mut self, joiner: Uuid, token: u64, donors: &str, request: Vec<u8>) -> Outcome {
        let donor = self.choose_donor(joiner, donors);
        if let Some(d) = donor {
            self.set_state(d, MemberState::Donor);
        }
        Outcome::StateRequest { joiner, token, donor, request, seqno: self.seqno }
    }

    /// `wsrep_sst_donor`: a comma list of node names in preference order; a
    /// trailing comma allows any other synced node; empty means any.
    fn choose_donor(&self, joiner: Uuid, spec: &str) -> Option<Uuid> {
        let synced = |m: &&Member| m.uuid != joiner && m.state == MemberState::Synced;
        let names: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        let by_name = names
            .iter()
            .find_map(|name| self.members.iter().filter(synced).find(|m| m.name == *name));
        let any_allowed = names.is_empty() || spec.trim_end().ends_with(',');
        by_name
            .or_else(|| if any_allowed { self.members.iter().find(synced) } else { None })
            .map(|m| m.uuid)
    }

    pub fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).expect("encode group state")
    }

    pub fn decode(bytes: &[u8]) -> Result<GroupState, String> {
        bincode::deserialize(bytes).map_err(|e| format!("corrupt group snapshot: {e}"))
    }
}

#[cfg(test)]
#[path = "group_state_tests.rs"]
mod tests;
