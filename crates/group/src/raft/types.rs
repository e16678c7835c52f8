//! The openraft type configuration of the group, and the conversions between
//! openraft's view of the world and the crate's own [`Membership`].

use std::fmt;
use std::sync::Arc;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{MemberId, MemberInfo, Membership};

/// Payload bytes shared, without copying, between the in-memory log, the
/// replication tasks and the state machine. The log clones entries for every
/// follower it replicates to, so a `Vec<u8>` would copy each write-set N times.
/// An `Arc<Vec<u8>>` rather than an `Arc<[u8]>`: it takes the submitted or
/// decoded `Vec` as it is, where an `Arc<[u8]>` copies it into a new block.
#[derive(Clone, PartialEq, Eq)]
pub struct Bytes(pub Arc<Vec<u8>>);

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes(v.into())
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes)", self.0.len())
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // `serialize_bytes` lets bincode copy the slice in one go instead of
        // encoding it as a sequence of u8 values.
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_byte_buf(BytesVisitor)
    }
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Bytes;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
        Ok(Bytes::from(v.to_vec()))
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
        Ok(Bytes::from(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
        // Formats without a native byte string hand us a sequence. The size
        // hint comes from the peer, so it only caps the initial allocation.
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(Bytes::from(out))
    }
}

/// One application message in the log: what `origin` handed to `submit`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppPayload {
    pub origin: MemberId,
    pub bytes: Bytes,
}

impl fmt::Display for AppPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "payload(origin={}, {} bytes)", self.origin, self.bytes.0.len())
    }
}

openraft::declare_raft_types!(
    /// The openraft type configuration of a Tandem group.
    pub GroupTypes:
        D = AppPayload,
        R = (),
        NodeId = MemberId,
        Node = MemberInfo,
        AsyncRuntime = super::runtime::GroupRuntime,
);

pub type LogId = openraft::type_config::alias::LogIdOf<GroupTypes>;
pub type Vote = openraft::type_config::alias::VoteOf<GroupTypes>;
pub type Entry = openraft::type_config::alias::EntryOf<GroupTypes>;
pub type SnapshotMeta = openraft::type_config::alias::SnapshotMetaOf<GroupTypes>;
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<GroupTypes>;
pub type RaftMembership = openraft::Membership<MemberId, MemberInfo>;
pub type Snapshot = openraft::type_config::alias::SnapshotOf<GroupTypes, Vec<u8>>;
pub type GroupRaft = openraft::Raft<GroupTypes, super::state_machine::StateMachine>;
pub type Metrics = openraft::RaftMetrics<GroupTypes>;

/// The crate's view of a *uniform* openraft membership. Joint memberships are
/// transitional (half of a change) and have no Galera counterpart: `None`.
pub fn uniform_view(m: &RaftMembership) -> Option<Membership> {
    let configs = m.get_joint_config();
    if configs.len() != 1 {
        return None;
    }
    Some(Membership {
        voters: configs[0].iter().copied().collect(),
        learners: m.learner_ids().collect(),
        members: m.nodes().map(|(id, info)| (*id, info.clone())).collect(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn info(name: &str) -> MemberInfo {
        MemberInfo { name: name.into(), ..Default::default() }
    }

    #[test]
    fn bytes_round_trip_through_bincode() {
        let p = AppPayload { origin: 7, bytes: Bytes::from(vec![1, 2, 3, 255]) };
        let enc = bincode::serialize(&p).unwrap();
        let dec: AppPayload = bincode::deserialize(&enc).unwrap();
        assert_eq!(p, dec);
        // Same layout as Vec<u8>: 8-byte length then the raw bytes.
        let as_vec = bincode::serialize(&(7u64, vec![1u8, 2, 3, 255])).unwrap();
        assert_eq!(enc, as_vec);
    }

    /// A submitted write-set enters the log without a copy: the payload
    /// keeps the buffer it was handed, and so does a decoded one.
    #[test]
    fn bytes_keep_the_buffer_they_are_given() {
        let v = vec![5u8; 1000];
        let at = v.as_ptr();
        let b = Bytes::from(v);
        assert_eq!(b.0.as_ptr(), at);
        let shared = b.clone();
        assert_eq!(shared.0.as_ptr(), at, "clones share it");
    }

    #[test]
    fn uniform_view_lists_voters_and_learners() {
        let nodes: BTreeMap<_, _> = [(1, info("a")), (2, info("b")), (3, info("c"))].into();
        let m = RaftMembership::new(vec![BTreeSet::from([1, 2])], nodes).unwrap();
        let v = uniform_view(&m).expect("uniform");
        assert_eq!(v.voters, vec![1, 2]);
        assert_eq!(v.learners, vec![3]);
        assert_eq!(v.members.len(), 3);
        assert_eq!(v.members[&3].name, "c");
    }

    #[test]
    fn joint_membership_has_no_view() {
        let nodes: BTreeMap<_, _> = [(1, info("a")), (2, info("b"))].into();
        let m = RaftMembership::new(vec![BTreeSet::from([1]), BTreeSet::from([1, 2])], nodes).unwrap();
        assert!(uniform_view(&m).is_none());
    }
}
