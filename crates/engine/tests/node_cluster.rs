//! Several engine nodes in one process, on the in-process group hub, each
//! driven by a fake server that applies write-sets to a map the way MariaDB
//! does (commit order calls inside apply). Exercises the join sequence with a
//! state transfer, replication, certification conflicts, partitions.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use tandem_engine::client::{Status, TRACKED};
use tandem_engine::local_group::LocalHub;
use tandem_engine::message::{Body, Envelope, MemberState};
use tandem_engine::node::{Node, NodeConfig, RecvEnd};
use tandem_engine::types::Gtid;
use tandem_engine::view::ViewStatus;
use tandem_engine::writeset::{flags, KeyType};

#[test]
fn joiners_receive_state_and_every_node_converges() {
    let (hub, members) = cluster(1);
    for i in 0..20 {
        assert_eq!(transact(&members[0].server, 100 + i, (i % 4) as u8, 1), Status::Ok);
    }
    let all = Mutex::new(vec![members[0].server.clone()]);
    let mut members = members;
    for i in 1..3 {
        let m = start(&hub, &format!("n{i}"), false, &all);
        let s = m.server.clone();
        wait_until("joiner synced", || *s.synced.lock() > 0);
        members.push(m);
    }
    // Writers on every node, rows overlap only within a node.
    for round in 0..30u64 {
        for (i, m) in members.iter().enumerate() {
            let row = 10 * (i as u8 + 1) + (round % 3) as u8;
            assert_eq!(transact(&m.server, 1000 * (i as u64 + 1) + round, row, 2), Status::Ok);
        }
    }
    // Every node has committed everything ordered so far (the last writes
    // are still being applied on the other nodes when the writers return).
    let target = members.iter().map(|m| m.server.node().last_committed().seqno).max().unwrap();
    for m in &members {
        let node = m.server.node().clone();
        node.sync_wait(None, Some(Duration::from_secs(10))).unwrap();
        assert!(node.last_committed().seqno >= target);
    }
    let expected = members[0].server.db.lock().clone();
    for m in &members {
        assert_eq!(*m.server.db.lock(), expected, "every node holds the same data");
    }
    let sizes: Vec<usize> = members.iter().map(|m| m.server.views.lock().last().unwrap().members.len()).collect();
    assert_eq!(sizes, vec![3, 3, 3]);
    stop(hub, members);
}

#[test]
fn conflicting_writes_on_two_nodes_commit_exactly_once() {
    let (hub, members) = cluster(2);
    let (a, b) = (members[0].server.clone(), members[1].server.clone());
    let mut one_failed = 0;
    for round in 0..40u64 {
        // Both start before seeing each other: same stale last_seen.
        let (ta, tb) = (
            thread::spawn({
                let a = a.clone();
                move || transact(&a, 10_000 + round, 7, 1)
            }),
            thread::spawn({
                let b = b.clone();
                move || transact(&b, 20_000 + round, 7, 1)
            }),
        );
        let results = [ta.join().unwrap(), tb.join().unwrap()];
        assert!(results.contains(&Status::Ok), "at least one commits: {results:?}");
        one_failed += results.iter().filter(|r| **r == Status::TrxFail).count();
    }
    b.node().sync_wait(None, Some(Duration::from_secs(10))).unwrap();
    a.node().sync_wait(None, Some(Duration::from_secs(10))).unwrap();
    assert_eq!(*a.db.lock(), *b.db.lock(), "no divergence");
    let committed = a.db.lock()[&7];
    assert_eq!(committed + one_failed as u64, 80, "each attempt either committed once or failed");
    stop(hub, members);
}

#[test]
fn cut_off_node_goes_non_primary_refuses_writes_and_comes_back() {
    let (hub, members) = cluster(3);
    let victim = members[2].server.clone();
    let id = victim.node().group().unwrap().me();
    hub.set_cut(id, true);
    wait_until("non-primary view", || victim.views.lock().last().is_some_and(|v| v.status == ViewStatus::NonPrimary));
    assert_eq!(transact(&victim, 555, 1, 1), Status::ConnFail);
    assert_eq!(transact(&members[0].server, 556, 1, 1), Status::Ok, "the majority keeps working");
    let synced_before = *victim.synced.lock();
    hub.set_cut(id, false);
    wait_until("primary again and synced", || *victim.synced.lock() > synced_before);
    assert_eq!(victim.views.lock().last().unwrap().status, ViewStatus::Primary);
    stop(hub, members);
}

