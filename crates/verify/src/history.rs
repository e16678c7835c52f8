//! What the clients saw: transactions of appends and reads on lists, each
//! with when it was invoked and acknowledged and how it ended, and the
//! reads of every list on every node once the clients had stopped.
//!
//! The workload appends integers unique per key, so each value names the
//! transaction that appended it, and a read returns a whole list: the
//! order in which a key's appends were installed is visible in every read.

/// A list (a row keyed by primary key, whose text column is the list).
pub type Key = u64;
/// A value appended to a list, unique among that key's appends.
pub type Value = u64;

/// One operation of a transaction, in the order the client ran it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Append {
        key: Key,
        value: Value,
    },
    /// `values`: the whole list as read (empty if the row did not exist).
    /// `synced`: the server waited for the cluster before this read
    /// (`wsrep_sync_wait`; MariaDB syncs only the first statement of a
    /// transaction), so it must see every write acknowledged before.
    Read {
        key: Key,
        values: Vec<Value>,
        synced: bool,
    },
}

/// How a transaction ended, as its client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Committed and acknowledged.
    Ok,
    /// Rolled back, and the client was told so: none of it may be seen.
    Aborted,
    /// No answer (a connection lost at commit): it may or may not have
    /// committed.
    Unknown,
}

/// One client transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// Unique in the history; what findings name.
    pub id: u64,
    /// The node its client was connected to.
    pub node: usize,
    /// When the client sent its first statement (any clock common to all
    /// clients, in any unit).
    pub invoked: u64,
    /// When the client got the commit's answer; None without one.
    pub completed: Option<u64>,
    pub outcome: Outcome,
    pub ops: Vec<Op>,
}

impl Txn {
    /// Its appends, in order.
    pub fn appends(&self) -> impl Iterator<Item = (Key, Value)> + '_ {
        self.ops.iter().filter_map(|op| match op {
            Op::Append { key, value } => Some((*key, *value)),
            Op::Read { .. } => None,
        })
    }

    /// Acknowledged as committed, at `completed`.
    pub fn acknowledged_at(&self) -> Option<u64> {
        (self.outcome == Outcome::Ok).then_some(self.completed).flatten()
    }
}

/// A key read on one node after every client stopped and the cluster was
/// quiet: what that node finally holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalRead {
    pub node: usize,
    pub key: Key,
    pub values: Vec<Value>,
}

/// A whole run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub txns: Vec<Txn>,
    pub final_reads: Vec<FinalRead>,
}
