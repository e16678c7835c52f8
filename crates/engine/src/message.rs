//! What members say to each other through the total order.

use serde::{Deserialize, Serialize};

use crate::types::{Seqno, Uuid};
use crate::writeset::WriteSet;

/// Version of the message encoding. A member that cannot read a message
/// skips it, and so does every member running the same code: still
/// deterministic. Bumped on any incompatible change.
pub const MESSAGE_VERSION: u8 = 1;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum MemberState {
    /// Joined the group, has no state yet (waits for SST).
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
    StateRequest { donors: String, request: Vec<u8> },
    /// The sender's state changed (joined after SST, synced, desynced).
    State(MemberState),
    /// The sender has committed everything up to here (lets the certification
    /// index forget old keys).
    Progress(Seqno),
    /// The sender is back in the primary component after losing it: every
    /// member delivers a fresh primary view.
    ViewBump,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The sending node (its wsrep node uuid).
    pub source: Uuid,
    /// Sender-local id to find the waiting caller when the message comes back.
    pub token: u64,
    pub body: Body,
}

impl Envelope {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![MESSAGE_VERSION];
        // Serialising plain data into a Vec cannot fail.
        bincode::serialize_into(&mut out, self).expect("encode envelope");
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Envelope, String> {
        match bytes.split_first() {
            Some((&MESSAGE_VERSION, rest)) => bincode::deserialize(rest).map_err(|e| e.to_string()),
            Some((v, _)) => Err(format!("message version {v}, we speak {MESSAGE_VERSION}")),
            None => Err("empty message".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_version_check() {
        let e = Envelope { source: Uuid([7; 16]), token: 9, body: Body::Progress(42) };
        let bytes = e.encode();
        assert_eq!(Envelope::decode(&bytes), Ok(e));
        let mut other = bytes.clone();
        other[0] = 99;
        assert!(Envelope::decode(&other).unwrap_err().contains("version 99"));
        assert!(Envelope::decode(&bytes[..bytes.len() / 2]).is_err());
        assert!(Envelope::decode(&[]).is_err());
    }
}
