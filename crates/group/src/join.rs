//! Membership changes: join, promote, leave and eviction.
//!
//! Only the leader changes the membership. Any member may be asked; a
//! follower answers `NotLeader` with the leader's address and the caller
//! follows it (a redirect, not a proxy, so two confused members cannot bounce
//! a request between them forever).
//!
//! ```text
//!   joiner ──Join──► any peer ──NotLeader(addr)──► joiner ──Join──► leader
//!   leader: add_learner(joiner)  ──► membership entry ──► new view everywhere
//!   engine: promote(joiner) ──► leader: change_membership(AddVoterIds)
//!   member: leave() ──► leader: change_membership(RemoveVoters | RemoveNodes)
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use log::{debug, error, info, warn};
use openraft::errors::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::ChangeMembers;
use tokio::time::Instant;

use crate::shared::Shared;
use crate::transport::CallError;
use crate::wire::{Request, Response};
use crate::{MemberId, MemberInfo};

/// Redirects followed for one request before giving up on this round.
const MAX_HOPS: usize = 4;

#[derive(Debug, Clone)]
pub enum AskError {
    /// Nobody leads right now, or the leader could not be reached: retry.
    Transient(String),
    /// The leader refused the request.
    Refused(String),
    /// The address we were sent to is our own.
    Myself,
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskError::Transient(e) => write!(f, "{e}"),
            AskError::Refused(e) => write!(f, "refused: {e}"),
            AskError::Myself => write!(f, "that address is this member itself"),
        }
    }
}

/// Sends a group request to the leader, starting at `start` (or the leader we
/// know of), following redirects.
pub async fn ask_leader(shared: &Shared, start: Option<String>, req: &Request) -> Result<(), AskError> {
    // Metrics that still name us the leader after we stepped down (a leaving
    // leader's hand-over) are stale: dialing our own address would only
    // meet ourselves, or, with a certificate we cannot verify, fail outright.
    let mut target = start.or_else(|| shared.leader().filter(|(id, _)| *id != shared.me).map(|(_, addr)| addr));
    for hop in 0..MAX_HOPS {
        let Some(addr) = target.take() else {
            return Err(AskError::Transient("no leader known".into()));
        };
        if hop > 0 && addr == shared.config.me.group_addr {
            // A peer with stale knowledge sent us back to ourselves.
            return Err(AskError::Transient(format!("the leader address {addr} is our own: waiting for a new leader")));
        }
        match shared.net.call(&addr, None, req, shared.request_timeout()).await {
            Ok((_, Response::Done)) => return Ok(()),
            Ok((_, Response::NotLeader { leader_addr })) => target = leader_addr,
            Ok((_, Response::Failed { reason })) => return Err(AskError::Refused(reason)),
            Ok((_, _)) => return Err(AskError::Refused(format!("{addr} sent an unexpected answer"))),
            Err(CallError::Refused(e)) => return Err(AskError::Refused(e)),
            // Only the address we were asked to dial can be an alias of ours;
            // a redirect to ourselves is stale leader knowledge (our previous
            // incarnation led the group) and passes once a new leader is elected.
            Err(CallError::Myself) if hop == 0 => return Err(AskError::Myself),
            Err(CallError::Myself) => {
                return Err(AskError::Transient(format!(
                    "the leader address {addr} is our own: waiting for a new leader"
                )))
            }
            Err(e) => return Err(AskError::Transient(e.to_string())),
        }
    }
    Err(AskError::Transient("too many redirects: leadership is changing".into()))
}

/// Carries out a group request on the leader, locally when we lead.
pub async fn on_leader(shared: &Shared, req: &Request) -> Result<(), AskError> {
    if !shared.raft().is_leader() {
        return ask_leader(shared, None, req).await;
    }
    let resp = match req {
        Request::Join { member, info } => handle_join(shared, *member, info.clone()).await,
        Request::Promote { member } => handle_promote(shared, *member).await,
        Request::Leave { member } => handle_leave(shared, *member).await,
        _ => Response::Failed { reason: "not a group request".into() },
    };
    match resp {
        Response::Done => Ok(()),
        Response::Failed { reason } => Err(AskError::Refused(reason)),
        _ => Err(AskError::Transient("lost leadership while changing the membership".into())),
    }
}

