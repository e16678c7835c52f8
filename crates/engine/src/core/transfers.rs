//! State requests as the group orders them: the donor it named queues the
//! donation, the joiner is told who (which process) was named, and the IST
//! handshake's probe is answered by the donor itself.
//!
//! Why the donor answers the probe: the group state names a member whose
//! state it last knew as synced, and after a whole cluster was killed that
//! state is its dead process's. A joiner that started its SST script's
//! receiver for a donor that never comes would wait for good, so it only
//! goes on once the named member's live, synced process says so
//! (`Body::DonorReady`); otherwise it resumes without the handshake.

use super::{Command, LocalState, NodeCore};
use crate::group_state::{GroupState, Sender};
use crate::message::Body;
use crate::queue::Task;
use crate::types::{Seqno, Uuid};
use crate::waiter::Reply;

/// A state request as ordered (`Outcome::StateRequest`).
pub(super) struct Request {
    pub from: Sender,
    pub token: u64,
    pub donor: Option<Uuid>,
    pub request: Vec<u8>,
    pub seqno: Seqno,
    pub bypass: Option<Seqno>,
}

impl NodeCore {
    pub(super) fn on_state_request(&mut self, r: Request, state: &GroupState, out: &mut Vec<Command>) {
        // An IST handshake's empty request only asks whether there is a
        // donor (`Body::IstRequest`).
        let probe = r.bypass.is_some() && r.request.is_empty();
        let named_me = r.donor == Some(self.me) && self.live;
        if named_me && !probe {
            out.push(Command::Queue(Task::Donate {
                after: r.seqno,
                request: r.request,
                joiner: r.from,
                bypass: r.bypass,
            }));
        } else if named_me && self.state == LocalState::Synced && !self.closing {
            let ready = Body::DonorReady { joiner: r.from.uuid, incarnation: r.from.incarnation };
            out.push(Command::Submit(ready));
        }
        if self.is_mine(r.from) {
            let named = r.donor.map(|d| (d, state.member(d).map_or(0, |m| m.incarnation)));
            out.push(Command::Reply { token: r.token, reply: Reply::Donor(named) });
        }
    }

    /// A donor's live process answered this process's probe.
    pub(super) fn on_donor_ready(&mut self, joiner: Sender) {
        if self.is_mine(joiner) {
            self.donor_ready = true;
        }
    }

    /// Whether a donor's live process answered this process's IST
    /// handshake probe.
    pub fn donor_ready(&self) -> bool {
        self.donor_ready
    }
}
