//! The write-set: what one transaction (or one TOI statement) replicates.

use serde::{Deserialize, Serialize};

use crate::types::{Seqno, Uuid};

/// wsrep flag bits as the server passes them (wsrep API v26). They travel with
/// the write-set so every node hands the same flags to its applier.
pub mod flags {
    pub const TRX_END: u32 = 1 << 0;
    pub const ROLLBACK: u32 = 1 << 1;
    pub const ISOLATION: u32 = 1 << 2;
    pub const PA_UNSAFE: u32 = 1 << 3;
    pub const TRX_START: u32 = 1 << 6;
}

/// How a transaction touched a key; decides conflicts (see `certification`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum KeyType {
    Shared = 0,
    Reference = 1,
    Update = 2,
    Exclusive = 3,
}

impl KeyType {
    pub const ALL: [KeyType; 4] = [KeyType::Shared, KeyType::Reference, KeyType::Update, KeyType::Exclusive];

    /// From the wsrep numbering (SHARED=0 .. EXCLUSIVE=3).
    pub fn from_wsrep(n: i32) -> Option<KeyType> {
        KeyType::ALL.get(usize::try_from(n).ok()?).copied()
    }
}

/// A key is a path of parts, e.g. (database, table, primary key bytes).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Key {
    // Written as byte strings, not byte by byte: the same bytes, fewer calls.
    #[serde(with = "tandem_group_api::bytes::byte_vecs")]
    pub parts: Vec<Vec<u8>>,
    pub kind: KeyType,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct WriteSet {
    /// The node the transaction ran on.
    pub source: Uuid,
    pub trx_id: u64,
    pub conn_id: u64,
    pub flags: u32,
    /// The origin's last committed seqno when the transaction was replicated:
    /// everything up to it was visible to the transaction.
    pub last_seen: Seqno,
    /// The lowest `last_seen` of any transaction the origin still has in
    /// flight: no later write-set of the origin can have seen less, so the
    /// certification index may forget what is below it.
    pub safe: Seqno,
    pub keys: Vec<Key>,
    /// The binlog events, opaque to us.
    #[serde(with = "tandem_group_api::bytes::byte_vec")]
    pub data: Vec<u8>,
}

impl WriteSet {
    pub fn is_toi(&self) -> bool {
        self.flags & flags::ISOLATION != 0
    }

    pub fn is_pa_unsafe(&self) -> bool {
        self.flags & flags::PA_UNSAFE != 0
    }

    /// A streaming transaction's rollback fragment: it carries no keys and
    /// undoes the transaction's fragments on every node, the origin too.
    pub fn is_stream_rollback(&self) -> bool {
        self.flags & flags::ROLLBACK != 0
    }

    /// A fragment after the first of a streaming transaction (a middle one
    /// or the commit): the server applies all of them on one applier, so
    /// it must not start before the fragment before it has finished.
    pub fn continues_stream(&self) -> bool {
        !self.is_toi() && self.flags & (flags::TRX_START | flags::ROLLBACK) == 0
    }
}
