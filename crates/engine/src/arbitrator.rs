//! The arbitrator's "server": a member without a database (garbd's role).
//!
//! It votes, so two data nodes and an arbitrator survive the loss of any
//! one of them, and it keeps the group log like any member, so a write-set
//! a data node acknowledged and then died with is still in a majority's
//! log. What a server would do with the ordered stream, it does nothing
//! with: every write-set only passes through the commit order, so that
//! the node's positions move on and the certification index can be purged.
//!
//! It asks for no state transfer (an empty request: it joins at the view)
//! and refuses to donate one; the group never picks it as donor anyway
//! (`GroupState::arbitrators`). Threads and I/O are the caller's: the
//! `tandem arbitrator` command runs the `recv()` loops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::app::{Application, Applied, ApplyJob};
use crate::node::Node;
use crate::types::Gtid;
use crate::view::View;

#[derive(Default)]
pub struct Arbitrator {
    node: OnceLock<Node>,
    /// Write-sets that passed through, for the log and tests.
    passed: AtomicU64,
}

impl Arbitrator {
    /// The node this application serves; set once, before `connect`.
    pub fn attach(&self, node: Node) {
        assert!(self.node.set(node).is_ok(), "an arbitrator serves one node");
    }

    pub fn passed(&self) -> u64 {
        self.passed.load(Ordering::Relaxed)
    }

    fn node(&self) -> &Node {
        self.node.get().expect("attach() before connect()")
    }
}

impl Application for Arbitrator {
    fn connected(&self, view: &View) -> bool {
        log::info!("Arbitrator connected: {}", describe(view));
        true
    }

    fn view(&self, _recv_ctx: usize, view: &View) -> bool {
        log::info!("Arbitrator view: {}", describe(view));
        true
    }

    fn sst_request(&self) -> Option<Vec<u8>> {
        Some(Vec::new())
    }

    fn apply(&self, _recv_ctx: usize, job: &ApplyJob<'_>) -> Applied {
        let node = self.node();
        // Nothing to write; only the order moves on.
        let entered = node.commit_order_enter(job.trx_id, job.opaque, job.gtid.seqno);
        node.commit_order_leave(job.gtid.seqno, &[]);
        self.passed.fetch_add(1, Ordering::Relaxed);
        Applied { ok: entered == crate::client::Status::Ok, exit_loop: false }
    }

    fn sst_donate(&self, _recv_ctx: usize, _request: &[u8], state: Gtid, _bypass: bool) -> bool {
        // The group does not choose an arbitrator; if a peer of another
        // build did, say so and let the joiner ask again.
        log::error!("Asked to donate a state transfer at {state}, but an arbitrator holds no data; refused");
        false
    }

    fn synced(&self) -> bool {
        log::info!("Arbitrator synced with the group");
        true
    }
}

fn describe(view: &View) -> String {
    let names: Vec<&str> = view.members.iter().map(|m| m.name.as_str()).collect();
    format!(
        "{:?} view {} at {} with {} member(s): {}",
        view.status,
        view.view_no,
        view.state_id,
        names.len(),
        names.join(", ")
    )
}