/// [`on_leader`] until it succeeds or the leader refuses. The caller bounds
/// the time (the future is dropped on timeout).
pub async fn until_done(shared: &Shared, req: &Request) -> Result<(), String> {
    loop {
        match on_leader(shared, req).await {
            Ok(()) => return Ok(()),
            Err(AskError::Refused(e)) => return Err(e),
            Err(AskError::Myself) => debug!("The leader address is our own; retrying"),
            Err(AskError::Transient(e)) => {
                debug!("Group request ({}) will be retried: {e}", req.name())
            }
        }
        tokio::time::sleep(shared.retry_pause()).await;
    }
}

// ---- leader side ---------------------------------------------------------

pub(crate) enum Change {
    AddLearner(MemberId, MemberInfo),
    Promote(MemberId),
    Remove(MemberId),
    /// What a member tells about itself, changed (`pc.weight`, its site).
    SetInfo(MemberId, MemberInfo),
}

pub async fn handle_join(shared: &Shared, member: MemberId, info: MemberInfo) -> Response {
    if !shared.raft().is_leader() {
        return shared.not_leader();
    }
    let m = shared.metrics();
    if let Some(known) = m.membership_config.membership().get_node(&member) {
        // A retried join, or a member back with its durable identity that
        // the group never removed: it is in (the application learns of its
        // new incarnation through the ordered stream). Only its site may
        // have changed with its restart (`gmcast.segment` is read at start).
        if (known.segment, known.leader_segment) == (info.segment, info.leader_segment) {
            return Response::Done;
        }
        info!(
            "Member {member} ({}) is now in segment {} (leader segment {:?})",
            info.name, info.segment, info.leader_segment
        );
        let known = MemberInfo { segment: info.segment, leader_segment: info.leader_segment, ..known.clone() };
        return change_membership(shared, Change::SetInfo(member, known)).await;
    }
    info!("Member {member} ({}) at {} asks to join", info.name, info.group_addr);
    // A member listening where the joiner now listens is its previous
    // incarnation, dead since the joiner could bind that address: remove it
    // now rather than after the inactive timeout, so it is never picked as a
    // donor and does not weigh on quorum.
    let stale: Vec<MemberId> = m
        .membership_config
        .membership()
        .nodes()
        .filter(|(id, old)| **id != member && old.group_addr == info.group_addr)
        .map(|(id, _)| *id)
        .collect();
    for old in stale {
        info!("Member {old} at {} is replaced by its new incarnation {member}", info.group_addr);
        if let Response::Failed { reason } = remove_member(shared, old).await {
            warn!("Could not remove the previous incarnation {old}: {reason}");
        }
    }
    change_membership(shared, Change::AddLearner(member, info)).await
}

pub async fn handle_promote(shared: &Shared, member: MemberId) -> Response {
    if !shared.raft().is_leader() {
        return shared.not_leader();
    }
    let m = shared.metrics();
    let membership = m.membership_config.membership();
    if membership.get_node(&member).is_none() {
        return Response::Failed { reason: format!("member {member} is not in the group") };
    }
    if membership.voter_ids().any(|v| v == member) {
        return Response::Done;
    }
    change_membership(shared, Change::Promote(member)).await
}

pub async fn handle_leave(shared: &Shared, member: MemberId) -> Response {
    if !shared.raft().is_leader() {
        return shared.not_leader();
    }
    let m = shared.metrics();
    if m.membership_config.membership().get_node(&member).is_none() {
        return Response::Done;
    }
    remove_member(shared, member).await
}

/// Removes a voter or a learner (graceful leave and eviction).
pub async fn remove_member(shared: &Shared, member: MemberId) -> Response {
    let voters: BTreeSet<MemberId> = shared.metrics().membership_config.membership().voter_ids().collect();
    if voters.len() == 1 && voters.contains(&member) {
        return Response::Failed { reason: "the last voter cannot be removed".into() };
    }
    change_membership(shared, Change::Remove(member)).await
}

