//! Flow control on engine nodes in one process (see common/mod.rs): a slow
//! or stuck node holds the writers back within its limit; a desynced one
//! does not.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use tandem_engine::client::{Status, TRACKED};
use tandem_engine::local_group::LocalHub;
use tandem_engine::types::Gtid;
use tandem_engine::writeset::{flags, KeyType};

/// Three nodes; the third applies every write-set slowly and has a small
/// flow-control limit; writers on the other two commit as fast as they can.
/// Returns the writers' servers, the slow one, and what the writers did.
fn slow_node_cluster(slow_options: &str, delay_us: u64) -> (Arc<LocalHub>, Vec<Member>) {
    let hub = LocalHub::new();
    let all = Mutex::new(vec![]);
    let mut members = vec![];
    for i in 0..3 {
        let server = Arc::new(FakeServer::default());
        // The writers never pause the group themselves.
        *server.options.lock() = if i == 2 { slow_options.into() } else { "gcs.fc_limit=100000".into() };
        let m = if i == 0 {
            start_at(&hub, "n0", server, true, &all, "", Gtid::UNDEFINED)
        } else {
            start_server(&hub, &format!("n{i}"), server, &all)
        };
        let s = m.server.clone();
        wait_until("synced", || *s.synced.lock() > 0);
        members.push(m);
    }
    members[2].server.apply_delay_us.store(delay_us, std::sync::atomic::Ordering::Relaxed);
    (hub, members)
}

/// `writers` threads on each of the first two nodes, `per_writer`
/// transactions each carrying `payload` bytes; every ordered transaction
/// must commit (distinct rows per writer: no conflicts).
fn write_hard(members: &[Member], writers: usize, per_writer: u64, payload: usize) {
    let servers: Vec<_> = members.iter().map(|m| m.server.clone()).collect();
    write_hard_on(&servers, writers, per_writer, payload);
}

fn write_hard_on(servers: &[Arc<FakeServer>], writers: usize, per_writer: u64, payload: usize) {
    let mut handles = vec![];
    for (n, s) in servers[..2].iter().enumerate() {
        for w in 0..writers {
            let server = s.clone();
            let row = (n * writers + w) as u8;
            handles.push(thread::spawn(move || {
                let node = server.node().clone();
                for i in 0..per_writer {
                    let trx_id = 1_000_000 * (row as u64 + 1) + i;
                    node.append_key(trx_id, vec![b"db".to_vec(), b"t".to_vec(), vec![row]], KeyType::Exclusive);
                    let mut data = vec![row, 1];
                    data.resize(payload.max(2), 0);
                    node.append_data(trx_id, &data);
                    let (status, ordered) = node.certify(1, trx_id, flags::TRX_START | flags::TRX_END);
                    assert_eq!(status, Status::Ok, "no conflicts between writers of distinct rows");
                    server.write(ordered.gtid.seqno, trx_id, TRACKED, &data);
                    node.release(trx_id, TRACKED);
                }
            }));
        }
    }
    handles.into_iter().for_each(|h| h.join().unwrap());
}

/// How many write-sets past its limit a slow node's queue may grow with
/// `writers` client threads (each has at most one write-set in flight):
/// those the order already held when the slow node saw its queue cross the
/// limit, which it sees only when it gets there (its delivery may lag the
/// order a little on loaded cores), those ordered while its pause message
/// was on its way, and those that passed the gate before a writer's node
/// applied the pause. Each is about one write-set per writer; we allow four.
/// Without flow control the queue grows with the run (hundreds here).
fn overshoot(writers: usize) -> usize {
    4 * writers
}

