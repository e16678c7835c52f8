//! Whether the cluster moved on to a new history while this member was
//! away.
//!
//! A member restarted with durable state rejoins the group that state
//! belongs to. If, meanwhile, a node bootstrapped the cluster anew from data
//! with no saved position (Galera starts a new history then, and so do we),
//! the members it reaches are live in another group, and that state can
//! never rejoin it: Raft would meet a log of another group under the same
//! member id. Galera's node would simply join the new primary component and
//! take a full state transfer. So before opening its state for good, a
//! restored member asks its peers which group they are live in; one live in
//! a group other than the one the state belongs to means the state is set
//! aside and the member joins as a new one. The engine sees the other
//! history and asks for a state transfer.
//!
//! The group a state belongs to is recorded beside it each time the member
//! enters a primary component of another group (`BLOB_GROUP`); when that
//! record is missing, the history of the local data (the engine's saved
//! position) stands in.
//!
//! Peers that do not answer in [`PROBE_TIME`] (each) decide nothing: the member
//! starts with its state, and if it later meets the new group the
//! connection is refused with what to do (`NetCtx::check_moved_on`).
//!
//! The group may also have gone on without this member under the same
//! group uuid, while this member formed a component of its own: alone, cut
//! off under `pc.ignore_quorum` or `pc.ignore_sb`, it was the only voter of
//! its membership. Started again with that state, it would elect itself at
//! once, and two primary components would order different histories under
//! one uuid. So a member whose state says it was the only voter, and that
//! finds a peer live in its group, sets the state aside too and joins that
//! peer's component as a new member, as a restarted Galera node joins the
//! primary component it finds; the engine then catches its data up from
//! its position (by IST when the group's log still reaches it). The voters
//! are recorded beside the state each time they change (`BLOB_VOTERS`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use log::debug;

use crate::transport::handshake::uuid_text;
use crate::transport::{NetCtx, TlsMode};
use crate::wire::Hello;
use crate::{GroupConfig, MemberId};

/// How long a restored member waits for its peers' answers before it opens
/// its state anyway. A peer that is up answers on loopback in milliseconds;
/// one that is down refuses the connection at once.
pub const PROBE_TIME: Duration = Duration::from_secs(2);

/// Why the restored state of `member`, which belongs to group `ours`, must
/// be set aside, if a peer is live in another group, or, when `alone` (the
/// state's member was the only voter of its component), in this one.
pub fn check(config: &GroupConfig, member: MemberId, ours: [u8; 16], alone: bool) -> Option<String> {
    let peers = crate::join::configured_peers(config, "");
    if config.bootstrap || peers.is_empty() {
        return None;
    }
    let live = probe(config, member, &peers);
    verdict(&live, ours, alone)
}

/// The decision on the peers' answers: (address, group it is live in).
fn verdict(live: &[(String, [u8; 16])], ours: [u8; 16], alone: bool) -> Option<String> {
    if let Some((addr, theirs)) = live.iter().find(|(_, g)| *g != ours) {
        return Some(format!(
            "the cluster moved on: the member at {addr} is live in group {}, while this state belongs to \
             group {} (a node bootstrapped a new history meanwhile)",
            uuid_text(theirs),
            uuid_text(&ours)
        ));
    }
    let (addr, _) = live.iter().find(|_| alone)?;
    Some(format!(
        "the group went on without this member: its state is of a primary component it was the only \
         voter of (formed alone, or cut off under pc.ignore_quorum or pc.ignore_sb), while the member at \
         {addr} is live in group {} without it; joining that component as a new member",
        uuid_text(&ours)
    ))
}

/// (address, live group) of each peer that answered in time and is live.
fn probe(config: &GroupConfig, member: MemberId, peers: &[String]) -> Vec<(String, [u8; 16])> {
    // A certificate that cannot be loaded decides nothing here: the start
    // loads it again and stops with the reason.
    let Ok(tls) = TlsMode::load(config.tls.as_ref()) else {
        return vec![];
    };
    // The probe runs on a thread and a runtime of its own, which a
    // simulation's network cannot reach: there it decides nothing (a gap
    // docs/simulation.md lists).
    if config.wires.is_some() {
        debug!("Not asking the peers which group they are live in: the network is a given one");
        return vec![];
    }
    let hello = Hello { cluster: config.cluster_name.clone(), member, info: config.me.clone(), group: None };
    let net = Arc::new(
        NetCtx::new(hello, PROBE_TIME, tls, None).over(config.wires.clone()).dialling_from(&config.listen_addr),
    );
    let peers = peers.to_vec();
    // On a thread of its own: the caller may stand inside an async context,
    // where a runtime can neither be started nor dropped.
    let asked = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        let answers = runtime.block_on(async {
            let net = &net;
            // Each peer has its own deadline: one that hangs must not hide
            // the answer of one that is live in another group.
            let asks = peers.iter().map(|addr| async move {
                let answer = tokio::time::timeout(PROBE_TIME, net.live_group_at(addr)).await;
                debug!("Peer {addr} is live in group {answer:?}");
                (addr.clone(), answer.ok())
            });
            join_all(asks).await
        });
        Some(answers)
    })
    .join()
    .ok()
    .flatten()
    .unwrap_or_default();
    asked.into_iter().filter_map(|(addr, answer)| Some((addr, answer?.ok()??))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: [u8; 16] = [1; 16];
    const THEIRS: [u8; 16] = [2; 16];

    fn live(group: [u8; 16]) -> Vec<(String, [u8; 16])> {
        vec![("127.0.0.1:4567".to_string(), group)]
    }

    #[test]
    fn a_peer_live_in_another_group_sets_any_state_aside() {
        let why = verdict(&live(THEIRS), OURS, false).expect("set aside");
        assert!(why.contains("the cluster moved on"), "{why}");
        assert!(verdict(&live(THEIRS), OURS, true).is_some());
    }

    #[test]
    fn a_peer_live_in_our_group_sets_aside_only_a_state_that_voted_alone() {
        assert_eq!(verdict(&live(OURS), OURS, false), None, "a member of the group rejoins it with its state");
        let why = verdict(&live(OURS), OURS, true).expect("a component of its own is set aside");
        assert!(why.contains("the group went on without this member"), "{why}");
        assert!(why.contains("127.0.0.1:4567"), "{why}");
    }

    #[test]
    fn no_live_peer_decides_nothing() {
        assert_eq!(verdict(&[], OURS, true), None, "alone and no one live: it starts the group again");
    }
}
