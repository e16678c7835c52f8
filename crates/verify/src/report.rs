//! What the checker found: one finding per broken promise, each with the
//! transactions that show it, and counts by kind.

use std::collections::BTreeMap;
use std::fmt;

/// The kinds of anomaly, from the plainest (a write lost) to the cycles
/// of Adya's dependency graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The workload appended one value twice to a key: its own error, and
    /// every check on that key is unsound.
    DuplicateAppend,
    /// An acknowledged append is missing from its key's final list.
    Lost,
    /// A read holds one value more than once.
    Duplicated,
    /// A read holds a value no transaction appended.
    Garbage,
    /// G1a: a read holds a value of a transaction that was rolled back.
    AbortedRead,
    /// G1b: a read ends in the middle of another transaction's appends.
    IntermediateRead,
    /// A transaction's read disagrees with its own earlier read or appends.
    Internal,
    /// Two reads of a key are not prefixes of one order.
    NonPrefix,
    /// Nodes finally hold different lists for a key.
    Divergent,
    /// A cycle of write-write dependencies.
    G0,
    /// A cycle of write-write and write-read dependencies (not G0).
    G1c,
    /// A cycle with exactly one read-write anti-dependency.
    GSingle,
    /// A cycle with two or more read-write anti-dependencies.
    G2,
    /// A read the server synced misses a write acknowledged before its
    /// transaction began.
    StaleSynced,
    /// The same, on a read the server did not sync (MariaDB syncs only
    /// the first statement of a transaction): allowed, but counted.
    StaleUnsynced,
}

impl Kind {
    pub const ALL: [Kind; 15] = [
        Kind::DuplicateAppend,
        Kind::Lost,
        Kind::Duplicated,
        Kind::Garbage,
        Kind::AbortedRead,
        Kind::IntermediateRead,
        Kind::Internal,
        Kind::NonPrefix,
        Kind::Divergent,
        Kind::G0,
        Kind::G1c,
        Kind::GSingle,
        Kind::G2,
        Kind::StaleSynced,
        Kind::StaleUnsynced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::DuplicateAppend => "duplicate-append",
            Kind::Lost => "lost",
            Kind::Duplicated => "duplicated",
            Kind::Garbage => "garbage",
            Kind::AbortedRead => "G1a",
            Kind::IntermediateRead => "G1b",
            Kind::Internal => "internal",
            Kind::NonPrefix => "non-prefix",
            Kind::Divergent => "divergent",
            Kind::G0 => "G0",
            Kind::G1c => "G1c",
            Kind::GSingle => "G-single",
            Kind::G2 => "G2",
            Kind::StaleSynced => "stale-synced",
            Kind::StaleUnsynced => "stale-unsynced",
        }
    }

    /// A finding of this kind breaks what Tandem promises. Unsynced stale
    /// reads are what MariaDB allows without `wsrep_sync_wait`.
    pub fn is_violation(self) -> bool {
        self != Kind::StaleUnsynced
    }
}

/// One anomaly, with the transactions (ids) that show it, and in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: Kind,
    pub txns: Vec<u64>,
    pub detail: String,
}

/// Every finding of a history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn add(&mut self, kind: Kind, txns: Vec<u64>, detail: String) {
        self.findings.push(Finding { kind, txns, detail });
    }

    pub fn count(&self, kind: Kind) -> usize {
        self.findings.iter().filter(|f| f.kind == kind).count()
    }

    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.kind == kind)
    }

    /// Nothing Tandem promises is broken (unsynced stale reads aside).
    pub fn is_clean(&self) -> bool {
        !self.findings.iter().any(|f| f.kind.is_violation())
    }

    /// Counts by kind, every kind listed.
    pub fn counts(&self) -> BTreeMap<Kind, usize> {
        Kind::ALL.iter().map(|k| (*k, self.count(*k))).collect()
    }
}

/// Counts, then up to three examples of each kind found.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (kind, n) in self.counts() {
            writeln!(f, "{:<16} {n}", kind.name())?;
        }
        for kind in Kind::ALL {
            for finding in self.of(kind).take(3) {
                writeln!(f, "{}: {} (txns {:?})", kind.name(), finding.detail, finding.txns)?;
            }
        }
        Ok(())
    }
}
