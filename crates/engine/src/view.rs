//! Views: the membership of the cluster as the server sees it.

use crate::types::{Gtid, Uuid};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ViewStatus {
    Primary,
    NonPrimary,
    Disconnected,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ViewMember {
    /// The member's durable id in the group (it survives restarts).
    pub uuid: Uuid,
    /// Which of its processes (connections) this is.
    pub incarnation: u32,
    pub name: String,
    pub incoming: String,
}

impl ViewMember {
    /// What the server knows this member by ([`node_id`]).
    pub fn node_id(&self) -> Uuid {
        node_id(self.uuid, self.incarnation)
    }
}

/// The id the server knows a member's process by: wsrep's node id, Galera's
/// gcomm uuid, in views, in each write-set's source and in
/// `wsrep_gcomm_uuid`. It is the member's durable uuid with its incarnation
/// mixed into the last four bytes, so it is the same on every node and new at
/// every connection, as Galera's is.
///
/// The server depends on that newness. When two consecutive primary views
/// list the same ids it takes it that the group had no primary component in
/// between, and rolls back every streaming transaction it applies; and after
/// a restart it recognises a node's own unfinished streaming transactions by
/// an id that is no longer in the view. With the durable uuid alone, a node
/// that left and rejoined in the same process saw its old membership again
/// and dropped the streaming transaction another node was still running.
pub fn node_id(member: Uuid, incarnation: u32) -> Uuid {
    let mut id = member.0;
    for (byte, mix) in id[12..].iter_mut().zip(incarnation.to_be_bytes()) {
        *byte ^= mix;
    }
    Uuid(id)
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct View {
    pub status: ViewStatus,
    /// Group uuid and the seqno this (primary) view consumed; -1 otherwise.
    pub state_id: Gtid,
    /// Primary view counter (`wsrep_cluster_conf_id`); -1 for non-primary.
    pub view_no: i64,
    pub members: Vec<ViewMember>,
    /// Our index in `members`, -1 if we are not in it.
    pub my_idx: i32,
}

impl View {
    /// The view that ends a connection: no members, not primary.
    pub fn final_view(group: Uuid) -> View {
        View {
            status: ViewStatus::Disconnected,
            state_id: Gtid { uuid: group, seqno: -1 },
            view_no: -1,
            members: vec![],
            my_idx: -1,
        }
    }

    pub fn index_of(members: &[ViewMember], me: Uuid) -> i32 {
        members.iter().position(|m| m.uuid == me).map_or(-1, |i| i as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_id_is_new_at_every_incarnation_and_the_same_on_every_node() {
        let member = Uuid::parse("01a21b90-45d7-72e9-a92c-526c23af8a91").unwrap();
        let ids: Vec<Uuid> = (1..=300).map(|i| node_id(member, i)).collect();
        let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "two incarnations share a node id");
        assert!(ids.iter().all(|id| *id != member), "a node id equals the durable uuid it hides");
        // Deterministic: what one node computes for a member, every node does.
        assert_eq!(node_id(member, 7), node_id(member, 7));
        // The time-ordered prefix stays, so ids keep the members' order.
        assert!(ids.iter().all(|id| id.0[..12] == member.0[..12]));
    }

    #[test]
    fn a_view_member_is_shown_to_the_server_by_its_node_id() {
        let uuid = Uuid::parse("01a21b90-44f0-7149-b158-4167f17962a4").unwrap();
        let first = ViewMember { uuid, incarnation: 1, name: "n1".into(), incoming: String::new() };
        let second = ViewMember { incarnation: 2, ..first.clone() };
        assert_eq!(first.node_id(), node_id(uuid, 1));
        assert_ne!(first.node_id(), second.node_id(), "a rejoin in the same process must look new to the server");
    }
}
