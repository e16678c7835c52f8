//! Leader placement: the leader is kept in the site (`gmcast.segment`)
//! that holds most of the voting weight, or in the one the members pin
//! (`pc.leader_segment`).
//!
//! Every commit crosses from its origin to the leader and back from the
//! leader to a majority. With the leader in the heaviest site, a commit
//! made there needs that site only; with the leader elsewhere, every one
//! of them crosses the WAN twice. openraft elects whichever member times
//! out first, so after a failover, or once the heavy site heals, the
//! leader may sit anywhere: the leader itself then hands its leadership
//! over to a member of the home site, as a leaving leader does
//! (`join::transfer_leadership`).
//!
//! The home site is a function of the membership alone, which every member
//! holds in the same order, so successive leaders agree on it and never
//! pass the leadership back and forth. Ties keep the leader where it is.
//!
//! [`home`] and [`successor`] are pure; [`watch`] runs them on the leader.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use log::info;
use openraft::Instant as _;
use tokio::time::Instant;

use crate::shared::Shared;
use crate::MemberId;

/// A voter as placement sees it: from its membership entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Voter {
    pub id: MemberId,
    pub segment: u8,
    pub weight: u32,
    /// The segment it asks the leader to be kept in (`pc.leader_segment`).
    pub pin: Option<u8>,
}

/// The segment the leader belongs in, for a leader in `current`.
///
/// A pin named by voters wins when some voter is in that segment (the pin
/// named by the most weight, then the lowest). Otherwise the segment whose
/// voters weigh most; on a tie, `current` if it is among the heaviest, else
/// the lowest of them. None without voters.
pub fn home(voters: &[Voter], current: u8) -> Option<u8> {
    let mut pins: BTreeMap<u8, u64> = BTreeMap::new();
    let mut weights: BTreeMap<u8, u64> = BTreeMap::new();
    for v in voters {
        *weights.entry(v.segment).or_default() += u64::from(v.weight);
        if let Some(pin) = v.pin {
            // Weight 0 pins too: a pin is a wish, not a vote count.
            *pins.entry(pin).or_default() += u64::from(v.weight) + 1;
        }
    }
    let pinned =
        pins.iter().filter(|(seg, _)| weights.contains_key(seg)).max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)));
    if let Some((&seg, _)) = pinned {
        return Some(seg);
    }
    let heaviest = *weights.values().max()?;
    let tied = |seg: &u8| weights.get(seg) == Some(&heaviest);
    if tied(&current) {
        return Some(current);
    }
    weights.keys().copied().find(tied)
}

/// What the leader knows of another voter, for a hand-over to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub id: MemberId,
    pub segment: u8,
    /// Entries of the leader's log it has not acknowledged.
    pub behind: u64,
    /// Since its last acknowledgement; None: never heard from.
    pub heard: Option<Duration>,
}

/// Whom a leader in segment `mine` hands over to when `home` is elsewhere:
/// a voter of `home` heard from within `live`, at most `near` entries
/// behind (openraft ignores a transfer to one missing entries, and waiting
/// for a far one to catch up holds every commit back); the least behind,
/// then the lowest id. None when the leader is home, or no one qualifies.
pub fn successor(home: u8, mine: u8, candidates: &[Candidate], live: Duration, near: u64) -> Option<MemberId> {
    if home == mine {
        return None;
    }
    candidates
        .iter()
        .filter(|c| c.segment == home && c.heard.is_some_and(|h| h <= live) && c.behind <= near)
        .min_by_key(|c| (c.behind, c.id))
        .map(|c| c.id)
}

/// How often the leader looks.
const PERIOD: Duration = Duration::from_secs(1);
/// A new leader leads this long before it moves the leadership: its
/// followers' first acknowledgements come in, and a failover settles.
const SETTLE: Duration = Duration::from_secs(2);
/// After a hand-over that did not happen, this long before the next: each
/// try stops the leader's commits until its leadership ends.
const BACK_OFF: Duration = Duration::from_secs(30);
/// A hand-over's wait for the successor to take over.
const TRANSFER_WAIT: Duration = Duration::from_secs(2);
/// A successor at most this many entries behind (the send window's scale).
const NEAR: u64 = 64;

