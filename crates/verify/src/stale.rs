//! Real-time stale reads: a read that misses a write acknowledged before
//! its transaction began. Where the server synced that read
//! (`wsrep_sync_wait`), a synchronous cluster promises none; elsewhere
//! they are what a node's apply lag allows, and are counted apart.

use std::collections::BTreeMap;

use crate::history::{History, Key, Op, Outcome};
use crate::report::{Kind, Report};
use crate::versions::Versions;

/// For each key, for each position of its order: the earliest
/// acknowledgement among the versions from that position on, and the txn
/// (index) acknowledged then.
fn earliest_from(history: &History, v: &Versions<'_>) -> BTreeMap<Key, Vec<Option<(u64, usize)>>> {
    let mut out = BTreeMap::new();
    for (key, order) in &v.orders {
        let mut suffix: Vec<Option<(u64, usize)>> = vec![None; order.len() + 1];
        for (j, value) in order.iter().enumerate().rev() {
            let here = v.writer(*key, *value).and_then(|w| history.txns[w.txn].acknowledged_at().map(|at| (at, w.txn)));
            suffix[j] = match (here, suffix[j + 1]) {
                (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
                (a, b) => a.or(b),
            };
        }
        out.insert(*key, suffix);
    }
    out
}

pub fn check(history: &History, v: &Versions<'_>, report: &mut Report) {
    let earliest = earliest_from(history, v);
    for txn in history.txns.iter().filter(|t| t.outcome == Outcome::Ok) {
        for op in &txn.ops {
            let Op::Read { key, values, synced } = op else { continue };
            // A list off the order is reported as such; its staleness is moot.
            if !v.is_prefix(*key, values) {
                continue;
            }
            let Some(Some((acked, writer))) = earliest.get(key).map(|s| s[values.len()]) else { continue };
            if acked < txn.invoked {
                let kind = if *synced { Kind::StaleSynced } else { Kind::StaleUnsynced };
                let missed = history.txns[writer].id;
                report.add(
                    kind,
                    vec![txn.id, missed],
                    format!(
                        "txn {} read key {key} without txn {missed}'s append, acknowledged before it began",
                        txn.id
                    ),
                );
            }
        }
    }
}
