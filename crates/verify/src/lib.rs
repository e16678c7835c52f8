//! A checker for list-append histories, in the manner of Jepsen's Elle.
//!
//! Clients append unique integers to lists (a row's text column, keyed
//! by primary key) and read whole lists, in short transactions on every
//! node, while faults are injected; then every node's lists are read once
//! the cluster is quiet. Because values are unique and reads return whole
//! lists, each read shows the order in which its key's appends were
//! installed, and each value names the transaction that appended it. From
//! that alone the checker finds:
//! - acknowledged appends missing from a node's final lists (lost), nodes
//!   whose final lists differ (divergent), values read twice, never
//!   appended, or appended by a rolled-back transaction (G1a), reads that
//!   stop mid-transaction (G1b), reads that are not a prefix of their
//!   key's order, and transactions that do not see their own work
//!   ([`versions`], [`internal`]);
//! - cycles of Adya's dependency graph: G0, G1c, G-single and G2
//!   ([`graph`]);
//! - reads that miss a write acknowledged before their transaction began,
//!   apart for reads the server synced and reads it did not ([`stale`]).
//!
//! Each finding names the transactions that show it ([`report`]). The
//! checker is pure: a history in, a report out.

pub mod graph;
pub mod history;
pub mod internal;
pub mod report;
pub mod stale;
pub mod versions;

pub use history::{FinalRead, History, Op, Outcome, Txn};
pub use report::{Finding, Kind, Report};

/// Every check on `history`.
pub fn check(history: &History) -> Report {
    let mut report = Report::default();
    let v = versions::Versions::index(history, &mut report);
    versions::check_reads(history, &v, &mut report);
    versions::check_final(history, &mut report);
    internal::check(history, &mut report);
    graph::check(history, &v, &mut report);
    stale::check(history, &v, &mut report);
    report
}
