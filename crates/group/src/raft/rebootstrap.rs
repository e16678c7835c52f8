//! Forming a new primary component on a running member, from its durable
//! state, when no majority of the last one can form:
//! - `pc.bootstrap=YES`: this member alone; the others rejoin it as they
//!   come back;
//! - `pc.ignore_sb` / `pc.ignore_quorum` (see `partition`): the members
//!   this one still reaches, when the policy lets them go on without a
//!   majority.
//!
//! The history goes on: this member's log is kept, the new membership is
//! appended in a new term, and openraft is restarted on the same log and
//! state machine. Refused when a member it can still reach holds a more
//! advanced log: forming around the less advanced one would drop what the
//! other has committed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use log::info;

use super::network::Network;
use super::startup::make_voters;
use super::types::LogId;
use crate::shared::Shared;
use crate::wire::{Request, Response};
use crate::{GroupError, MemberId, MemberInfo};

/// `pc.bootstrap=YES`.
pub async fn bootstrap(shared: Arc<Shared>) -> Result<(), GroupError> {
    if shared.is_primary() {
        info!("pc.bootstrap: this member is already in the primary component; nothing to do");
        return Ok(());
    }
    form(shared.clone(), &[shared.me], "pc.bootstrap").await?;
    info!(
        "pc.bootstrap: member {} ({}) formed a new primary component alone; the others rejoin it",
        shared.me, shared.config.me.name
    );
    Ok(())
}

/// A new primary component of `members` (this one among them): those that
/// are voters of the current membership vote in the new one, the others
/// stay learners. This member leads it first. `purpose` names the reason
/// in a refusal.
pub async fn form(shared: Arc<Shared>, members: &[MemberId], purpose: &str) -> Result<(), GroupError> {
    assert!(members.contains(&shared.me), "a member forms a component it is part of");
    refuse_if_behind(&shared, purpose).await?;
    let (nodes, voters) = new_membership(&shared, members);
    let old = shared.raft();
    old.shutdown().await.map_err(|e| GroupError::Other(format!("cannot stop Raft to bootstrap: {e}")))?;
    let me = shared.me;
    let log = shared.log.clone();
    crate::sync::blocking_section(|| make_voters(&log, me, nodes, voters))?;
    let network = Network::new(shared.net.clone(), shared.suspect / 2);
    let raft = openraft::Raft::new(me, shared.raft_config.clone(), network, log, shared.sm.clone())
        .await
        .map_err(|e| GroupError::Other(format!("cannot restart Raft after bootstrap: {e}")))?;
    *shared.raft.write().unwrap_or_else(|p| p.into_inner()) = raft;
    Ok(())
}

/// The nodes and voters of the component `members` form: each member's
/// info as the current membership knows it (ours from our configuration).
fn new_membership(shared: &Shared, members: &[MemberId]) -> (BTreeMap<MemberId, MemberInfo>, BTreeSet<MemberId>) {
    let m = shared.metrics();
    let current = m.membership_config.membership();
    let mut nodes = BTreeMap::from([(shared.me, shared.my_info())]);
    for id in members.iter().filter(|id| **id != shared.me) {
        if let Some(info) = current.get_node(id) {
            nodes.insert(*id, info.clone());
        }
    }
    let old_voters: BTreeSet<MemberId> = current.voter_ids().collect();
    let mut voters: BTreeSet<MemberId> = nodes.keys().filter(|id| old_voters.contains(id)).copied().collect();
    voters.insert(shared.me);
    (nodes, voters)
}

/// Refuses to form a component around this member when one it can reach
/// holds a more advanced log: forming here would drop what that one has.
/// `purpose` names what is refused, in the error.
async fn refuse_if_behind(shared: &Shared, purpose: &str) -> Result<(), GroupError> {
    let mine = shared.log.vote_and_last().1;
    let membership = shared.metrics().membership_config.membership().clone();
    let others: Vec<(MemberId, MemberInfo)> =
        membership.nodes().filter(|(id, _)| **id != shared.me).map(|(id, info)| (*id, info.clone())).collect();
    let answers = log_positions(shared, &others).await;
    for ((id, info), answer) in others.iter().zip(answers) {
        if let Some(last) = answer.filter(|last| *last > mine) {
            return Err(GroupError::Config(format!(
                "refusing {purpose}: member {} ({}) has a more advanced log ({}) than this one ({}); \
                 it is the one to go on from",
                id,
                info.name,
                last.map_or(0, |l| l.index),
                mine.map_or(0, |l| l.index)
            )));
        }
    }
    Ok(())
}

/// Asks each of `others` how far its log is, all at once (an unreachable
/// one costs one timeout, not one each): its last log id, or `None` where
/// no answer came.
pub(crate) async fn log_positions(shared: &Shared, others: &[(MemberId, MemberInfo)]) -> Vec<Option<Option<LogId>>> {
    join_all(others.iter().map(|(id, info)| async move {
        match shared.net.call(&info.group_addr, Some(*id), &Request::LogPosition, Duration::from_secs(2)).await {
            Ok((_, Response::LogPosition { last })) => Some(last),
            _ => None,
        }
    }))
    .await
}
