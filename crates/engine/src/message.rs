//! What members say to each other through the total order.

use serde::{Deserialize, Serialize};

use crate::types::{Gtid, Seqno, Uuid};
use crate::writeset::WriteSet;

/// Version of the message encoding. A member that cannot read a message
/// skips it, and so does every member running the same code: still
/// deterministic. Bumped on any incompatible change (2: incarnations;
/// 3: lock epochs, after the envelope). Messages of version 2 are still
/// read, epoch 0: a durable log written by an earlier build replays.
pub const MESSAGE_VERSION: u8 = 3;
const MESSAGE_VERSION_2: u8 = 2;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum MemberState {
    /// Joined the group, has no state yet (waits for SST), or restarted and
    /// not yet caught up.
    Joiner,
    /// Sending its state to a joiner, or desynced by the operator.
    Donor,
    /// Has the state, catching up with the group.
    Joined,
    Synced,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Body {
    WriteSet(WriteSet),
    /// A causal-read marker: its position in the total order is the
    /// cluster-wide "now" the reader must catch up with.
    Causal,
    /// A joiner asks for a state transfer; `donors` is `wsrep_sst_donor`.
    StateRequest {
        donors: String,
        request: Vec<u8>,
    },
    /// The sender's state changed (joined after SST, synced, desynced).
    State(MemberState),
    /// The sender has committed everything up to here (lets the certification
    /// index forget old keys, and shows IST progress).
    Progress(Seqno),
    /// The sender is back in the primary component after losing it: every
    /// member delivers a fresh primary view.
    ViewBump,
    /// A member restarted with its durable identity: its new incarnation
    /// (in the envelope) replaces the old one, it is not synced any more, and
    /// every member delivers a view, the one that admits the new incarnation.
    /// `position` is where its local data is (for IST accounting).
    Rejoin {
        position: Seqno,
    },
    /// Flow control: the sender's receive queue is over its limit and every
    /// member pauses replication (`pause`), or it is back under the lower
    /// limit and its pause is lifted. Appended last, so messages of older
    /// builds decode unchanged.
    FlowControl {
        pause: bool,
    },
    /// Consistency voting (`voting.rs`): the sender's outcome on `seqno`,
    /// 0 for success or the code of its error, whose text `reason` is only
    /// for the logs; `policy` is its `gcs.vote_policy`. Appended last, like
    /// flow control.
    Vote {
        seqno: Seqno,
        code: u64,
        reason: String,
        policy: u32,
    },
    /// The sender, a donor, could not send `joiner` its state transfer (the
    /// server's SST script failed with `code`, a negative errno). The joiner
    /// stops waiting for a state that will never come, as with Galera.
    /// `incarnation` is the requesting process's. Appended last, like voting.
    TransferFailed {
        joiner: Uuid,
        incarnation: u32,
        code: i32,
    },
    /// A restarted member resuming at `position` by IST asks, as Galera's
    /// joiners do for every IST, for a donor that runs its SST script in
    /// bypass mode: no data, only the position and the donor's
    /// `wsrep_gtid_domain_id`, from which the joiner's server takes the
    /// domain it binlogs in (`wsrep_gtid_mode`). An empty `request` only
    /// asks whether a donor would be chosen now, and reserves none
    /// (`applier::Node::ist_handshake`). Appended last, like the failed
    /// transfer.
    IstRequest {
        donors: String,
        request: Vec<u8>,
        position: Seqno,
    },
    /// The sender, named donor by an IST handshake's probe, is live and
    /// synced: `joiner` (that process) may go on with the handshake. The
    /// group state alone may name a member whose process died (a whole
    /// cluster killed at once). Appended last.
    DonorReady {
        joiner: Uuid,
        incarnation: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The sending node (its wsrep node uuid, stable across restarts).
    pub source: Uuid,
    /// The sender's process incarnation. Messages of an earlier incarnation
    /// that are ordered after a restart must not be taken for the new
    /// process's (its tokens start again, its state is different).
    pub incarnation: u32,
    /// Sender-local id to find the waiting caller when the message comes back.
    pub token: u64,
    pub body: Body,
    /// The sender's lock epoch within its incarnation
    /// (`certification::LockSession`). Encoded after the rest.
    #[serde(skip)]
    pub epoch: u32,
}

impl Envelope {
    pub fn encode(&self) -> Vec<u8> {
        // Sized once: a write-set's data would otherwise be copied at each doubling.
        let size = bincode::serialized_size(self).map_or(0, |n| n as usize);
        let mut out = Vec::with_capacity(1 + size + 4);
        out.push(MESSAGE_VERSION);
        // Serialising plain data into a Vec cannot fail.
        bincode::serialize_into(&mut out, self).expect("encode envelope");
        bincode::serialize_into(&mut out, &self.epoch).expect("encode epoch");
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Envelope, String> {
        match bytes.split_first() {
            Some((&MESSAGE_VERSION, mut rest)) => {
                let mut envelope: Envelope = bincode::deserialize_from(&mut rest).map_err(|e| e.to_string())?;
                envelope.epoch = bincode::deserialize(rest).map_err(|e| format!("lock epoch: {e}"))?;
                Ok(envelope)
            }
            Some((&MESSAGE_VERSION_2, rest)) => bincode::deserialize(rest).map_err(|e| e.to_string()),
            Some((v, _)) => Err(format!("message version {v}, we speak {MESSAGE_VERSION}")),
            None => Err("empty message".into()),
        }
    }
}

/// What a member tells the group about itself when it is added (carried in
/// `MemberInfo::app` of every membership): which process incarnation asks,
/// and where its local data is. A founder's position becomes the position
/// the new group continues from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinInfo {
    pub incarnation: u32,
    pub position: Gtid,
    /// An arbitrator: a voter without a database, never a donor. Encoded
    /// after the rest, and only when set, so that builds without
    /// arbitrators read the join info of every member unchanged.
    #[serde(skip)]
    pub arbitrator: bool,
    /// A founder whose data comes from Galera: the last seqno up to its
    /// position that may have carried data, the ones above it having been
    /// configuration changes in Galera's own cache (`inherited.rs`). Encoded
    /// after the arbitrator's mark, for the same reason.
    #[serde(skip)]
    pub inherited_last_write: Option<Seqno>,
}

/// The byte after the join info that marks an arbitrator.
const ARBITRATOR_MARK: u8 = 0xab;
/// The byte that leads an inherited history's last write-set (an i64).
const INHERITED_MARK: u8 = 0xc1;

impl JoinInfo {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = bincode::serialize(self).expect("encode join info");
        if self.arbitrator {
            out.push(ARBITRATOR_MARK);
        }
        if let Some(seqno) = self.inherited_last_write {
            out.push(INHERITED_MARK);
            out.extend_from_slice(&seqno.to_le_bytes());
        }
        out
    }

    /// `None` for members that carry no (or foreign) join info.
    pub fn decode(bytes: &[u8]) -> Option<JoinInfo> {
        let mut rest = bytes;
        let mut info: JoinInfo = bincode::deserialize_from(&mut rest).ok()?;
        if let Some(after) = rest.strip_prefix(&[ARBITRATOR_MARK]) {
            info.arbitrator = true;
            rest = after;
        }
        if let Some(after) = rest.strip_prefix(&[INHERITED_MARK]) {
            info.inherited_last_write = after.get(..8).and_then(|b| b.try_into().ok()).map(Seqno::from_le_bytes);
        }
        Some(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_version_check() {
        let e = Envelope { source: Uuid([7; 16]), incarnation: 3, token: 9, body: Body::Progress(42), epoch: 5 };
        let bytes = e.encode();
        assert_eq!(Envelope::decode(&bytes), Ok(e.clone()));
        let mut other = bytes.clone();
        other[0] = 99;
        assert!(Envelope::decode(&other).unwrap_err().contains("version 99"));
        assert!(Envelope::decode(&bytes[..bytes.len() / 2]).is_err());
        assert!(Envelope::decode(&[]).is_err());
        // Version 3 without its epoch is a truncated message.
        assert!(Envelope::decode(&bytes[..bytes.len() - 4]).unwrap_err().contains("lock epoch"));
    }

    /// A durable log written by a build before lock epochs replays: its
    /// messages read as epoch 0.
    #[test]
    fn version_2_messages_read_as_epoch_0() {
        let e = Envelope { source: Uuid([7; 16]), incarnation: 3, token: 9, body: Body::Causal, epoch: 0 };
        let mut v2 = vec![MESSAGE_VERSION_2];
        bincode::serialize_into(&mut v2, &e).unwrap();
        assert_eq!(Envelope::decode(&v2), Ok(e.clone()));
        assert_ne!(v2, e.encode(), "version 3 must differ from version 2");
    }

    #[test]
    fn join_info_round_trips_and_refuses_garbage() {
        let j = JoinInfo {
            incarnation: 4,
            position: Gtid { uuid: Uuid([1; 16]), seqno: 77 },
            arbitrator: false,
            inherited_last_write: None,
        };
        assert_eq!(JoinInfo::decode(&j.encode()), Some(j));
        let arb = JoinInfo { arbitrator: true, ..j };
        assert_eq!(JoinInfo::decode(&arb.encode()), Some(arb));
        // What a build without arbitrators reads of an arbitrator's info.
        let older: JoinInfo = bincode::deserialize(&arb.encode()).unwrap();
        assert_eq!(older, j);
        assert_eq!(JoinInfo::decode(&[]), None);
        assert_eq!(JoinInfo::decode(&[1, 2]), None);
    }

    #[test]
    fn an_inherited_history_rides_after_the_rest() {
        let j = JoinInfo {
            incarnation: 1,
            position: Gtid { uuid: Uuid([1; 16]), seqno: 27 },
            arbitrator: false,
            inherited_last_write: Some(25),
        };
        assert_eq!(JoinInfo::decode(&j.encode()), Some(j));
        let both = JoinInfo { arbitrator: true, ..j };
        assert_eq!(JoinInfo::decode(&both.encode()), Some(both));
        // What a build before it reads: the same member, no arbitrator.
        let bytes = j.encode();
        let mut rest = &bytes[..];
        let older: JoinInfo = bincode::deserialize_from(&mut rest).unwrap();
        assert_eq!(older, JoinInfo { inherited_last_write: None, ..j });
        assert_ne!(rest.first(), Some(&ARBITRATOR_MARK));
        // Cut short: the member still reads, without it.
        let cut = &bytes[..bytes.len() - 3];
        assert_eq!(JoinInfo::decode(cut), Some(JoinInfo { inherited_last_write: None, ..j }));
    }
}
