//! The end of a run: every node holds the same commits, in the same order,
//! each transaction once, every acknowledged one among them, each
//! client's in the order it was told of them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::node::SimNode;
use super::world::{wait_for, World, HOSTS};
use super::writer::Writer;
use crate::common::{db_of, Commit};

/// Stops the writers, waits until every node holds the same commits, and
/// checks them. Returns how many transactions were acknowledged.
pub fn end_of_run(world: &World, nodes: &[SimNode], writers: &[Arc<Writer>]) -> Result<usize, String> {
    writers.iter().for_each(|w| w.stop());
    for w in writers {
        wait_for(world, "the writers' last transaction", Duration::from_secs(30), || w.finished())?;
    }
    let logs = || nodes.iter().map(|n| n.server.commits.lock().clone()).collect::<Vec<_>>();
    let diverged = std::cell::RefCell::new(None);
    let same = wait_for(world, "the same commits on every node", Duration::from_secs(30), || {
        let logs = logs();
        *diverged.borrow_mut() = first_divergence(nodes, &logs);
        diverged.borrow().is_some() || logs.windows(2).all(|w| w[0] == w[1])
    });
    if let Some(why) = diverged.into_inner() {
        return Err(why);
    }
    if let Err(why) = same {
        let ends: Vec<String> =
            logs().iter().map(|l| format!("{} commits to {:?}", l.len(), l.last().map(|c| c.seqno))).collect();
        return Err(format!("{why}: {}", ends.join("; ")));
    }
    for n in nodes {
        let db = n.server.db.lock().clone();
        if db != db_of(&n.server.commits.lock()) {
            return Err(format!("{}: its rows are not what its commits add up to", HOSTS[n.host]));
        }
    }
    check_history(&logs().remove(0), writers)?;
    let mut by_work: BTreeMap<String, usize> = BTreeMap::new();
    for w in writers {
        *by_work.entry(format!("{:?}", w.work)).or_default() += w.acked();
    }
    eprintln!("acknowledged, by kind of work: {by_work:?}");
    if let Some((work, _)) = by_work.iter().find(|(_, n)| **n == 0) {
        return Err(format!("no client's {work} was acknowledged: the run shows nothing of them"));
    }
    Ok(writers.iter().map(|w| w.acked()).sum())
}

/// Where two nodes' commits differ other than by one being behind: they
/// will never be the same (no node is caught up by a transfer at the end
/// of a run, so a node's commits only grow).
fn first_divergence(nodes: &[SimNode], logs: &[Vec<Commit>]) -> Option<String> {
    for (i, a) in logs.iter().enumerate() {
        for (j, b) in logs.iter().enumerate().skip(i + 1) {
            if let Some(k) = (0..a.len().min(b.len())).find(|&k| a[k] != b[k]) {
                return Some(format!(
                    "{} and {} diverged at their commit {k}: {:?} against {:?}",
                    HOSTS[nodes[i].host], HOSTS[nodes[j].host], a[k], b[k]
                ));
            }
        }
    }
    None
}

/// `commits` in seqno order, each transaction once, and every
/// acknowledged transaction in them, in the order its client was told.
pub fn check_history(commits: &[Commit], writers: &[Arc<Writer>]) -> Result<(), String> {
    if let Some(w) = commits.windows(2).find(|w| w[0].seqno >= w[1].seqno) {
        return Err(format!("seqno {} committed after seqno {}", w[1].seqno, w[0].seqno));
    }
    let mut at: BTreeMap<u64, i64> = BTreeMap::new();
    for c in commits {
        if let Some(first) = at.insert(c.trx_id, c.seqno) {
            return Err(format!("transaction {:#x} committed twice: at seqno {first} and {}", c.trx_id, c.seqno));
        }
    }
    for w in writers {
        let mut last = (0, -1);
        for trx in w.acked_ids() {
            let Some(&seqno) = at.get(&trx) else {
                return Err(format!("acknowledged transaction {trx:#x} (row {}) is on no node", w.row));
            };
            if seqno <= last.1 {
                return Err(format!(
                    "acknowledged transaction {trx:#x} at seqno {seqno}, before {:#x} at {} acknowledged earlier",
                    last.0, last.1
                ));
            }
            last = (trx, seqno);
        }
    }
    Ok(())
}
