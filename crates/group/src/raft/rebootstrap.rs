//! `pc.bootstrap=YES` on a running member: a new primary component of this
//! member alone, from its durable state, when no majority can form (the
//! last primary component's voters are gone). The history goes on: this
//! member's log is kept, a membership of itself alone is appended in a new
//! term, and openraft is restarted on the same log and state machine. The
//! others rejoin it as they come back.
//!
//! Refused when this member is primary (nothing to do), or when a member it
//! can still reach holds a more advanced log: bootstrapping the less
//! advanced one would drop what the other has committed.

use std::sync::Arc;
use std::time::Duration;

use log::{info, warn};

use super::network::Network;
use super::startup::make_only_voter;
use crate::shared::Shared;
use crate::wire::{Request, Response};
use crate::GroupError;

pub async fn bootstrap(shared: Arc<Shared>) -> Result<(), GroupError> {
    if shared.is_primary() {
        info!("pc.bootstrap: this member is already in the primary component; nothing to do");
        return Ok(());
    }
    refuse_if_behind(&shared).await?;
    let old = shared.raft();
    old.shutdown()
        .await
        .map_err(|e| GroupError::Other(format!("cannot stop Raft to bootstrap: {e}")))?;
    let me = shared.me;
    let config = shared.config.clone();
    let log = shared.log.clone();
    tokio::task::block_in_place(|| make_only_voter(&log, me, &config))?;
    let network = Network::new(shared.net.clone(), shared.suspect / 2);
    let raft = openraft::Raft::new(
        me,
        shared.raft_config.clone(),
        network,
        log,
        shared.sm.clone(),
    )
    .await
    .map_err(|e| GroupError::Other(format!("cannot restart Raft after bootstrap: {e}")))?;
    *shared.raft.write().unwrap_or_else(|p| p.into_inner()) = raft;
    warn!(
        "pc.bootstrap: member {me} ({}) formed a new primary component alone; the others rejoin it",
        config.me.name
    );
    Ok(())
}

/// Asks every other member it can reach how far its log is.
async fn refuse_if_behind(shared: &Shared) -> Result<(), GroupError> {
    let mine = shared.log.vote_and_last().1;
    let membership = shared.metrics().membership_config.membership().clone();
    for (id, info) in membership.nodes().filter(|(id, _)| **id != shared.me) {
        let asked = shared
            .net
            .call(
                &info.group_addr,
                Some(*id),
                &Request::LogPosition,
                Duration::from_secs(2),
            )
            .await;
        let Ok((_, Response::LogPosition { last })) = asked else {
            continue;
        };
        if last > mine {
            return Err(GroupError::Config(format!(
                "refusing pc.bootstrap: member {} ({}) has a more advanced log ({}) than this one ({}); \
                 bootstrap that member instead",
                id,
                info.name,
                last.map_or(0, |l| l.index),
                mine.map_or(0, |l| l.index)
            )));
        }
    }
    Ok(())
}
