//! Streaming replication on engine nodes in one process (see
//! common/mod.rs): fragments, their certification, rollback and BF abort,
//! driven the way wsrep-lib drives a provider (contract section 3.5).

mod common;

use std::collections::BTreeMap;

use common::*;
use tandem_engine::client::{Status, TRACKED};
use tandem_engine::writeset::{flags, KeyType};

fn row_key(row: u8) -> Vec<Vec<u8>> {
    vec![b"db".to_vec(), b"t".to_vec(), vec![row]]
}

/// One fragment of streaming transaction `trx_id`, adding `amount` to `row`,
/// stored in commit order when it passes, as wsrep-lib stores it in the
/// streaming log. A failed one is neither stored nor released (wsrep-lib
/// goes on to roll the transaction back).
fn fragment(server: &FakeServer, trx_id: u64, row: u8, amount: u8, first: bool) -> Status {
    let node = server.node();
    node.append_key(trx_id, row_key(row), KeyType::Exclusive);
    node.append_data(trx_id, &[row, amount]);
    let (status, ordered) = node.certify(1, trx_id, if first { flags::TRX_START } else { 0 });
    if status == Status::Ok {
        assert_eq!(node.commit_order_enter(trx_id, TRACKED, ordered.gtid.seqno), Status::Ok);
        node.commit_order_leave(ordered.gtid.seqno, &[]);
        node.release(trx_id, TRACKED);
    }
    status
}

/// The commit fragment: no data, the tables' keys shared, PA_UNSAFE; the
/// origin commits the rows its own transaction holds (`rows`).
fn commit_stream(server: &FakeServer, trx_id: u64, rows: &[u8]) -> Status {
    let node = server.node();
    node.append_key(trx_id, vec![b"db".to_vec(), b"t".to_vec()], KeyType::Shared);
    let (status, ordered) = node.certify(1, trx_id, flags::TRX_END | flags::PA_UNSAFE);
    if status == Status::Ok {
        server.write(ordered.gtid.seqno, trx_id, TRACKED, rows);
    }
    node.release(trx_id, TRACKED);
    status
}

fn stream_on(server: &FakeServer, trx_id: u64) -> Option<Vec<u8>> {
    server.streams.lock().iter().find(|((_, t), _)| *t == trx_id).map(|(_, d)| d.clone())
}

/// Streaming replication: each fragment reaches the other nodes as it is
/// certified, and they hold it (uncommitted) until the commit fragment,
/// which commits the whole transaction on every node.
#[test]
fn a_streaming_transaction_reaches_every_node_by_fragments_and_commits_whole() {
    let (hub, members) = cluster(3);
    let origin = members[0].server.clone();
    assert_eq!(fragment(&origin, 7, 1, 5, true), Status::Ok);
    assert_eq!(fragment(&origin, 7, 2, 7, false), Status::Ok);
    for m in &members[1..] {
        let s = m.server.clone();
        wait_until("both fragments applied", || stream_on(&s, 7).as_deref() == Some(&[1, 5, 2, 7][..]));
        assert!(s.db.lock().is_empty(), "nothing is committed before the commit fragment");
    }
    assert_eq!(commit_stream(&origin, 7, &[1, 5, 2, 7]), Status::Ok);
    for m in &members {
        let s = m.server.clone();
        wait_until("the transaction committed", || *s.db.lock() == BTreeMap::from([(1, 5), (2, 7)]));
        assert_eq!(stream_on(&s, 7), None);
    }
    stop(hub, members);
}

/// A rollback fragment undoes the fragments on every node, and comes back
/// to the origin's appliers too (the server waits for it there).
#[test]
fn a_rolled_back_stream_leaves_nothing_on_any_node() {
    let (hub, members) = cluster(2);
    let origin = members[0].server.clone();
    assert_eq!(fragment(&origin, 8, 1, 5, true), Status::Ok);
    let other = members[1].server.clone();
    wait_until("the fragment applied", || stream_on(&other, 8).is_some());
    assert_eq!(origin.node().rollback_stream(8), Status::Ok);
    origin.node().release(8, TRACKED);
    for m in &members {
        let s = m.server.clone();
        wait_until("the rollback fragment applied", || s.stream_rollbacks.lock().contains(&8));
        assert_eq!(stream_on(&s, 8), None);
    }
    // Every seqno was consumed: what follows commits everywhere.
    assert_eq!(transact(&other, 9, 3, 1), Status::Ok);
    for m in &members {
        let s = m.server.clone();
        wait_until("a later transaction committed", || *s.db.lock() == BTreeMap::from([(3, 1)]));
    }
    stop(hub, members);
}

