//! What the client path hands the provider (`Status`, `Ordered`), and the
//! local transactions it tracks between their first call and their end.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::types::{Gtid, Seqno, Uuid, SEQNO_UNDEFINED};
use crate::writeset::{flags, Key};

/// Outcome of a provider call, in wsrep terms (the provider maps it to codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    TrxMissing,
    TrxFail,
    BfAbort,
    SizeExceeded,
    ConnFail,
    NodeFail,
    NotAllowed,
}

/// What `certify` / `to_execute_start` fill into the server's meta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ordered {
    pub gtid: Gtid,
    pub depends_on: Seqno,
    pub source: Uuid,
}

impl Ordered {
    pub const NONE: Ordered = Ordered { gtid: Gtid::UNDEFINED, depends_on: SEQNO_UNDEFINED, source: Uuid::NIL };
}

#[derive(Default, Debug)]
pub(crate) struct TrxBody {
    pub(crate) keys: Vec<Key>,
    pub(crate) data: Vec<u8>,
    pub(crate) flags: u32,
    pub(crate) conn_id: u64,
    pub(crate) seqno: Seqno,
    pub(crate) depends_on: Seqno,
    pub(crate) passed: bool,
    /// When the server asked to certify it: its commit latency starts here.
    pub(crate) certifying_since: Option<Instant>,
    /// A streaming transaction between fragments: `release` keeps it for
    /// the next one, until its commit fragment or its rollback.
    pub(crate) streaming: bool,
}

/// A local transaction the provider has seen (it appended a key or data).
#[derive(Debug)]
pub struct LocalTrx {
    pub trx_id: u64,
    pub(crate) body: Mutex<TrxBody>,
    /// Raised by a BF abort; polled by every wait of this transaction.
    pub aborted: AtomicBool,
}

impl LocalTrx {
    /// Its ordered seqno (if any), and whether that write-set commits the
    /// transaction (every one but a streaming transaction's fragments).
    pub(crate) fn ordered_at(&self) -> (Seqno, bool) {
        let b = self.body.lock();
        (b.seqno, b.flags & flags::TRX_END != 0)
    }
}

/// The opaque value we hand the server for transactions we track.
pub const TRACKED: usize = 1;

/// Local transactions and TOI statements between their first call and
/// their end, and what the certification index must not forget for them.
#[derive(Default)]
pub(crate) struct LocalTrxs {
    pub(crate) open: Mutex<HashMap<u64, Arc<LocalTrx>>>,
    /// The seqno a connection's TOI statement holds, until `to_execute_end`.
    pub(crate) toi: Mutex<HashMap<u64, Seqno>>,
    /// `last_seen` of local write-sets on their way through the group.
    pub(crate) in_flight: crate::in_flight::InFlight,
}
