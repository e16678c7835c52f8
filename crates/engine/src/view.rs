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
    pub uuid: Uuid,
    pub name: String,
    pub incoming: String,
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