/// A fragment that loses certification is never stored by the server; the
/// rollback gives its seqno up, so the origin's commit order goes on
/// whenever the server releases the transaction.
#[test]
fn a_fragment_that_loses_certification_does_not_stall_its_origin() {
    let (hub, members) = cluster(2);
    let (origin, other) = (members[0].server.clone(), members[1].server.clone());
    origin.hold_applies.store(true, std::sync::atomic::Ordering::Release);
    assert_eq!(transact(&other, 20, 9, 1), Status::Ok);
    // The origin has not applied that write yet: its fragment on the same
    // row could not have seen it.
    assert_eq!(fragment(&origin, 21, 9, 2, true), Status::TrxFail);
    assert_eq!(origin.node().rollback_stream(21), Status::Ok);
    origin.hold_applies.store(false, std::sync::atomic::Ordering::Release);
    // Before the release: the server need not release the failed fragment
    // before its rollback fragment is applied.
    for m in &members {
        let s = m.server.clone();
        wait_until("the rollback fragment applied", || s.stream_rollbacks.lock().contains(&21));
    }
    origin.node().release(21, TRACKED);
    assert_eq!(transact(&origin, 22, 9, 3), Status::Ok);
    for m in &members {
        let s = m.server.clone();
        wait_until("both writes committed", || *s.db.lock() == BTreeMap::from([(9, 4)]));
        assert_eq!(stream_on(&s, 21), None);
    }
    stop(hub, members);
}

/// Between fragments the provider still knows the transaction: an applier
/// that BF-aborts it then makes its next fragment fail, as it would a
/// transaction still executing.
#[test]
fn a_stream_aborted_between_fragments_fails_its_next_fragment() {
    let (hub, members) = cluster(1);
    let server = members[0].server.clone();
    let node = server.node();
    assert_eq!(fragment(&server, 30, 1, 1, true), Status::Ok);
    let last = node.last_committed().seqno;
    assert_eq!(node.abort_certification(last + 1, 30).0, Status::Ok);
    assert_eq!(int_stat(&server, "local_bf_aborts"), 1);
    assert_eq!(fragment(&server, 30, 2, 1, false), Status::TrxFail);
    assert_eq!(node.rollback_stream(30), Status::Ok);
    node.release(30, TRACKED);
    wait_until("the rollback fragment applied", || server.stream_rollbacks.lock().contains(&30));
    assert_eq!(transact(&server, 31, 3, 1), Status::Ok);
    stop(hub, members);
}

/// An applier may abort a streaming transaction even when its fragment in
/// flight was ordered first: the transaction holds its locks past that
/// fragment, so waiting for it could mean waiting for the whole transaction
/// (Galera refuses only for a write-set that commits). The fragment's
/// streaming-log write then fails, and the rollback undoes it everywhere.
#[test]
fn a_fragment_ordered_first_does_not_shield_its_stream_from_an_applier() {
    let (hub, members) = cluster(1);
    let server = members[0].server.clone();
    let node = server.node();
    node.append_key(40, row_key(1), KeyType::Exclusive);
    node.append_data(40, &[1, 1]);
    let (status, ordered) = node.certify(1, 40, flags::TRX_START);
    assert_eq!(status, Status::Ok);
    let seqno = ordered.gtid.seqno;
    assert_eq!(node.abort_certification(seqno + 1, 40), (Status::Ok, seqno));
    assert_eq!(node.commit_order_enter(40, TRACKED, seqno), Status::TrxFail);
    assert_eq!(node.rollback_stream(40), Status::Ok);
    wait_until("the rollback fragment applied", || server.stream_rollbacks.lock().contains(&40));
    node.release(40, TRACKED);
    assert_eq!(transact(&server, 41, 2, 1), Status::Ok);
    stop(hub, members);
}