type WriteError = RaftError<crate::raft::types::GroupTypes, ClientWriteError<crate::raft::types::GroupTypes>>;

async fn apply_change(shared: &Shared, change: &Change) -> Result<(), WriteError> {
    let raft = shared.raft();
    match change {
        Change::AddLearner(id, info) => raft.add_learner(*id, info.clone(), false).await.map(drop),
        Change::Promote(id) => raft.change_membership(ChangeMembers::AddVoterIds([*id].into()), false).await.map(drop),
        Change::SetInfo(id, info) => {
            raft.change_membership(ChangeMembers::SetNodes([(*id, info.clone())].into()), false).await.map(drop)
        }
        Change::Remove(id) => {
            let is_voter = shared.metrics().membership_config.membership().voter_ids().any(|v| v == *id);
            // `retain = false`: a removed voter leaves the node list too.
            let members = if is_voter {
                ChangeMembers::RemoveVoters([*id].into())
            } else {
                ChangeMembers::RemoveNodes([*id].into())
            };
            raft.change_membership(members, false).await.map(drop)
        }
    }
}

/// Runs a membership change, waiting out a change already in flight (two
/// joiners at once, an eviction racing a promotion).
pub(crate) async fn change_membership(shared: &Shared, change: Change) -> Response {
    let deadline = tokio::time::Instant::now() + shared.request_timeout();
    loop {
        // A leader that lost its quorum appends the change but never commits
        // it: do not wait for that forever.
        let attempt = tokio::time::timeout_at(deadline, apply_change(shared, &change)).await;
        let err = match attempt {
            Ok(Ok(())) => return Response::Done,
            Ok(Err(e)) => e,
            Err(_) => return Response::Failed { reason: "the membership change did not commit in time".into() },
        };
        match &err {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                return Response::NotLeader { leader_addr: f.leader_node.as_ref().map(|n| n.group_addr.clone()) };
            }
            RaftError::APIError(ClientWriteError::ChangeMembershipError(e))
                if is_transient(e) && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(shared.retry_pause()).await;
            }
            _ => return Response::Failed { reason: err.to_string() },
        }
    }
}

fn is_transient<CLID, NID>(e: &ChangeMembershipError<CLID, NID>) -> bool
where
    CLID: openraft::vote::RaftCommittedLeaderId,
    NID: openraft::NodeId,
{
    matches!(e, ChangeMembershipError::InProgress(_) | ChangeMembershipError::UncommittedLeaderLog(_))
}

// ---- joiner side ---------------------------------------------------------

fn in_membership(shared: &Shared) -> bool {
    shared.metrics().membership_config.membership().get_node(&shared.me).is_some()
}

/// Peer addresses to try, without our own (gcomm:// lists usually include it).
fn candidate_peers(shared: &Shared, local: &str) -> Vec<String> {
    configured_peers(&shared.config, local)
}

/// The configured peers, without `local` or the addresses of `config.me`.
pub(crate) fn configured_peers(config: &crate::GroupConfig, local: &str) -> Vec<String> {
    let own = [config.listen_addr.as_str(), config.me.group_addr.as_str(), local];
    let mut peers: Vec<String> = Vec::new();
    for p in config.peers.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        if !own.contains(&p) && !peers.iter().any(|q| q == p) {
            peers.push(p.to_string());
        }
    }
    peers
}

async fn wait_until_member(shared: &Shared, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if in_membership(shared) {
            return true;
        }
        tokio::time::sleep(shared.retry_pause()).await;
    }
    false
}

