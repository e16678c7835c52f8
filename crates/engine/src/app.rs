//! What the engine needs from the database server. The provider implements
//! this with the wsrep callbacks; tests implement it with a recorder.
//!
//! `recv_ctx` is the server's opaque applier context, passed back unchanged.

use crate::types::{Gtid, Seqno, Uuid};
use crate::view::View;

/// One ordered write-set for the server to apply and commit.
#[derive(Debug)]
pub struct ApplyJob<'a> {
    pub trx_id: u64,
    pub conn_id: u64,
    pub source: Uuid,
    pub flags: u32,
    pub data: &'a [u8],
    pub gtid: Gtid,
    pub depends_on: Seqno,
    /// The local handle's opaque value (0 for remote write-sets): a replayed
    /// local transaction keeps its own.
    pub opaque: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    pub ok: bool,
    /// The server wants this applier thread to stop.
    pub exit_loop: bool,
}

pub trait Application: Send + Sync + 'static {
    /// First primary view of this connection. `false` is fatal.
    fn connected(&self, view: &View) -> bool;
    fn view(&self, recv_ctx: usize, view: &View) -> bool;
    /// The server prepares to receive a state transfer; returns the request
    /// (`method\0address`; empty: no transfer wanted), or `None` if it
    /// failed to prepare, which ends this node's join.
    fn sst_request(&self) -> Option<Vec<u8>>;
    fn apply(&self, recv_ctx: usize, job: &ApplyJob<'_>) -> Applied;
    /// Start sending our state to a joiner; must return quickly (the server
    /// runs the transfer in its own thread and reports with `sst_sent`).
    fn sst_donate(&self, recv_ctx: usize, request: &[u8], state: Gtid, bypass: bool) -> bool;
    fn synced(&self) -> bool;
    /// Whether a peer at this address may connect to the group port (the
    /// server's allowlist service, `wsrep_allowlist`). May block.
    fn peer_allowed(&self, _ip: &str) -> bool {
        true
    }
    /// The node has been quiet for a while after it committed write-sets
    /// (`crate::quiet`): a moment to hand back memory the burst left
    /// behind. Called from the ticker; must return quickly.
    fn quiet(&self) {}
}