/// Galera's flow control: the slow node's receive queue, and so its lag,
/// stays within its limit (plus what was in flight when it paused the
/// group), whatever the writers do and however long they do it; the
/// writers are paused instead, and every node agrees who paused them.
#[test]
fn flow_control_keeps_a_slow_node_within_its_limit_by_pausing_the_writers() {
    const LIMIT: i64 = 8;
    const WRITERS: usize = 3;
    let (hub, members) = slow_node_cluster(&format!("gcs.fc_limit={LIMIT};gcs.fc_single_primary=yes"), 1_000);
    let slow = members[2].server.clone();
    assert_eq!(
        stat(&slow, "flow_control_interval"),
        tandem_engine::stats::StatValue::Str(format!("[ {LIMIT}, {LIMIT} ]"))
    );
    write_hard(&members, WRITERS, 150, 2);
    // The writers' 900 transactions arrived while the slow node applied a
    // few hundred at most: without flow control its queue peaks at hundreds.
    let bound = LIMIT + overshoot(2 * WRITERS) as i64;
    let peak = int_stat(&slow, "local_recv_queue_max");
    assert!(peak > LIMIT, "the slow node fell behind (peak queue {peak}), so flow control was exercised");
    assert!(peak <= bound, "peak queue {peak} write-sets over the bound {bound}");
    assert!(int_stat(&slow, "flow_control_sent") > 0);
    for m in &members {
        assert!(
            int_stat(&m.server, "flow_control_recv") >= int_stat(&slow, "flow_control_sent") - 1,
            "every node saw the pauses"
        );
    }
    let writer = &members[0].server;
    assert!(int_stat(writer, "flow_control_paused_ns") > 0, "the writers were paused");
    assert_eq!(int_stat(writer, "flow_control_sent"), 0, "a fast node never pauses the group");
    // The slow node catches up, lifts its pause, and the data agree.
    wait_until("the slow node caught up", || *slow.db.lock() == *writer.db.lock());
    wait_until("the pause lifted", || {
        stat(writer, "flow_control_active") == tandem_engine::stats::StatValue::Str("false".into())
    });
    assert_eq!(slow.db.lock().values().sum::<u64>(), 2 * WRITERS as u64 * 150);
    stop(hub, members);
}

/// The same in bytes, with a node whose appliers are stuck: large
/// write-sets engage flow control at the soft fraction of the queue's byte
/// bound (`gcs.recv_q_hard_limit`) long before the write-set limit, and
/// while nothing at all is applied the queue does not grow past it.
#[test]
fn flow_control_bounds_a_stuck_nodes_queue_in_bytes() {
    const PAYLOAD: usize = 64 << 10;
    const WRITERS: usize = 2;
    let hard = 1 << 20;
    let (hub, members) =
        slow_node_cluster(&format!("gcs.fc_limit=10000;gcs.recv_q_hard_limit={hard};gcs.recv_q_soft_limit=0.25"), 0);
    let slow = members[2].server.clone();
    slow.hold_applies.store(true, std::sync::atomic::Ordering::Release);
    let writing = {
        let servers: Vec<_> = members.iter().map(|m| m.server.clone()).collect();
        thread::spawn(move || write_hard_on(&servers, WRITERS, 30, PAYLOAD))
    };
    let writer = members[0].server.clone();
    wait_until("the writers are paused", || {
        stat(&writer, "flow_control_active") == tandem_engine::stats::StatValue::Str("true".into())
    });
    let upper = hard / 4;
    let bound = (upper + overshoot(2 * WRITERS) * PAYLOAD) as i64;
    // However long the node stays stuck, its queue stays where it was.
    for _ in 0..20 {
        let bytes = int_stat(&slow, "local_recv_queue_bytes");
        assert!(bytes > upper as i64, "the pause came from the byte limit ({bytes} bytes queued)");
        assert!(bytes <= bound, "queue {bytes} bytes over the bound {bound}");
        thread::sleep(Duration::from_millis(10));
    }
    assert!(!writing.is_finished(), "the writers wait for the stuck node");
    slow.hold_applies.store(false, std::sync::atomic::Ordering::Release);
    writing.join().unwrap();
    let peak = int_stat(&slow, "local_recv_queue_bytes_max");
    assert!(peak <= bound, "peak queue {peak} bytes over the bound {bound}");
    assert!(int_stat(&slow, "local_recv_queue_max") < 100, "the write-set limit never engaged");
    assert!(int_stat(&slow, "flow_control_sent") > 0);
    wait_until("the slow node caught up", || *slow.db.lock() == *writer.db.lock());
    stop(hub, members);
}

/// A node that is not synced (desynced by the operator, as a donor is)
/// lags alone: it never pauses the group.
#[test]
fn a_desynced_node_lags_without_pausing_the_group() {
    let (hub, members) = slow_node_cluster("gcs.fc_limit=4;gcs.fc_single_primary=yes", 1_000);
    let slow = members[2].server.clone();
    assert_eq!(slow.node().desync(), Status::Ok);
    write_hard(&members, 2, 100, 2);
    assert!(int_stat(&slow, "local_recv_queue_max") > 4, "it fell behind");
    assert_eq!(int_stat(&slow, "flow_control_sent"), 0);
    assert_eq!(int_stat(&members[0].server, "flow_control_paused_ns"), 0);
    let writer = members[0].server.clone();
    wait_until("the desynced node caught up", || *slow.db.lock() == *writer.db.lock());
    assert_eq!(slow.node().resync(), Status::Ok);
    stop(hub, members);
}