#[test]
fn a_lost_synced_announcement_is_repeated_after_a_non_primary_spell() {
    let (hub, members) = cluster(3);
    let victim = members[2].server.clone();
    let id = victim.node().group().unwrap().me();
    hub.set_cut(id, true);
    wait_until("non-primary view", || victim.views.lock().last().is_some_and(|v| v.status == ViewStatus::NonPrimary));
    let synced_before = *victim.synced.lock();
    // The view request and the synced announcement after the return are
    // both lost once, as when the leader changes under them.
    let kind = |m: &[u8]| Envelope::decode(m).map(|e| e.body).ok();
    hub.lose_next(id, 2, Box::new(move |m| matches!(kind(m), Some(Body::ViewBump | Body::State(MemberState::Synced)))));
    hub.set_cut(id, false);
    wait_until("synced again", || *victim.synced.lock() > synced_before);
    assert_eq!(victim.views.lock().last().unwrap().status, ViewStatus::Primary);
    assert_eq!(transact(&victim, 777, 3, 1), Status::Ok, "ready for clients again");
    stop(hub, members);
}

/// Cuts `members[2]` off, reconnects it without telling it, and lets a
/// fourth member join: the group orders a primary view that includes the
/// victim, which still believes it is cut off when it applies it. Its synced
/// announcer then waits for the primary report. Returns the victim's group
/// id and the fourth member.
fn primary_view_before_primary_report(hub: &Arc<LocalHub>, members: &[Member]) -> (tandem_group::MemberId, Member) {
    let victim = members[2].server.clone();
    let id = victim.node().group().unwrap().me();
    hub.set_cut(id, true);
    wait_until("non-primary view", || victim.views.lock().last().is_some_and(|v| v.status == ViewStatus::NonPrimary));
    hub.heal_quietly(id);
    let all = Mutex::new(members.iter().map(|m| m.server.clone()).collect());
    let fourth = start_with_donor(hub, "n3", false, &all, "n0");
    wait_until("the victim applied a primary view", || {
        victim.views.lock().last().is_some_and(|v| v.status == ViewStatus::Primary)
    });
    (id, fourth)
}

#[test]
fn a_primary_view_applied_before_the_primary_report_still_resyncs() {
    let (hub, mut members) = cluster(3);
    let victim = members[2].server.clone();
    let synced_before = *victim.synced.lock();
    let (id, fourth) = primary_view_before_primary_report(&hub, &members);
    // It knows it must announce itself synced, but waits to hear it is primary.
    wait_until("the view was delivered", || victim.node().awaits_synced());
    thread::sleep(Duration::from_millis(300));
    assert_eq!(*victim.synced.lock(), synced_before, "not synced while it believes it is cut off");
    assert!(victim.node().awaits_synced(), "the announcement waits");
    hub.report_primary(id);
    wait_until("synced again", || *victim.synced.lock() > synced_before);
    assert_eq!(transact(&victim, 888, 4, 1), Status::Ok, "ready for clients again");
    assert!(!victim.node().awaits_synced());
    members.push(fourth);
    stop(hub, members);
}

#[test]
fn shutdown_returns_only_after_the_ticker_ended() {
    let (hub, mut members) = cluster(3);
    let victim = members[2].server.clone();
    let (_, fourth) = primary_view_before_primary_report(&hub, &members);
    assert_eq!(victim.node().ticker_threads(), 1);
    // As the provider's `free` does; the library is unmapped right after.
    victim.node().shutdown();
    assert_eq!(victim.node().ticker_threads(), 0);
    members.push(fourth);
    stop(hub, members);
}