/// Runs on every member for the life of the group; acts while it leads.
pub async fn watch(shared: Arc<Shared>) {
    let mut leading_since: Option<(u64, Instant)> = None;
    let mut next_try = Instant::now();
    loop {
        crate::beat::sleep_to_next(&shared, PERIOD).await;
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        let term = shared.with_metrics(|m| (m.current_leader == Some(shared.me)).then_some(m.current_term));
        leading_since = match (term, leading_since) {
            (None, _) => None,
            (Some(t), Some((since_t, at))) if since_t == t => Some((t, at)),
            (Some(t), _) => Some((t, Instant::now())),
        };
        let settled = leading_since.is_some_and(|(_, at)| at.elapsed() >= SETTLE);
        let busy = shared.net.is_leaving() || shared.handing_over.load(Ordering::SeqCst) || !shared.is_primary();
        if !settled || busy || Instant::now() < next_try {
            continue;
        }
        let Some(to) = wanted_successor(&shared) else { continue };
        if !move_leadership(&shared, to).await {
            next_try = Instant::now() + BACK_OFF;
        }
    }
}

/// The successor [`successor`] names, from the membership and the metrics.
fn wanted_successor(shared: &Shared) -> Option<MemberId> {
    let live = shared.config.timeouts.heartbeat * 2;
    shared.with_metrics(|m| {
        let membership = m.membership_config.membership();
        let voter = |id: MemberId| {
            let info = membership.get_node(&id)?;
            Some(Voter { id, segment: info.segment, weight: info.weight, pin: info.leader_segment })
        };
        let voters: Vec<Voter> = membership.voter_ids().filter_map(voter).collect();
        let mine = voters.iter().find(|v| v.id == shared.me)?.segment;
        let home = home(&voters, mine)?;
        let last = m.last_log_index.unwrap_or(0);
        let replication = m.replication.as_ref()?;
        let heartbeat = m.heartbeat.as_ref()?;
        let candidates: Vec<Candidate> = voters
            .iter()
            .filter(|v| v.id != shared.me)
            .map(|v| {
                let acked = replication.get(&v.id).and_then(|l| l.as_ref()).map_or(0, |l| l.index);
                let heard = heartbeat.get(&v.id).and_then(|t| t.as_ref()).map(|t| t.elapsed());
                Candidate { id: v.id, segment: v.segment, behind: last.saturating_sub(acked), heard }
            })
            .collect();
        successor(home, mine, &candidates, live, NEAR)
    })
}

/// Hands the leadership to `to`; whether it took over. Clears
/// `handing_over` once this member's leadership has ended (the Raft core
/// drops writes until then, even when the transfer failed).
async fn move_leadership(shared: &Shared, to: MemberId) -> bool {
    let me = shared.me;
    let name = |id| shared.with_metrics(|m| m.membership_config.membership().get_node(&id).map(|n| n.name.clone()));
    info!(
        "Member {me} leads outside the leader's segment: handing the leadership over to {to} ({})",
        name(to).unwrap_or_default()
    );
    let moved = crate::join::transfer_leadership(shared, to, TRANSFER_WAIT).await;
    if !moved {
        info!("Member {to} did not take the leadership over within {TRANSFER_WAIT:?}; the next try in {BACK_OFF:?}");
    }
    // A transfer, taken or not, ends this leadership: a successor is elected
    // once the followers miss the heartbeats this core no longer sends.
    // Until then payloads must keep going back: the flag stays.
    let term = shared.with_metrics(|m| m.current_term);
    let ended = |m: &crate::raft::types::Metrics| m.current_leader != Some(me) || m.current_term > term;
    while !crate::join::until_metrics(shared, Instant::now() + shared.suspect, ended).await {
        if shared.closed.load(Ordering::Acquire) {
            return moved;
        }
    }
    if !shared.net.is_leaving() {
        shared.handing_over.store(false, Ordering::SeqCst);
    }
    moved
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
