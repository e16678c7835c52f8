//! Leader-side eviction of silent members (`evs.inactive_timeout`).
//!
//! The leader removes a voter or learner whose last heartbeat ack is older
//! than `timeouts.inactive`. Only a leader that holds quorum evicts, so a
//! minority can never vote the majority out. One member at a time: each
//! removal is a membership change and produces a new view everywhere.

use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{error, warn};
use openraft::{Instant as _, ServerState};

use crate::join;
use crate::raft::types::Metrics;
use crate::shared::Shared;
use crate::wire::Response;
use crate::MemberId;

pub async fn run(shared: Arc<Shared>) {
    let period = shared
        .config
        .timeouts
        .heartbeat
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut leader_since: Option<Instant> = None;
    loop {
        tokio::time::sleep(period).await;
        let m = shared.metrics();
        if m.state != ServerState::Leader {
            leader_since = None;
            continue;
        }
        // A new leader has no ack history yet: count silence from now.
        let since = *leader_since.get_or_insert_with(Instant::now);
        if let Some(victim) = silent_member(&shared, &m, since) {
            evict(&shared, victim).await;
        }
    }
}

/// The first member (other than us) silent for longer than `inactive`.
fn silent_member(
    shared: &Shared,
    m: &Metrics,
    leader_since: Instant,
) -> Option<(MemberId, Duration)> {
    if !shared.is_primary() {
        return None;
    }
    // A change in flight would make ours fail; the next round retries.
    if m.membership_config.log_id() != m.committed_membership_config.log_id() {
        return None;
    }
    let acks = m.heartbeat.as_ref()?;
    let inactive = shared.config.timeouts.inactive;
    m.membership_config
        .membership()
        .nodes()
        .map(|(id, _)| *id)
        .filter(|id| *id != shared.me)
        .map(|id| {
            let acked = acks.get(&id).and_then(|a| a.as_ref()).map(|t| t.elapsed());
            let silent = acked.unwrap_or(Duration::MAX).min(leader_since.elapsed());
            (id, silent)
        })
        .find(|(_, silent)| *silent > inactive)
}

async fn evict(shared: &Shared, (member, silent): (MemberId, Duration)) {
    let name = shared
        .metrics()
        .membership_config
        .membership()
        .get_node(&member)
        .map(|i| i.name.clone())
        .unwrap_or_default();
    warn!(
        "Member {member} ({name}) silent for {silent:?}, \
         longer than the inactive timeout: evicting it"
    );
    match join::remove_member(shared, member).await {
        Response::Done => warn!("Member {member} ({name}) evicted from the group"),
        other => error!("Could not evict member {member} ({name}): {other:?}"),
    }
}