#[test]
fn failed_state_transfer_ends_the_joiner_and_frees_the_donor() {
    let (hub, members) = cluster(1);
    assert_eq!(transact(&members[0].server, 1, 1, 1), Status::Ok);
    let donor = members[0].server.clone();
    donor.fail_donation.store(true, std::sync::atomic::Ordering::Relaxed);
    let all = Mutex::new(vec![donor.clone()]);
    let joiner = start(&hub, "n1", false, &all);
    let j = joiner.server.clone();
    // The receiver that waited for the state stops with "restart required",
    // the joiner never reports Synced and holds none of the donor's data.
    wait_until("joiner's receivers end", || j.recv_ends.lock().len() == 2);
    let ends = j.recv_ends.lock();
    assert!(ends.contains(&RecvEnd::RestartRequired), "{ends:?}");
    assert!(!ends.contains(&RecvEnd::Fatal), "{ends:?}");
    drop(ends);
    assert_eq!(*j.synced.lock(), 0);
    assert!(j.db.lock().is_empty());
    // The donor goes back to Synced and keeps taking writes.
    wait_until("donor synced again", || {
        donor
            .node()
            .status()
            .iter()
            .any(|(k, v)| *k == "local_state_comment" && *v == tandem_engine::stats::StatValue::Str("Synced".into()))
    });
    assert_eq!(transact(&donor, 2, 2, 1), Status::Ok);
    j.node().disconnect();
    joiner.threads.into_iter().for_each(|t| t.join().unwrap());
    stop(hub, members);
}

#[test]
fn a_joiner_whose_server_cannot_prepare_for_a_transfer_never_joins() {
    let (hub, members) = cluster(1);
    assert_eq!(transact(&members[0].server, 1, 1, 1), Status::Ok);
    let all = Mutex::new(vec![members[0].server.clone()]);
    let server = Arc::new(FakeServer::default());
    server.fail_prepare.store(true, std::sync::atomic::Ordering::Relaxed);
    let joiner = start_server(&hub, "n1", server, &all);
    let j = joiner.server.clone();
    // Not "skipped": a server with no state must not pass for one that has it.
    wait_until("joiner's receivers end", || j.recv_ends.lock().len() == 2);
    assert!(j.recv_ends.lock().contains(&RecvEnd::RestartRequired), "{:?}", j.recv_ends.lock());
    assert_eq!(*j.synced.lock(), 0, "never synced");
    assert!(j.db.lock().is_empty());
    assert_eq!(transact(&members[0].server, 2, 2, 1), Status::Ok, "the group goes on");
    j.node().disconnect();
    joiner.threads.into_iter().for_each(|t| t.join().unwrap());
    stop(hub, members);
}

/// `wsrep_local_bf_aborts` counts a local transaction once when an applier
/// aborts it; a victim ordered before the applier is not aborted (it commits
/// first) and not counted. One that has written nothing yet (the provider
/// has no keys for it) is counted: the server asks only for live ones.
#[test]
fn bf_aborts_of_local_transactions_are_counted_once() {
    let (hub, members) = cluster(1);
    let server = members[0].server.clone();
    let node = server.node();
    assert_eq!(int_stat(&server, "local_bf_aborts"), 0);

    // Ordered before any later applier: the applier must wait for it.
    node.append_key(1, vec![b"db".to_vec(), b"t".to_vec(), vec![1]], KeyType::Exclusive);
    node.append_data(1, &[1, 1]);
    let (status, ordered) = node.certify(1, 1, flags::TRX_START | flags::TRX_END);
    assert_eq!(status, Status::Ok);
    let (refused, seqno) = node.abort_certification(ordered.gtid.seqno + 1, 1);
    assert_eq!((refused, seqno), (Status::NotAllowed, ordered.gtid.seqno));
    server.write(ordered.gtid.seqno, 1, TRACKED, &[1, 1]);
    node.release(1, TRACKED);
    assert_eq!(int_stat(&server, "local_bf_aborts"), 0, "a transaction ordered first is not a victim");

    // Still executing (not yet ordered): the applier wins, once.
    node.append_key(2, vec![b"db".to_vec(), b"t".to_vec(), vec![2]], KeyType::Exclusive);
    let (aborted, _) = node.abort_certification(ordered.gtid.seqno + 1, 2);
    assert_eq!(aborted, Status::Ok);
    let _ = node.abort_certification(ordered.gtid.seqno + 1, 2);
    assert_eq!(int_stat(&server, "local_bf_aborts"), 1, "asked twice, aborted once");
    node.release(2, TRACKED);

    let (unknown, _) = node.abort_certification(ordered.gtid.seqno + 1, 999);
    assert_eq!(unknown, Status::Ok);
    assert_eq!(int_stat(&server, "local_bf_aborts"), 2, "a victim that wrote nothing is counted");
    stop(hub, members);
}

