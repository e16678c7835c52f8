//! Certification: the first-committer-wins rule.
//!
//! Every node runs [`Certifier::certify`] on every write-set in the same total
//! order, so all nodes reach the same verdict without exchanging votes. The
//! index remembers, for each key and each key type, the last write-set that
//! used it; an incoming write-set conflicts with one it could not have seen.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::types::{Seqno, Uuid, SEQNO_UNDEFINED};
use crate::writeset::{KeyType, WriteSet};

/// What an earlier use of a key means for a new one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Clash {
    /// No ordering needed.
    None,
    /// The new write-set must apply after the earlier one.
    Depend,
    /// The two cannot both commit unless the earlier one was already visible.
    Conflict,
}

use Clash::{Conflict as C, Depend as D, None as N};

/// `MATRIX[earlier][incoming]`, indexed by `KeyType as usize`
/// (Shared, Reference, Update, Exclusive). Galera's key-type matrix.
pub const MATRIX: [[Clash; 4]; 4] = [
    //            SH  RE  UP  EX   <- incoming
    /* SH */ [N, N, D, D],
    /* RE */ [N, N, D, C],
    /* UP */ [D, D, C, C],
    /* EX */ [C, C, C, C],
];

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Use {
    seqno: Seqno,
    source: Uuid,
    /// The source's incarnation: its local locks, which spare a node's own
    /// write-sets from conflicting with each other, died with the process.
    incarnation: u32,
    toi: bool,
}

impl Use {
    /// The same process sent both: its row locks ordered them already, so
    /// the later one did see the earlier one even if `last_seen` lags.
    fn serialized_locally(&self, ws: &WriteSet, incarnation: u32) -> bool {
        !self.toi && self.source == ws.source && self.incarnation == incarnation
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Certified: may commit once `depends_on` has committed.
    Pass { depends_on: Seqno },
    /// Lost against an earlier write-set it could not see.
    Fail,
}

/// Key index plus the few scalars certification needs. Part of the replicated
/// state: a joiner receives it in the group snapshot.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Certifier {
    index: HashMap<Vec<u8>, [Option<Use>; 4]>,
    /// Write-sets at or below this seqno were dropped from the index.
    purged_upto: Seqno,
    /// Last write-set that must not apply in parallel with later ones
    /// (TOI or PA_UNSAFE): everything after depends on it.
    last_barrier: Seqno,
}

impl Certifier {
    pub fn new(position: Seqno) -> Certifier {
        Certifier { index: HashMap::new(), purged_upto: position, last_barrier: SEQNO_UNDEFINED }
    }

    pub fn index_size(&self) -> usize {
        self.index.len()
    }

    /// Certifies `ws`, ordered at `seqno` and sent by `incarnation` of its
    /// source, and indexes it if it passes.
    pub fn certify(&mut self, ws: &WriteSet, seqno: Seqno, incarnation: u32) -> Verdict {
        let verdict = if ws.is_toi() || ws.is_stream_rollback() {
            // TOI runs alone on every node: it waits for everything before it.
            // A rollback fragment only removes what its transaction did: it
            // cannot conflict, and it waits in the same way.
            Verdict::Pass { depends_on: seqno - 1 }
        } else {
            self.test(ws, seqno, incarnation)
        };
        if let Verdict::Pass { .. } = verdict {
            self.index_keys(ws, seqno, incarnation);
            if ws.is_toi() || ws.is_pa_unsafe() {
                self.last_barrier = seqno;
            }
        }
        verdict
    }

    fn test(&self, ws: &WriteSet, seqno: Seqno, incarnation: u32) -> Verdict {
        // Uses between last_seen and the purge point are gone: we cannot prove
        // there was no conflict, so fail. Every node purges identically.
        if ws.last_seen < self.purged_upto {
            return Verdict::Fail;
        }
        let mut depends_on = self.last_barrier.max(self.purged_upto);
        for (path, kind) in expand(ws) {
            let Some(uses) = self.index.get(&path) else { continue };
            for earlier in KeyType::ALL {
                let Some(u) = uses[earlier as usize] else { continue };
                match MATRIX[earlier as usize][kind as usize] {
                    Clash::None => {}
                    Clash::Conflict if u.seqno > ws.last_seen && !u.serialized_locally(ws, incarnation) => {
                        return Verdict::Fail;
                    }
                    Clash::Conflict | Clash::Depend => depends_on = depends_on.max(u.seqno),
                }
            }
        }
        // The fragments of one streaming transaction run on one applier of
        // the server, one after the other. Serialising a fragment after
        // everything before it is more than that needs, but it is simple,
        // and each fragment still applies in parallel with what comes after.
        if ws.is_pa_unsafe() || ws.continues_stream() {
            depends_on = seqno - 1;
        }
        Verdict::Pass { depends_on: depends_on.min(seqno - 1) }
    }

    fn index_keys(&mut self, ws: &WriteSet, seqno: Seqno, incarnation: u32) {
        let u = Use { seqno, source: ws.source, incarnation, toi: ws.is_toi() };
        for (path, kind) in expand(ws) {
            self.index.entry(path).or_default()[kind as usize] = Some(u);
        }
    }

    /// Forgets uses at or below `upto` (no transaction that could still be
    /// certified has `last_seen` below it). Must be called at the same point of
    /// the total order on every node.
    pub fn purge(&mut self, upto: Seqno) {
        if upto <= self.purged_upto {
            return;
        }
        self.index.retain(|_, uses| uses.iter().flatten().any(|u| u.seqno > upto));
        self.purged_upto = upto;
    }

    pub fn purged_upto(&self) -> Seqno {
        self.purged_upto
    }
}

/// A key (db, table, row) is also a use of its prefixes (db) and (db, table):
/// the branches as REFERENCE, the leaf with the key's own type. That makes a
/// row write clash with TOI on its table or database.
fn expand(ws: &WriteSet) -> impl Iterator<Item = (Vec<u8>, KeyType)> + '_ {
    ws.keys.iter().flat_map(|key| {
        let n = key.parts.len();
        (1..=n).map(move |depth| {
            let kind = if depth == n { key.kind } else { KeyType::Reference };
            (encode_path(&key.parts[..depth]), kind)
        })
    })
}

/// Length-prefixed so that ("ab","c") and ("a","bc") differ.
fn encode_path(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for p in parts {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

#[cfg(test)]
#[path = "certification_tests.rs"]
mod tests;
