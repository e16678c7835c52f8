//! A node that leaves under load (`disconnect`, a clean stop): what its
//! group ordered before it left is applied, its clients ordered among that
//! commit, and its appliers and clients all come back, every time.

mod common;

use std::sync::atomic::Ordering;
use std::thread;

use common::*;
use tandem_engine::client::{Status, TRACKED};
use tandem_engine::saved_state::SavedState;
use tandem_engine::view::ViewStatus;
use tandem_engine::writeset::{flags, KeyType};

/// Orders a one-row transaction on `server`'s node; returns its seqno. The
/// commit is the caller's.
fn certify(server: &FakeServer, trx_id: u64, row: u8) -> i64 {
    let node = server.node();
    node.append_key(trx_id, vec![b"db".to_vec(), b"t".to_vec(), vec![row]], KeyType::Exclusive);
    node.append_data(trx_id, &[row, 1]);
    let (status, ordered) = node.certify(1, trx_id, flags::TRX_START | flags::TRX_END);
    assert_eq!(status, Status::Ok);
    ordered.gtid.seqno
}

/// The rolling restart that hung: a node stopped while write-sets of
/// another wait for its appliers, and a local transaction ordered behind
/// them waits for its turn to commit. The final view used to go first and
/// drop them: the local commit then waited for good, and so did the
/// server's shutdown. Now they are applied, the commit goes through, and
/// the saved position covers all of it.
#[test]
fn a_leaving_node_applies_what_was_ordered_before_and_its_client_commits() {
    let (hub, mut members) = cluster(2);
    let (a, b) = (members[0].server.clone(), members[1].server.clone());
    b.hold_applies.store(true, Ordering::Release);
    for row in 1..=6u8 {
        assert_eq!(transact(&a, u64::from(row), row, 1), Status::Ok);
    }
    // Ordered after a's six, so b was handed all of them before this.
    let seqno = certify(&b, 100, 9);
    assert!(int_stat(&b, "local_recv_queue") > 0, "some of a's write-sets wait in b's queue");
    let committer = {
        let b = b.clone();
        thread::spawn(move || {
            b.write(seqno, 100, TRACKED, &[9, 1]);
            b.node().release(100, TRACKED);
        })
    };
    b.node().disconnect();
    b.hold_applies.store(false, Ordering::Release);
    wait_until("the local commit", || committer.is_finished());
    committer.join().unwrap();
    let second = members.remove(1);
    second.threads.into_iter().for_each(|t| t.join().unwrap());
    let expected: Db = (1..=6u8).chain([9]).map(|row| (row, 1)).collect();
    assert_eq!(*b.db.lock(), expected, "every write-set ordered before the leave, and the local one");
    let last = b.views.lock().last().cloned().expect("views");
    assert!(last.status != ViewStatus::Primary && last.members.is_empty(), "the final view comes last: {last:?}");
    let saved = SavedState::load(second.data_dir.path()).expect("grastate.dat written");
    // Beyond it only the view of b's own leave, if b saw it before the end.
    assert_eq!(saved.position, b.node().last_committed(), "{saved:?}");
    assert!((seqno..=seqno + 1).contains(&saved.position.seqno), "{saved:?}");
    stop(hub, members);
}

/// The one case where the turn never comes: a transaction ordered but
/// never committed nor released (its client is gone). A local commit
/// behind it gives up once the node is leaving and nothing commits for the
/// stall bound, so the stop ends; it is rolled back (TrxFail), and the
/// saved position stops before the gap.
#[test]
fn a_commit_that_can_never_come_does_not_hang_the_leave() {
    let (hub, mut members) = cluster(2);
    let b = members[1].server.clone();
    let gap = certify(&b, 100, 1); // never committed, never released
    let behind = certify(&b, 101, 2);
    let waiter = {
        let b = b.clone();
        thread::spawn(move || b.node().commit_order_enter(101, TRACKED, behind))
    };
    b.node().disconnect();
    let second = members.remove(1);
    second.threads.into_iter().for_each(|t| t.join().unwrap());
    wait_until("the commit behind the gap gives up", || waiter.is_finished());
    assert_eq!(waiter.join().unwrap(), Status::TrxFail);
    let saved = SavedState::load(second.data_dir.path()).expect("grastate.dat written");
    assert_eq!(saved.position.seqno, gap - 1, "{saved:?}");
    stop(hub, members);
}