/// A write-set larger than the group replicates in one piece is refused as
/// too large (WSREP_SIZE_EXCEEDED: MariaDB says "Maximum writeset size
/// exceeded"), not as a lost connection, though `repl.max_ws_size` (2 GiB
/// by default) allows it; nothing is ordered and the node goes on.
#[test]
fn a_write_set_beyond_the_group_limit_is_refused_as_too_large() {
    let (hub, members) = cluster(1);
    let server = members[0].server.clone();
    let node = server.node();
    let committed = int_stat(&server, "last_committed");

    node.append_key(1, vec![b"db".to_vec(), b"t".to_vec(), vec![1]], KeyType::Exclusive);
    node.append_data(1, &vec![7u8; tandem_group::MAX_PAYLOAD_BYTES + 1]);
    let (status, ordered) = node.certify(1, 1, flags::TRX_START | flags::TRX_END);
    assert_eq!(status, Status::SizeExceeded);
    assert!(ordered.gtid.seqno < 0, "nothing was ordered: {ordered:?}");
    node.release(1, TRACKED);
    assert_eq!(int_stat(&server, "last_committed"), committed);

    assert_eq!(transact(&server, 2, 2, 1), Status::Ok, "the node still commits");
    stop(hub, members);
}

/// A pause (FTWRL, BACKUP STAGE BLOCK_DDL) holds a local commit ordered after
/// it in certification, as Galera's local monitor does, so the transaction
/// keeps its locks until `resume`, and only then gets its verdict.
#[test]
fn a_commit_ordered_during_a_pause_gets_its_verdict_at_resume() {
    let (hub, members) = cluster(1);
    let server = members[0].server.clone();
    let node = server.node();
    let paused_at = node.pause();
    node.append_key(7, vec![b"db".to_vec(), b"t".to_vec(), vec![7]], KeyType::Exclusive);
    node.append_data(7, &[7, 7]);
    let (tx, rx) = std::sync::mpsc::channel();
    let certifier = {
        let node = node.clone();
        thread::spawn(move || tx.send(node.certify(1, 7, flags::TRX_START | flags::TRX_END)).unwrap())
    };
    // The group has ordered it...
    while int_stat(&server, "replicated") < 1 {
        thread::sleep(Duration::from_millis(5));
    }
    // ...and a wrong early verdict would arrive within this.
    thread::sleep(Duration::from_millis(300));
    assert!(rx.try_recv().is_err(), "a verdict while paused");
    node.resume();
    let (status, ordered) = rx.recv_timeout(Duration::from_secs(30)).expect("a verdict after resume");
    assert_eq!(status, Status::Ok);
    assert!(ordered.gtid.seqno > paused_at, "ordered after the pause");
    certifier.join().unwrap();
    server.write(ordered.gtid.seqno, 7, TRACKED, &[7, 7]);
    node.release(7, TRACKED);
    stop(hub, members);
}

