//! `pc.weight`: what each member counts for in the quorum.
//!
//! Galera's weighted quorum: a component is primary when its members weigh
//! more than half of what the voters of the last primary component weigh
//! (`partition::standing`). Raft's own quorum counts heads, so with unequal
//! weights the two can disagree, and the weighted rule decides:
//! - a weighted majority that is a minority of heads (one heavy member cut
//!   from two light ones) re-forms around itself, as `pc.ignore_quorum`
//!   would (see `detector`);
//! - a majority of heads that is a weighted minority stays non-primary: its
//!   members neither serve nor grant votes (`server`), so it commits nothing
//!   while the heavy side goes on, and it rejoins that side afterwards.
//!
//! With equal weights (the default) nothing here changes what Raft decides.
//!
//! A member's weight lives in its [`MemberInfo`], so that every member judges
//! by the same weights: a change is a membership change on the leader
//! (`SetNodes`), agreed in total order like any other. A member asks for it
//! when `SET GLOBAL wsrep_provider_options='pc.weight=N'` runs, and again
//! whenever it finds the membership carrying another weight than the one it
//! was given (a change made while it was out of the primary component, or a
//! restart with another `pc.weight`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use log::{debug, info};
use openraft::async_runtime::WatchReceiver;
use tokio::time::Instant;

use crate::join::{self, ask_leader, Change};
use crate::shared::Shared;
use crate::wire::{Request, Response};
use crate::{MemberId, MemberInfo};

/// Galera's range for `pc.weight`.
pub use tandem_group_api::MAX_WEIGHT;

/// Each voter of the current membership with its weight.
pub fn voter_weights(shared: &Shared) -> Vec<(MemberId, u32)> {
    let m = shared.metrics();
    let membership = m.membership_config.membership();
    membership.voter_ids().map(|id| (id, membership.get_node(&id).map_or(1, |n| n.weight))).collect()
}

/// Every voter weighs the same: Raft's head count is the weighted rule.
pub fn uniform(weights: &[(MemberId, u32)]) -> bool {
    weights.windows(2).all(|w| w[0].1 == w[1].1)
}

/// Leader side of `SetWeight`.
pub async fn handle_set_weight(shared: &Shared, member: MemberId, weight: u32) -> Response {
    if !shared.raft().is_leader() {
        return shared.not_leader();
    }
    let m = shared.metrics();
    let Some(info) = m.membership_config.membership().get_node(&member) else {
        return Response::Failed { reason: format!("member {member} is not in the group") };
    };
    if info.weight == weight {
        return Response::Done;
    }
    let info = MemberInfo { weight, ..info.clone() };
    info!("Member {member} ({}) now weighs {weight} in the quorum", info.name);
    join::change_membership(shared, Change::SetInfo(member, info)).await
}

/// The weight the membership gives this member, if it holds it.
fn weight_in_membership(shared: &Shared) -> Option<u32> {
    shared.with_metrics(|m| Some(m.membership_config.membership().get_node(&shared.me)?.weight))
}

/// The membership carries the wanted weight (or does not hold this member).
fn weight_carried(shared: &Shared) -> bool {
    let wanted = shared.weight.load(Ordering::Acquire);
    weight_in_membership(shared).is_none_or(|w| w == wanted)
}

/// Asks the leader once to give this member its wanted weight; `Ok(true)`
/// when the membership already carries it.
async fn carry_in(shared: &Shared) -> Result<bool, String> {
    if weight_carried(shared) {
        return Ok(true);
    }
    let wanted = shared.weight.load(Ordering::Acquire);
    let req = Request::SetWeight { member: shared.me, weight: wanted };
    if shared.raft().is_leader() {
        return match handle_set_weight(shared, shared.me, wanted).await {
            Response::Done => Ok(false),
            Response::Failed { reason } => Err(reason),
            _ => Err("leadership moved".into()),
        };
    }
    ask_leader(shared, None, &req).await.map(|()| false).map_err(|e| e.to_string())
}

/// `pc.weight=N` at runtime: waits (up to `within`) until the membership
/// carries it, as Galera's weight change returns once its view is in.
pub async fn set(shared: &Shared, weight: u32, within: Duration) -> Result<(), String> {
    shared.weight.store(weight, Ordering::Release);
    if !shared.is_primary() {
        info!("pc.weight={weight} is taken into the group once this member is in the primary component");
        return Ok(());
    }
    let deadline = Instant::now() + within;
    loop {
        match carry_in(shared).await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(e) => debug!("pc.weight={weight} not in the membership yet: {e}"),
        }
        if Instant::now() >= deadline {
            return Err(format!("pc.weight={weight} did not reach the membership within {within:?}"));
        }
        tokio::time::sleep(shared.retry_pause()).await;
    }
}

/// Keeps this member's weight in the membership equal to the wanted one.
/// While it is, and the member is in the primary component, nothing can
/// change that but a new membership (which openraft publishes) or `set`,
/// which carries the weight itself while primary: the watch then waits for
/// a change of membership, looking every `SETTLED` all the same (a failed
/// `set`, a lost primary component), rather than every `PERIOD`.
pub async fn watch(shared: Arc<Shared>) {
    const PERIOD: Duration = Duration::from_millis(500);
    const SETTLED: Duration = Duration::from_secs(5);
    let mut changes = shared.raft().server_metrics();
    loop {
        let settled = shared.is_primary() && weight_carried(&shared);
        if settled {
            tokio::select! {
                biased;
                _ = crate::beat::sleep_to_next(&shared, SETTLED) => {}
                changed = changes.changed() => if changed.is_err() {
                    changes = shared.raft().server_metrics();
                    tokio::time::sleep(PERIOD).await;
                }
            }
        } else {
            crate::beat::sleep_to_next(&shared, PERIOD).await;
        }
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        if !shared.is_primary() {
            continue;
        }
        if let Err(e) = carry_in(&shared).await {
            debug!("Could not carry pc.weight into the membership yet: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_means_every_voter_weighs_the_same() {
        assert!(uniform(&[]));
        assert!(uniform(&[(1, 3)]));
        assert!(uniform(&[(1, 1), (2, 1), (3, 1)]));
        assert!(!uniform(&[(1, 3), (2, 1), (3, 1)]));
        assert!(uniform(&[(1, 0), (2, 0)]));
    }
}
