//! A fault round with bank tellers, as the partition and WAN tests run it:
//! the cut side refuses, the whole cluster serves again once healed, and
//! each round's outcomes join a ledger checked against every node.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tandem::cluster::Cluster;

use crate::bank::{Bank, Ledger};
use crate::{sql, status, status_i64, wait_for};

/// What a node outside the primary component answers a statement with.
pub const NOT_READY: &str = "WSREP has not yet prepared node for application use";

/// Node `i` is out of the primary component and refuses statements.
/// Returns when it was first seen refusing: a teller's acknowledgement
/// after that would be a second primary component.
pub fn refuses(c: &Cluster, i: usize, settle: Duration) -> Result<Instant> {
    let node = c.node(i).clone();
    wait_for(&format!("node {i} to leave the primary component"), settle, || {
        Ok(status(&node, "wsrep_cluster_status")? != "Primary")
    })?;
    let mut refused_at = None;
    wait_for(&format!("node {i} to refuse statements"), settle, || {
        let at = Instant::now();
        let refused = matches!(sql(&node, "SELECT COUNT(*) FROM bank.account"), Err(e) if e.contains(NOT_READY));
        refused_at = refused.then_some(at);
        Ok(refused)
    })?;
    Ok(refused_at.expect("set when the wait succeeded"))
}

/// Every node back in one primary component of all of them, synced, and
/// each node's teller acknowledged again.
pub fn whole_again(c: &mut Cluster, bank: &Bank, settle: Duration) -> Result<()> {
    let n = c.len();
    for i in 1..=n {
        c.wait_synced(i, settle)?;
        let node = c.node(i).clone();
        wait_for(&format!("node {i} in a primary component of {n}"), settle, || {
            Ok(status(&node, "wsrep_cluster_status")? == "Primary"
                && status_i64(&node, "wsrep_cluster_size")? == n as i64)
        })?;
    }
    for i in 1..=n {
        bank.wait_acks(i, 3, settle)?;
    }
    Ok(())
}

/// Stops the round's tellers, adds their outcomes to `ledger` and checks
/// every node against all rounds so far. Returns the round's acknowledged
/// and in-doubt counts.
pub fn close(ledger: &mut Ledger, c: &Cluster, name: &str, bank: Bank) -> Result<(usize, usize)> {
    let round = bank.stop();
    let counts = (round.acked.len(), round.doubtful.len());
    ledger.add(round);
    ledger.verify(c).with_context(|| format!("after the {name}"))?;
    Ok(counts)
}