/// A write-set the server fails to apply, with no error for the group to vote
/// on: that node's data is no longer the group's, so it leaves as one voted
/// out does and its server gets the final view, instead of staying a member
/// that applies nothing (its applier loop used to end, Fatal). The others go on.
#[test]
fn a_failed_apply_without_a_vote_makes_the_node_leave_as_inconsistent() {
    let (hub, members) = cluster(2);
    let (first, second) = (members[0].server.clone(), members[1].server.clone());
    second.fail_applies.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(transact(&first, 1, 1, 1), Status::Ok);
    wait_until("the second node marked inconsistent", || second.node().is_inconsistent());
    wait_until("the second node's server got the final view", || {
        second.views.lock().last().is_some_and(|v| v.members.is_empty())
    });
    wait_until("the first node alone", || first.views.lock().last().is_some_and(|v| v.members.len() == 1));
    assert_eq!(transact(&first, 2, 2, 1), Status::Ok, "the group goes on");
    assert!(!second.recv_ends.lock().contains(&RecvEnd::Fatal), "{:?}", second.recv_ends.lock());
    assert!(second.db.lock().is_empty(), "nothing applied on the failed node");
    stop(hub, members);
}

/// An arbitrator node on the hub, with its two applier loops.
fn start_arbitrator(
    hub: &Arc<LocalHub>,
    name: &str,
) -> (Arc<tandem_engine::arbitrator::Arbitrator>, Node, Vec<thread::JoinHandle<RecvEnd>>, tempfile::TempDir) {
    let hub2 = hub.clone();
    let work_dir = tempfile::Builder::new().prefix(&format!("tandem-arb-{name}-")).tempdir().unwrap();
    let config = NodeConfig {
        name: name.into(),
        node_address: "127.0.0.1".into(),
        incoming: String::new(),
        data_dir: work_dir.path().to_path_buf(),
        options: "evs.suspect_timeout=PT1S".into(),
        start_position: Gtid::UNDEFINED,
        arbitrator: true,
    };
    let app = Arc::new(tandem_engine::arbitrator::Arbitrator::default());
    let node = Node::new(app.clone(), config, Box::new(move |c| Ok(hub2.open(c)))).unwrap();
    app.attach(node.clone());
    node.connect("test", "gcomm://127.0.0.1:1", "", false).unwrap();
    let threads = (0..2)
        .map(|i| {
            let node = node.clone();
            thread::spawn(move || node.recv(i))
        })
        .collect();
    (app, node, threads, work_dir)
}

/// An arbitrator joins without a state transfer, is counted in every view,
/// lets write-sets pass, is never the donor of a later joiner (even one
/// that names it first) and writes no grastate.dat. It cannot bootstrap.
#[test]
fn an_arbitrator_votes_passes_write_sets_and_never_donates() {
    let (hub, members) = cluster(1);
    let all = Mutex::new(vec![members[0].server.clone()]);
    let (arb, arb_node, arb_threads, arb_dir) = start_arbitrator(&hub, "arb");
    wait_until("arbitrator synced", || {
        members[0].server.views.lock().last().is_some_and(|v| v.members.len() == 2)
            && arb_node.readiness().state == tandem_engine::core::LocalState::Synced
    });
    for i in 0..20 {
        assert_eq!(transact(&members[0].server, 100 + i, (i % 4) as u8, 1), Status::Ok);
    }
    // A joiner that prefers the arbitrator still gets its state from n0.
    let joiner = start_with_donor(&hub, "n1", false, &all, "arb,");
    let s = joiner.server.clone();
    wait_until("joiner synced", || *s.synced.lock() > 0);
    let mut members = members;
    members.push(joiner);
    assert_eq!(*members[1].server.db.lock(), *members[0].server.db.lock(), "the joiner got n0's data");
    assert_eq!(members[0].server.views.lock().last().unwrap().members.len(), 3, "the arbitrator is a member");
    assert_eq!(transact(&members[1].server, 500, 9, 1), Status::Ok);
    let last = members[1].server.node().last_committed().seqno;
    wait_until("the arbitrator passed every write-set", || arb_node.last_committed().seqno >= last);
    assert!(arb.passed() >= 21, "passed {}", arb.passed());
    assert!(!arb_dir.path().join("grastate.dat").exists(), "an arbitrator has no data position to save");

    arb_node.disconnect();
    for t in arb_threads {
        assert_eq!(t.join().unwrap(), RecvEnd::Closed);
    }
    arb_node.shutdown();
    stop(hub, members);
}

