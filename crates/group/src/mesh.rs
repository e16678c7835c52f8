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
use std::sync::Arc;
use std::time::Duration;

use log::debug;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::shared::Shared;
use crate::wire::Request;
use crate::MemberId;

/// Galera's `evs.keepalive_period` default; quicker with test timeouts.
fn period(shared: &Shared) -> Duration {
    shared.config.timeouts.heartbeat.clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// How often the membership is looked at: a new member is greeted within
/// this, not a whole `period` later (a node that just joined may be asked to
/// fail over, or its peer to reload its certificate, right away).
const LOOK: Duration = Duration::from_millis(50);

pub async fn run(shared: Arc<Shared>) {
    let period = period(&shared);
    // Per peer: its keepalive in flight (one at a time: a peer slower than
    // `period` must not collect a queue of them) and when the next is due.
    let mut peers: BTreeMap<MemberId, (Option<JoinHandle<()>>, Instant)> = BTreeMap::new();
    loop {
        tokio::time::sleep(LOOK).await;
        let now = Instant::now();
        let members = members(&shared);
        peers.retain(|id, _| members.iter().any(|(m, _)| m == id));
        for (id, addr) in members {
            let (in_flight, due) = peers.entry(id).or_insert((None, now));
            if *due > now || in_flight.as_ref().is_some_and(|t| !t.is_finished()) {
                continue;
            }
            *due = now + period;
            *in_flight = Some(tokio::spawn(keepalive(shared.clone(), id, addr)));
        }
    }
}

/// Connections kept open to each peer. One request is in flight per
/// connection, and a leader may have its replication stream, its heartbeats
/// and a leadership transfer or a forward going to one peer at once: with
/// this many open, none of them waits for a handshake.
const WARM: usize = 3;

/// `WARM` keepalives at once, so that as many connections stay open (each
/// takes an idle pooled one, or opens one).
async fn keepalive(shared: Arc<Shared>, id: MemberId, addr: String) {
    let timeout = shared.request_timeout();
    let calls = (0..WARM).map(|_| shared.net.call(&addr, Some(id), &Request::Keepalive, timeout));
    for result in futures_util::future::join_all(calls).await {
        if let Err(e) = result {
            // Refusals are logged (rate-limited) where connections are made.
            debug!("Keepalive to member {id} at {addr}: {e}");
        }
    }
}

/// The other members of the current configuration, voters and learners.
fn members(shared: &Shared) -> Vec<(MemberId, String)> {
    let m = shared.metrics();
    let membership = m.membership_config.membership();
    membership.nodes().filter(|(id, _)| **id != shared.me).map(|(id, info)| (*id, info.group_addr.clone())).collect()
}
