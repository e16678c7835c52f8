//! Every member keeps a connection open to every other member, as Galera's
//! gmcast keeps a full mesh.
//!
//! Raft alone talks leader-to-follower: two followers never connect until
//! one of them stands for election. Then that first connection costs a TLS
//! handshake in the middle of a failover, and it is made with whatever
//! certificate the members hold *now*: after `socket.ssl_reload` to a
//! certificate its peers will not take, a member that only ever talked to
//! the leader is cut off from the others the moment the leader goes, where
//! a Galera node keeps its open links. So each member says hello to each
//! other member once a `period`, over the pooled connection (the same one
//! Raft's requests use), which also tells `wsrep_group_links` about every
//! pair, not just the leader's.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use log::debug;
use openraft::async_runtime::WatchReceiver;
use tokio::task::JoinHandle;

use crate::raft::types::StoredMembership;
use crate::shared::Shared;
use crate::MemberId;

/// Galera's `evs.keepalive_period` default; quicker with test timeouts.
fn period(shared: &Shared) -> Duration {
    shared.config.timeouts.heartbeat.clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// How long to wait before looking at a Raft instance again once the one
/// watched stopped while the member runs on (it was replaced).
const RETRY: Duration = Duration::from_millis(50);

/// Keeps one greeter per other member: started when a membership names it
/// (a new member is greeted at once: a node that just joined may be asked
/// to fail over, or its peer to reload its certificate, right away),
/// stopped when none does. Woken by Raft's server metrics, which change
/// with the membership, the leader or the vote: not by a clock.
pub async fn run(shared: Arc<Shared>) {
    let period = period(&shared);
    let mut greeters: BTreeMap<MemberId, (String, JoinHandle<()>)> = BTreeMap::new();
    let mut server = shared.raft().server_metrics();
    loop {
        let members = members(&shared, &server.borrow_watched().membership_config);
        greeters.retain(|id, (addr, greeter)| {
            let named = members.iter().any(|(m, a)| m == id && a == addr);
            if !named {
                greeter.abort();
            }
            named
        });
        for (id, addr) in members {
            greeters.entry(id).or_insert_with(|| (addr.clone(), tokio::spawn(greet(shared.clone(), id, addr, period))));
        }
        if server.changed().await.is_err() {
            if shared.closed.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(RETRY).await;
            server = shared.raft().server_metrics();
        }
    }
    greeters.values().for_each(|(_, greeter)| greeter.abort());
}

/// Says hello to one peer once a `period`, one keepalive at a time (a peer
/// slower than `period` must not collect a queue of them), on the member's
/// beat, so that the greeters of all peers go out on one wake-up.
///
/// Each keepalive is a task of its own, so that stopping the greeter (the
/// membership no longer names the peer) lets the one in flight run to its
/// end: dropped halfway, it would close a connection in the middle of its
/// handshake, which the peer has to log.
async fn greet(shared: Arc<Shared>, id: MemberId, addr: String, period: Duration) {
    loop {
        let _ = tokio::spawn(keepalive(shared.clone(), id, addr.clone())).await;
        crate::beat::sleep_to_next(&shared, period).await;
    }
}

/// Connections kept open to each peer. One request is in flight per
/// connection, and a leader may have its replication stream, its heartbeats
/// and a leadership transfer or a forward going to one peer at once; and a
/// follower's forwarding link to its leader is one of these, taken from the
/// pool (`NetCtx::open`): with this many open, none of them waits for a
/// handshake.
const WARM: usize = 4;

/// Keeps `WARM` connections open: opens those missing, or else touches
/// the idle one used longest ago (`NetCtx::keepalive` says why one at a
/// time).
async fn keepalive(shared: Arc<Shared>, id: MemberId, addr: String) {
    let timeout = shared.request_timeout();
    for e in shared.net.keepalive(&addr, id, WARM, timeout).await {
        // Refusals are logged (rate-limited) where connections are made.
        debug!("Keepalive to member {id} at {addr}: {e}");
    }
}

/// Opens the links still missing to every other member now, each to
/// `WARM`, rather than at their greeters' next turn: before a certificate
/// reload, so that the links made with the identity in force are there.
pub async fn warm_all(shared: &Arc<Shared>) {
    let config = shared.raft().server_metrics().borrow_watched().membership_config.clone();
    let warming = members(shared, &config).into_iter().map(|(id, addr)| keepalive(shared.clone(), id, addr));
    futures_util::future::join_all(warming).await;
}

/// The other members of `config`, voters and learners.
fn members(shared: &Shared, config: &StoredMembership) -> Vec<(MemberId, String)> {
    let membership = config.membership();
    membership.nodes().filter(|(id, _)| **id != shared.me).map(|(id, info)| (*id, info.group_addr.clone())).collect()
}