#[test]
fn an_arbitrator_refuses_to_bootstrap() {
    let hub = LocalHub::new();
    let work_dir = tempfile::tempdir().unwrap();
    let config = NodeConfig {
        name: "arb".into(),
        node_address: "127.0.0.1".into(),
        incoming: String::new(),
        data_dir: work_dir.path().to_path_buf(),
        options: String::new(),
        start_position: Gtid::UNDEFINED,
        arbitrator: true,
    };
    let app = Arc::new(tandem_engine::arbitrator::Arbitrator::default());
    let hub2 = hub.clone();
    let node = Node::new(app.clone(), config, Box::new(move |c| Ok(hub2.open(c)))).unwrap();
    app.attach(node.clone());
    let err = node.connect("test", "gcomm://", "", false).unwrap_err();
    assert!(format!("{err:?}").contains("cannot bootstrap"), "{err:?}");
    node.shutdown();
    hub.stop();
}

/// A node that leaves while its server is still taking a membership change
/// saves its position for the next start: the late view must not put back
/// the running marker (seqno -1), or the node, asked to connect again in
/// the same process (`SET GLOBAL wsrep_cluster_address`), finds its
/// position unknown and refuses to join (MTR MDEV-30764).
#[test]
fn a_view_delivered_after_disconnect_does_not_unsave_the_position() {
    let (hub, mut members) = cluster(2);
    for i in 0..5 {
        assert_eq!(transact(&members[0].server, 10 + i, i as u8, 1), Status::Ok);
    }
    let (first, second) = (members.remove(0), members.remove(0));
    let s = second.server.clone();
    wait_until("second applied all", || s.db.lock().values().sum::<u64>() == 5);
    s.hold_views.store(true, std::sync::atomic::Ordering::Release);
    first.server.node().disconnect();
    first.threads.into_iter().for_each(|t| t.join().unwrap());
    wait_until("second takes the view without the first", || {
        s.views.lock().last().is_some_and(|v| v.members.len() == 1)
    });
    s.node().disconnect(); // the view above is still in the server's callback
    s.hold_views.store(false, std::sync::atomic::Ordering::Release);
    second.threads.into_iter().for_each(|t| t.join().unwrap());
    let saved = tandem_engine::saved_state::SavedState::load(second.data_dir.path()).expect("grastate.dat written");
    assert_eq!(saved.position, s.node().last_committed(), "{saved:?}");
    assert!(saved.position.seqno > 0, "{saved:?}");
    assert!(saved.safe_to_bootstrap, "the last member of the primary component: {saved:?}");
    hub.stop();
}

/// Every `PROGRESS_INTERVAL` seqnos a live node reports its progress from
/// inside the group's callback: that report must not wait for
/// `send_order` there (the group's thread never does; debug builds
/// assert it), or the group stops. Past two intervals, both nodes still
/// commit and agree.
#[test]
fn progress_reports_from_the_groups_callback_do_not_wait_for_send_order() {
    let (hub, members) = cluster(2);
    let a = members[0].server.clone();
    let writes = 2 * tandem_engine::core::PROGRESS_INTERVAL as u64 + 10;
    let writer = {
        let a = a.clone();
        thread::spawn(move || (1..=writes).all(|trx| transact(&a, trx, (trx % 7) as u8, 1) == Status::Ok))
    };
    // A group stopped by a blocked callback leaves the writer waiting for
    // good: the wait's deadline fails the test instead.
    wait_until("every transaction committed", || writer.is_finished());
    assert!(writer.join().unwrap(), "every transaction committed");
    let b = members[1].server.clone();
    wait_until("both nodes hold every write", || *a.db.lock() == *b.db.lock());
    assert_eq!(a.db.lock().values().sum::<u64>(), writes);
    stop(hub, members);
}

