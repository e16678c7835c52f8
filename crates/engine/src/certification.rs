//! Certification: the first-committer-wins rule.
//!
//! Every node runs [`Certifier::certify`] on every write-set in the same total
//! order, so all nodes reach the same verdict without exchanging votes. The
//! index remembers, for each key and each key type, the last write-set that
//! used it; an incoming write-set conflicts with one it could not have seen.

use std::collections::{BTreeMap, HashMap};

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
    /// No later write-set of its source is spared against this one: a TOI
    /// (not ordered by row locks), or one sent under an older lock session
    /// than its source's newest already ordered, which a late forward can
    /// order after newer ones (its locks were gone when the newer ones
    /// were sent). Encoded where a TOI flag alone was.
    never_spared: bool,
}

impl Use {
    /// The same process sent both under the same locks: its row locks
    /// ordered them already, so the later one did see the earlier one even
    /// if `last_seen` lags. `since` is where the later one's lock epoch
    /// began (`Certifier::note_epoch`).
    fn serialized_locally(&self, ws: &WriteSet, incarnation: u32, since: Option<Seqno>) -> bool {
        !self.never_spared
            && self.source == ws.source
            && self.incarnation == incarnation
            && since.is_some_and(|since| self.seqno >= since)
    }
}

/// The local locks a write-set was sent under: its source's process
/// incarnation, and the epoch within it. A process's row locks order its
/// own transactions, so its write-sets need no certification against each
/// other, unless an earlier one's locks were let go before it was known
/// how it ends: a client that gave up waiting for its write-set (which may
/// still be ordered, and then applies like a remote one), or a certified
/// transaction rolled back by a BF abort to be replayed. Another local
/// transaction may then read the rows the first one changes, so the
/// source starts a new epoch, and its write-sets of different epochs
/// certify against each other like two nodes' do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LockSession {
    pub incarnation: u32,
    pub epoch: u32,
}

/// An incarnation alone is its first epoch (what earlier builds sent).
impl From<u32> for LockSession {
    fn from(incarnation: u32) -> LockSession {
        LockSession { incarnation, epoch: 0 }
    }
}

/// A source's newest lock session in the total order, and where it began
/// (for a first epoch, with the incarnation: the incarnation check on the
/// uses tells the rest). Encoded in snapshots: `session` is two u32s,
/// the same bytes earlier builds wrote as a pair.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EpochStart {
    session: LockSession,
    since: Seqno,
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
    /// A hash map: certification looks keys up on every commit, and a
    /// write-set of 100,000 rows looks up as many. Its order is random per
    /// map, so it is written out sorted (`in_key_order`): a snapshot, a
    /// checkpoint, is then the same bytes on every member that holds the
    /// same state.
    #[serde(serialize_with = "in_key_order")]
    index: HashMap<Vec<u8>, [Option<Use>; 4]>,
    /// Write-sets at or below this seqno were dropped from the index.
    purged_upto: Seqno,
    /// Last write-set that must not apply in parallel with later ones
    /// (TOI or PA_UNSAFE): everything after depends on it.
    last_barrier: Seqno,
    /// By source, its newest lock session and where it began: one entry
    /// per node that ever sent a write-set. Snapshots carry it after the
    /// rest of the group state (`GroupState::encode`), not in this encoding.
    #[serde(skip)]
    pub(crate) epochs: BTreeMap<Uuid, EpochStart>,
}

impl Certifier {
    pub fn new(position: Seqno) -> Certifier {
        Certifier {
            index: HashMap::new(),
            purged_upto: position,
            last_barrier: SEQNO_UNDEFINED,
            epochs: BTreeMap::new(),
        }
    }

    pub fn index_size(&self) -> usize {
        self.index.len()
    }

    /// Certifies `ws`, ordered at `seqno` and sent under `session` of its
    /// source, and indexes it if it passes.
    pub fn certify(&mut self, ws: &WriteSet, seqno: Seqno, session: impl Into<LockSession>) -> Verdict {
        let session = session.into();
        let since = self.note_epoch(ws.source, session, seqno);
        let never_spared = ws.is_toi() || since.is_none();
        let verdict = if ws.is_toi() || ws.is_stream_rollback() {
            // TOI runs alone on every node: it waits for everything before it.
            // A rollback fragment only removes what its transaction did: it
            // cannot conflict, and it waits in the same way.
            Verdict::Pass { depends_on: seqno - 1 }
        } else {
            self.test(ws, seqno, session.incarnation, since)
        };
        if let Verdict::Pass { .. } = verdict {
            self.index_keys(ws, seqno, session.incarnation, never_spared);
            if ws.is_toi() || ws.is_pa_unsafe() {
                self.last_barrier = seqno;
            }
        }
        verdict
    }

    /// Records `session` of `source`, whose write-set is ordered at `seqno`,
    /// and returns the seqno from which `source`'s uses were made under the
    /// same locks: all of the incarnation's for its first epoch, from this
    /// write-set on for a later epoch first seen here. Uses of older
    /// sessions ordered after that are marked `never_spared`. `None` for a
    /// session older than the newest seen (a forward that arrived late, or
    /// a dead process's): its locks were let go before the newer session
    /// began, so nothing is spared.
    fn note_epoch(&mut self, source: Uuid, session: LockSession, seqno: Seqno) -> Option<Seqno> {
        match self.epochs.get(&source) {
            Some(start) if start.session == session => Some(start.since),
            Some(start) if start.session > session => None,
            _ => {
                let since = if session.epoch == 0 { SEQNO_UNDEFINED } else { seqno };
                self.epochs.insert(source, EpochStart { session, since });
                Some(since)
            }
        }
    }

    fn test(&self, ws: &WriteSet, seqno: Seqno, incarnation: u32, since: Option<Seqno>) -> Verdict {
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
                    Clash::Conflict if u.seqno > ws.last_seen && !u.serialized_locally(ws, incarnation, since) => {
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

    fn index_keys(&mut self, ws: &WriteSet, seqno: Seqno, incarnation: u32, never_spared: bool) {
        let u = Use { seqno, source: ws.source, incarnation, never_spared };
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

    /// The last write-set everything after depends on (TOI, PA_UNSAFE).
    pub fn last_barrier(&self) -> Seqno {
        self.last_barrier
    }
}

/// Serializes the index as a map in key order (it reads back into any map).
fn in_key_order<S: serde::Serializer>(
    index: &HashMap<Vec<u8>, [Option<Use>; 4]>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut entries: Vec<(&Vec<u8>, &[Option<Use>; 4])> = index.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    serializer.collect_map(entries)
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