/// Dials the configured peers until one of them gets us added as a learner.
///
/// A member back with its durable state may still be in the group's
/// membership (its group re-forms around it: Raft's own crash recovery) or
/// may have been removed while away; asking is harmless either way (the
/// leader answers at once for a member it has). It asks until it is in the
/// primary component.
pub async fn join_loop(shared: Arc<Shared>, local: String) {
    let mut peers = candidate_peers(&shared, &local);
    info!(
        "Member {} ({}) {} cluster '{}' via {peers:?}",
        shared.me,
        shared.config.me.name,
        if shared.restored { "rejoining" } else { "joining" },
        shared.config.cluster_name
    );
    let req = Request::Join { member: shared.me, info: shared.my_info() };
    let mut pause = shared.retry_pause();
    let mut warned: Option<Instant> = None;
    loop {
        let member = in_membership(&shared);
        if shared.is_primary() || (member && !shared.restored) {
            info!("Member {} ({}) is now part of the group", shared.me, shared.config.me.name);
            return;
        }
        if peers.is_empty() {
            if !member {
                error!(
                    "Cannot join cluster '{}': no peer address other than our own, \
                     and bootstrap was not requested",
                    shared.config.cluster_name
                );
                return;
            }
        } else {
            ask_peers(&shared, &mut peers, &req, &mut warned).await;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// Taking a member back after a spell out of the primary component.
///
/// The group removes a member it stopped hearing from (eviction after
/// `evs.suspect_timeout`, or a component formed without it), and the
/// removed member never learns it: the entry that removes it is not sent to
/// it. So a member that was in the primary component and has been out of it
/// for longer than `suspect` asks to join again, every few seconds, through
/// every address it knows: the configured peers and the members of the last
/// membership it saw (a node bootstrapped with an empty peer list knows the
/// others only from there). A group that still has it answers at once and
/// changes nothing; one that removed it adds it as a learner, its log catches
/// up from the leader's, and the engine takes the history it missed as IST.
/// This is Galera's merge of a partitioned node back into the primary
/// component, without a restart.
pub async fn rejoin_watch(shared: Arc<Shared>, local: String) {
    let period = Duration::from_secs(1).min(shared.suspect);
    let mut out_since: Option<Instant> = None;
    // Said once a spell: the wakes fall on a shared beat, so a window of
    // one period after `suspect` could fall between two of them.
    let mut said = false;
    loop {
        crate::beat::sleep_to_next(&shared, period).await;
        if shared.closed.load(std::sync::atomic::Ordering::Acquire) || shared.net.is_leaving() {
            return;
        }
        if shared.is_primary() {
            out_since = None;
            said = false;
            continue;
        }
        // Never primary yet: the join loop is at work. Isolated on purpose
        // (gmcast.isolate): asking would only fail.
        if !shared.ever_primary.load(std::sync::atomic::Ordering::Acquire) || shared.net.isolated() {
            continue;
        }
        let since = *out_since.get_or_insert_with(Instant::now);
        if since.elapsed() < shared.suspect {
            continue;
        }
        let peers = known_peers(&shared, &local);
        if !std::mem::replace(&mut said, true) {
            info!(
                "Member {} ({}) out of the primary component for {:?}: asking to be taken back via {peers:?}",
                shared.me,
                shared.config.me.name,
                since.elapsed()
            );
        }
        let req = Request::Join { member: shared.me, info: shared.my_info() };
        for addr in peers {
            if !in_our_group(&shared, &addr).await {
                continue;
            }
            match ask_leader(&shared, Some(addr.clone()), &req).await {
                Ok(()) => break,
                Err(e) => debug!("Could not rejoin via {addr} yet: {e}"),
            }
        }
    }
}

/// The configured peers, then the other members of the last membership
/// this member saw, without our own address.
fn known_peers(shared: &Shared, local: &str) -> Vec<String> {
    let mut peers = candidate_peers(shared, local);
    let m = shared.metrics();
    for (id, info) in m.membership_config.membership().nodes() {
        let addr = &info.group_addr;
        if *id != shared.me && !addr.is_empty() && !peers.contains(addr) {
            peers.push(addr.clone());
        }
    }
    peers
}

/// Whether a member out of the primary component may ask the peer at
/// `addr` to take it in. Once its state belongs to a known group (it was
/// live in it, or restored with it), only a peer live in that same group
/// may: one live in another group is refused when the connection is made
/// (`NetCtx::check_moved_on`), and one not live yet, or whose engine has
/// not announced its group yet, is asked on a later round. A fresh
/// connection each time: a pooled one tells the group of when it was made.
async fn in_our_group(shared: &Shared, addr: &str) -> bool {
    if shared.net.former_group().is_none() || shared.net.group().is_some() {
        return true;
    }
    match shared.net.live_group_at(addr).await {
        Ok(group) => group.is_some(),
        // Ours: `ask_leader` drops it from the list.
        Err(CallError::Myself) => true,
        Err(e) => {
            debug!("Not asking {addr} to take us in: {e}");
            false
        }
    }
}

/// One round of join requests to the peers.
async fn ask_peers(shared: &Shared, peers: &mut Vec<String>, req: &Request, warned: &mut Option<Instant>) {
    for addr in peers.clone() {
        if !in_our_group(shared, &addr).await {
            continue;
        }
        match ask_leader(shared, Some(addr.clone()), req).await {
            Ok(()) if wait_until_member(shared, shared.request_timeout()).await => return,
            Ok(()) => debug!("Join via {addr} accepted; the new membership has not reached us yet"),
            Err(AskError::Myself) => peers.retain(|p| *p != addr),
            // A restored member's wait is reported by the quorum watch.
            Err(e) if shared.restored => debug!("Could not rejoin via {addr} yet: {e}"),
            Err(e) => report_join_failure(warned, &addr, &e),
        }
    }
}

/// Peers come up in any order: one warning every ten seconds is enough.
fn report_join_failure(warned: &mut Option<Instant>, addr: &str, e: &AskError) {
    if warned.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
        warn!("Could not join via {addr} yet: {e}");
        *warned = Some(Instant::now());
    } else {
        debug!("Could not join via {addr} yet: {e}");
    }
}

/// Graceful leave, run on the leaving member; bounded by the caller.
pub async fn leave(shared: &Shared) -> Result<(), String> {
    let me = shared.me;
    let m = shared.metrics();
    let membership = m.membership_config.membership();
    if membership.get_node(&me).is_none() {
        return Ok(());
    }
    let voters: Vec<MemberId> = membership.voter_ids().collect();
    if voters == [me] {
        info!("Member {me} is the last voter: leaving ends the group");
        return Ok(());
    }
    info!("Member {me} ({}) leaving the group", shared.config.me.name);
    shared.net.set_leaving();
    if !shared.is_primary() {
        return leave_without_primary(shared).await;
    }
    if m.current_leader == Some(me) {
        hand_over_leadership(shared, &voters).await;
    }
    let left = until_done(shared, &Request::Leave { member: me }).await;
    // Followers this member handed payloads back to read all of them, and
    // close, before it stops: what is still in a connection it closes is
    // lost.
    if !shared.forwards.wait_closed(FOLLOWERS_CLOSE_WAIT).await {
        info!("Member {me}: a follower kept its forwarding connection open; leaving anyway");
    }
    left
}

/// The leave of a member out of the primary component: cut off, isolated
/// (`gmcast.isolate`), or while a new leader is being elected. There may
/// be no leader to let it go, and waiting for one held the server's stop
/// for the whole leave timeout (10 s) only to give up. So one try, then it
/// goes: the others remove it once they find it silent, as Galera's do a
/// node that stopped while cut off. No hand-over either: a leader without
/// its quorum has no successor it could hand over to.
async fn leave_without_primary(shared: &Shared) -> Result<(), String> {
    let asked = if shared.raft().is_leader() {
        // Its own removal could not commit without the quorum it lost.
        Err(AskError::Transient("this leader lost its quorum".into()))
    } else {
        on_leader(shared, &Request::Leave { member: shared.me }).await
    };
    asked.map_err(|e| {
        format!("not primary, and no leader let this member go ({e}); the others remove it once they find it silent")
    })
}

/// How long a leaving leader waits for its successor to take over.
const HAND_OVER_WAIT: Duration = Duration::from_secs(2);
/// How long a hand-over waits for payloads being handed to the Raft core
/// now (one waiting for room longer reads the flag, and hands its payloads
/// back).
const APPENDERS_WAIT: Duration = Duration::from_millis(500);
/// How long a leaving member waits for the followers it handed payloads
/// back to to read them and close (each closes once it sees the first).
const FOLLOWERS_CLOSE_WAIT: Duration = Duration::from_secs(3);
/// How long one try of the transfer waits for the successor to be elected.
/// openraft's successor ignores a transfer while its log lacks any of the
/// leader's entries, so a hand-over under load may take more than one.
const TRANSFER_TRY: Duration = Duration::from_millis(400);

/// A leader that removed itself would leave the others without one until
/// their election timeout (up to `evs.suspect_timeout`): seconds in which
/// no commit is ordered, for a planned stop, and a lost primary component
/// when the election takes longer still. Instead it names the most
/// up-to-date other voter, which stands for election at once. Best effort: if no successor
/// takes over in time, the leave goes on and the others elect one as usual.
async fn hand_over_leadership(shared: &Shared, voters: &[MemberId]) {
    let me = shared.me;
    let m = shared.metrics();
    let matched = |id: &MemberId| m.replication.as_ref().and_then(|r| r.get(id).cloned().flatten());
    let Some(successor) = voters.iter().filter(|v| **v != me).max_by_key(|v| matched(v)).copied() else {
        return;
    };
    if transfer_leadership(shared, successor, HAND_OVER_WAIT).await {
        info!("Member {me} handed the leadership over to {successor}");
    } else {
        info!("Member {me}: no successor took the leadership over within {HAND_OVER_WAIT:?}; leaving anyway");
    }
}

/// Hands this leader's leadership to `successor`, trying for up to `wait`;
/// whether another member leads now. Sets `Shared::handing_over` for good:
/// the Raft core, once asked, drops what it is given until its leadership
/// ends, so whoever goes on as a member clears it only after that (see
/// `placement`). Before the others hear of it: the successor is elected
/// with votes that ignore this leader's lease. And from now on nothing more
/// goes into the core: payloads are handed back or queued for the successor.
pub(crate) async fn transfer_leadership(shared: &Shared, successor: MemberId, wait: Duration) -> bool {
    let me = shared.me;
    shared.handing_over.store(true, std::sync::atomic::Ordering::SeqCst);
    shared.in_core.wait_for_appenders(APPENDERS_WAIT).await;
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        until_caught_up(shared, successor, deadline).await;
        if let Err(e) = shared.raft().trigger().transfer_leader(successor).await {
            warn!("Could not hand the leadership over to {successor}: {e}");
            return false;
        }
        let try_ends = (Instant::now() + TRANSFER_TRY).min(deadline);
        if until_metrics(shared, try_ends, |m| m.current_leader.is_some_and(|l| l != me)).await {
            return true;
        }
    }
    false
}

/// Waits, until `deadline` at most, for `successor` to hold every entry in
/// this leader's log: the transfer is ignored otherwise.
async fn until_caught_up(shared: &Shared, successor: MemberId, deadline: Instant) {
    until_metrics(shared, deadline, |m| {
        let matched = m.replication.as_ref().and_then(|r| r.get(&successor).cloned().flatten());
        matched.map(|l| l.index) >= m.last_log_index
    })
    .await;
}

/// Waits until `holds` is true of openraft's metrics, or `until` passes;
/// whether it held. Woken by each change of the metrics, not by polling.
pub(crate) async fn until_metrics(
    shared: &Shared,
    until: Instant,
    holds: impl Fn(&crate::raft::types::Metrics) -> bool,
) -> bool {
    use openraft::async_runtime::WatchReceiver;
    let mut metrics = shared.raft().metrics();
    loop {
        if shared.with_metrics(&holds) {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        // A stopped Raft changes nothing any more: wait out the time.
        if let Ok(Err(_)) = tokio::time::timeout(left, metrics.changed()).await {
            tokio::time::sleep(left).await;
        }
    }
}