/// A node's own write-sets are refused until it is in step with the group
/// (JOINED), as Galera refuses them. Before, one ordered while the join
/// task was still bringing the server in step committed ahead of it: on a
/// node resuming by IST, the join then started the monitors below what the
/// server had committed, and the node waited for good (the shell
/// simulation's power cut, 1 run in 8 under load).
#[test]
fn a_node_orders_no_write_sets_of_its_own_before_it_joined() {
    use std::sync::atomic::Ordering::Release;
    let (hub, mut members) = cluster(1);
    assert_eq!(transact(&members[0].server, 1, 0, 1), Status::Ok);
    let all = Mutex::new(vec![members[0].server.clone()]);
    let server = Arc::new(FakeServer::default());
    server.hold_connected.store(true, Release);
    let joiner = start_server(&hub, "n1", server.clone(), &all);
    wait_until("the joiner's server is being connected", || !server.views.lock().is_empty());
    assert!(server.node().readiness().primary, "admitted in the primary component: not refused for that");
    // In a thread: one taken would wait for its commit turn behind the held join.
    let client = {
        let server = server.clone();
        thread::spawn(move || transact(&server, 2, 1, 1))
    };
    wait_until("the write-set refused", || client.is_finished());
    assert_eq!(client.join().unwrap(), Status::TrxFail, "refused before JOINED");
    server.hold_connected.store(false, Release);
    wait_until("the joiner synced", || *server.synced.lock() > 0);
    assert_eq!(transact(&server, 3, 1, 1), Status::Ok, "taken once in step");
    let first = members[0].server.clone();
    wait_until("both nodes hold the same data", || *first.db.lock() == *server.db.lock());
    assert_eq!(first.db.lock().values().sum::<u64>(), 2, "the refused write-set is on no node");
    members.push(joiner);
    stop(hub, members);
}

/// A node that leaves and connects again in the same process (`SET GLOBAL
/// wsrep_cluster_address`) commits nothing twice and no view goes back.
/// (On the in-process hub the reconnect takes a state transfer whatever
/// the position; the position itself, which once was the server's start
/// position and replayed what it had, is checked by MTR
/// galera_var_cluster_address in `make test-mtr` and by the core test
/// `a_connection_remembers_whether_it_ended_in_step`.)
#[test]
fn a_node_connected_again_in_the_same_process_commits_nothing_twice() {
    let (hub, mut members) = cluster(1);
    let first = members[0].server.clone();
    let all = Mutex::new(vec![first.clone()]);
    // Started at the group's position, as `wsrep_start_position` says.
    let start = first.node().last_committed();
    let server = Arc::new(FakeServer::default());
    let joiner = start_at(&hub, "n1", server.clone(), false, &all, "", start);
    wait_until("the joiner synced", || *server.synced.lock() > 0);
    for i in 0..3 {
        assert_eq!(transact(&first, 10 + i, i as u8, 1), Status::Ok);
    }
    wait_until("the joiner applied all", || *first.db.lock() == *server.db.lock());
    server.node().disconnect();
    joiner.threads.into_iter().for_each(|t| t.join().unwrap());
    // Its own leave's view included, which the server never sees.
    let left_at = server.node().last_committed();
    assert!(left_at.seqno > start.seqno + 3, "{left_at} moved past {start}");
    let seen = server.views.lock().len();
    server.node().connect("test", "gcomm://127.0.0.1:1", "", false).unwrap();
    let threads = appliers(server.node(), &server);
    wait_until("synced again", || *server.synced.lock() > 1);
    assert_eq!(transact(&first, 20, 7, 1), Status::Ok);
    wait_until("both hold the same data", || *first.db.lock() == *server.db.lock());
    let connected_at = server.views.lock()[seen].state_id;
    // Where the server is, or past it by a state transfer (the in-process
    // hub may not replay that far), never before it.
    assert!(connected_at.seqno >= left_at.seqno, "connected again at {connected_at}, the server at {left_at}");
    let seqnos: Vec<i64> = server.commits.lock().iter().map(|c| c.seqno).collect();
    assert!(seqnos.windows(2).all(|w| w[0] < w[1]), "every write-set committed once, in order: {seqnos:?}");
    let views: Vec<i64> = server.views.lock()[seen..].iter().map(|v| v.state_id.seqno).filter(|s| *s >= 0).collect();
    assert!(views.windows(2).all(|w| w[0] < w[1]), "no view delivered twice: {views:?}");
    members.push(Member { server, threads, data_dir: joiner.data_dir });
    stop(hub, members);
}
