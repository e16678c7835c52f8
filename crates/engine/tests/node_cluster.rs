//! Several engine nodes in one process, on the in-process group hub, each
//! driven by a fake server that applies write-sets to a map the way MariaDB
//! does (commit order calls inside apply). Exercises the join sequence with a
//! state transfer, replication, certification conflicts, partitions.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tandem_engine::app::{Applied, Application, ApplyJob};
use tandem_engine::client::{Status, TRACKED};
use tandem_engine::local_group::LocalHub;
use tandem_engine::message::{Body, Envelope, MemberState};
use tandem_engine::node::{Node, NodeConfig, RecvEnd};
use tandem_engine::types::{Gtid, Uuid};
use tandem_engine::view::{View, ViewStatus};
use tandem_engine::writeset::{flags, KeyType};

type Db = BTreeMap<u8, u64>;

#[derive(Default)]
struct FakeServer {
    node: OnceLock<Node>,
    db: Mutex<Db>,
    views: Mutex<Vec<View>>,
    synced: Mutex<u32>,
    /// Where a donor "sends" its state: the joiner's server.
    peers: Mutex<Vec<Arc<FakeServer>>>,
    /// As donor: the transfer fails (the donor's SST script exits non-zero).
    fail_donation: std::sync::atomic::AtomicBool,
    /// As joiner: the server fails to prepare for a transfer (its SST
    /// script refuses, a certificate is missing).
    fail_prepare: std::sync::atomic::AtomicBool,
    /// How each of this node's applier loops ended.
    recv_ends: Mutex<Vec<RecvEnd>>,
    /// Each remote write-set takes this long to apply (a slow node).
    apply_delay_us: std::sync::atomic::AtomicU64,
    /// While set, remote write-sets wait before they are applied (a node
    /// whose appliers are stuck).
    hold_applies: std::sync::atomic::AtomicBool,
    /// Provider options beyond the tests' defaults.
    options: Mutex<String>,
    /// Fragments of streaming transactions applied here and not yet
    /// committed, by (origin, transaction): the server's streaming log.
    streams: Mutex<BTreeMap<(Uuid, u64), Vec<u8>>>,
    /// The transactions whose rollback fragment came through `apply`.
    stream_rollbacks: Mutex<Vec<u64>>,
}

impl FakeServer {
    fn node(&self) -> &Node {
        self.node.get().expect("node set")
    }

    fn write(&self, seqno: i64, trx_id: u64, opaque: usize, data: &[u8]) {
        assert_eq!(self.node().commit_order_enter(trx_id, opaque, seqno), Status::Ok);
        let mut db = self.db.lock();
        for pair in data.chunks(2) {
            *db.entry(pair[0]).or_default() += pair[1] as u64;
        }
        drop(db);
        self.node().commit_order_leave(seqno, &[]);
    }
}

impl Application for FakeServer {
    fn connected(&self, view: &View) -> bool {
        // The server takes a joiner's first view from connected_cb.
        self.views.lock().push(view.clone());
        true
    }
    fn view(&self, _ctx: usize, view: &View) -> bool {
        self.views.lock().push(view.clone());
        true
    }
    fn sst_request(&self) -> Option<Vec<u8>> {
        if self.fail_prepare.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        Some(b"fake\0joiner".to_vec())
    }
    fn apply(&self, _ctx: usize, job: &ApplyJob<'_>) -> Applied {
        // As wsrep-lib tells them apart (contract section 3.5).
        let stream = (job.source, job.trx_id);
        let starts = job.flags & flags::TRX_START != 0;
        if job.flags & flags::ROLLBACK != 0 {
            if !starts {
                self.streams.lock().remove(&stream);
                self.stream_rollbacks.lock().push(job.trx_id);
            }
            self.node().commit_order_enter(job.trx_id, job.opaque, job.gtid.seqno);
            self.node().commit_order_leave(job.gtid.seqno, &[]);
        } else if job.flags & (flags::TRX_END | flags::ISOLATION) == 0 {
            self.streams.lock().entry(stream).or_default().extend_from_slice(job.data);
            self.node().commit_order_enter(job.trx_id, job.opaque, job.gtid.seqno);
            self.node().commit_order_leave(job.gtid.seqno, &[]);
        } else if !starts {
            let mut data = self.streams.lock().remove(&stream).unwrap_or_default();
            data.extend_from_slice(job.data);
            self.write(job.gtid.seqno, job.trx_id, job.opaque, &data);
        } else {
            let delay = self.apply_delay_us.load(std::sync::atomic::Ordering::Relaxed);
            if delay > 0 {
                thread::sleep(Duration::from_micros(delay));
            }
            while self.hold_applies.load(std::sync::atomic::Ordering::Acquire) {
                thread::sleep(Duration::from_millis(1));
            }
            self.write(job.gtid.seqno, job.trx_id, job.opaque, job.data);
        }
        Applied { ok: true, exit_loop: false }
    }
    fn sst_donate(&self, _ctx: usize, _request: &[u8], state: Gtid, _bypass: bool) -> bool {
        // Copy our map to every joiner still waiting, as an SST script would.
        let snapshot = self.db.lock().clone();
        let joiners = self.peers.lock().clone();
        let donor = self.node().clone();
        let fail = self
            .fail_donation
            .load(std::sync::atomic::Ordering::Relaxed);
        thread::spawn(move || {
            for j in joiners {
                if j.node.get().is_some_and(|n| n.status().iter().any(|(k, v)| *k == "local_state" && *v == tandem_engine::stats::StatValue::Int(1))) {
                    if fail {
                        // What mariadbd reports when the joiner script fails.
                        j.node().sst_received(Gtid::UNDEFINED, -2);
                    } else {
                        *j.db.lock() = snapshot.clone();
                        j.node().sst_received(state, 0);
                    }
                }
            }
            if fail {
                donor.sst_sent(Gtid::UNDEFINED, -2);
            } else {
                donor.sst_sent(state, 0);
            }
        });
        true
    }
    fn synced(&self) -> bool {
        *self.synced.lock() += 1;
        true
    }
}

struct Member {
    server: Arc<FakeServer>,
    threads: Vec<thread::JoinHandle<()>>,
    /// The node's data directory, removed when the member is dropped.
    _data_dir: tempfile::TempDir,
}

fn start(hub: &Arc<LocalHub>, name: &str, bootstrap: bool, all: &Mutex<Vec<Arc<FakeServer>>>) -> Member {
    start_with_donor(hub, name, bootstrap, all, "")
}

/// `donors`: the joiner's `wsrep_sst_donor`.
fn start_with_donor(
    hub: &Arc<LocalHub>,
    name: &str,
    bootstrap: bool,
    all: &Mutex<Vec<Arc<FakeServer>>>,
    donors: &str,
) -> Member {
    start_as(hub, name, Arc::new(FakeServer::default()), bootstrap, all, donors)
}

/// A joiner with a server prepared by the caller.
fn start_server(hub: &Arc<LocalHub>, name: &str, server: Arc<FakeServer>, all: &Mutex<Vec<Arc<FakeServer>>>) -> Member {
    start_as(hub, name, server, false, all, "")
}

fn start_as(
    hub: &Arc<LocalHub>,
    name: &str,
    server: Arc<FakeServer>,
    bootstrap: bool,
    all: &Mutex<Vec<Arc<FakeServer>>>,
    donors: &str,
) -> Member {
    let hub2 = hub.clone();
    let data_dir = tempfile::Builder::new().prefix(&format!("tandem-node-{name}-")).tempdir().unwrap();
    let config = NodeConfig {
        name: name.into(),
        node_address: "127.0.0.1".into(),
        incoming: format!("{name}:3306"),
        data_dir: data_dir.path().to_path_buf(),
        options: ["evs.suspect_timeout=PT1S", server.options.lock().as_str()].join(";").trim_end_matches(';').into(),
        start_position: Gtid::UNDEFINED,
        arbitrator: false,
    };
    let node = Node::new(
        server.clone(),
        config,
        Box::new(move |c| Ok(hub2.open(c))),
    )
    .unwrap();
    server.node.set(node.clone()).ok().unwrap();
    for other in all.lock().iter() {
        other.peers.lock().push(server.clone());
    }
    all.lock().push(server.clone());
    node.connect("test", if bootstrap { "gcomm://" } else { "gcomm://127.0.0.1:1" }, donors, bootstrap).unwrap();
    let threads = (0..2)
        .map(|i| {
            let (node, server) = (node.clone(), server.clone());
            thread::spawn(move || {
                let end = node.recv(i);
                server.recv_ends.lock().push(end);
            })
        })
        .collect();
    Member { server, threads, _data_dir: data_dir }
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// One client transaction adding `amount` to `row` on `server`'s node.
fn transact(server: &FakeServer, trx_id: u64, row: u8, amount: u8) -> Status {
    let node = server.node();
    node.append_key(trx_id, vec![b"db".to_vec(), b"t".to_vec(), vec![row]], KeyType::Exclusive);
    node.append_data(trx_id, &[row, amount]);
    let (status, ordered) = node.certify(1, trx_id, flags::TRX_START | flags::TRX_END);
    match status {
        Status::Ok => server.write(ordered.gtid.seqno, trx_id, TRACKED, &[row, amount]),
        Status::TrxFail if ordered.gtid.seqno >= 0 => {
            node.commit_order_enter(trx_id, TRACKED, ordered.gtid.seqno);
            node.commit_order_leave(ordered.gtid.seqno, &[]);
        }
        _ => {}
    }
    node.release(trx_id, TRACKED);
    status
}

fn cluster(n: usize) -> (Arc<LocalHub>, Vec<Member>) {
    let hub = LocalHub::new();
    let all = Mutex::new(vec![]);
    let mut members = vec![];
    for i in 0..n {
        let m = start(&hub, &format!("n{i}"), i == 0, &all);
        let s = m.server.clone();
        wait_until("synced", || *s.synced.lock() > 0);
        members.push(m);
    }
    (hub, members)
}

fn stop(hub: Arc<LocalHub>, members: Vec<Member>) {
    for m in &members {
        m.server.node().disconnect();
    }
    for m in members {
        m.threads.into_iter().for_each(|t| t.join().unwrap());
    }
    hub.stop();
}

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
    let target = members
        .iter()
        .map(|m| m.server.node().last_committed().seqno)
        .max()
        .unwrap();
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
        let (ta, tb) = (thread::spawn({
            let a = a.clone();
            move || transact(&a, 10_000 + round, 7, 1)
        }), thread::spawn({
            let b = b.clone();
            move || transact(&b, 20_000 + round, 7, 1)
        }));
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
    wait_until("non-primary view", || {
        victim
            .views
            .lock()
            .last()
            .is_some_and(|v| v.status == ViewStatus::NonPrimary)
    });
    let synced_before = *victim.synced.lock();
    // The view request and the synced announcement after the return are
    // both lost once, as when the leader changes under them.
    let kind = |m: &[u8]| Envelope::decode(m).map(|e| e.body).ok();
    hub.lose_next(
        id,
        2,
        Box::new(move |m| {
            matches!(
                kind(m),
                Some(Body::ViewBump | Body::State(MemberState::Synced))
            )
        }),
    );
    hub.set_cut(id, false);
    wait_until("synced again", || *victim.synced.lock() > synced_before);
    assert_eq!(
        victim.views.lock().last().unwrap().status,
        ViewStatus::Primary
    );
    assert_eq!(
        transact(&victim, 777, 3, 1),
        Status::Ok,
        "ready for clients again"
    );
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
    donor
        .fail_donation
        .store(true, std::sync::atomic::Ordering::Relaxed);
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
        donor.node().status().iter().any(|(k, v)| {
            *k == "local_state_comment"
                && *v == tandem_engine::stats::StatValue::Str("Synced".into())
        })
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

fn stat(server: &FakeServer, name: &str) -> tandem_engine::stats::StatValue {
    server.node().status().into_iter().find(|(k, _)| *k == name).map(|(_, v)| v).unwrap_or_else(|| panic!("no {name}"))
}

fn int_stat(server: &FakeServer, name: &str) -> i64 {
    match stat(server, name) {
        tandem_engine::stats::StatValue::Int(n) => n,
        other => panic!("{name} is {other:?}"),
    }
}

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
        let m = if i == 0 { start_as(&hub, "n0", server, true, &all, "") } else { start_server(&hub, &format!("n{i}"), server, &all) };
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
    assert_eq!(stat(&slow, "flow_control_interval"), tandem_engine::stats::StatValue::Str(format!("[ {LIMIT}, {LIMIT} ]")));
    write_hard(&members, WRITERS, 150, 2);
    // The writers' 900 transactions arrived while the slow node applied a
    // few hundred at most: without flow control its queue peaks at hundreds.
    let bound = LIMIT + overshoot(2 * WRITERS) as i64;
    let peak = int_stat(&slow, "local_recv_queue_max");
    assert!(peak > LIMIT, "the slow node fell behind (peak queue {peak}), so flow control was exercised");
    assert!(peak <= bound, "peak queue {peak} write-sets over the bound {bound}");
    assert!(int_stat(&slow, "flow_control_sent") > 0);
    for m in &members {
        assert!(int_stat(&m.server, "flow_control_recv") >= int_stat(&slow, "flow_control_sent") - 1, "every node saw the pauses");
    }
    let writer = &members[0].server;
    assert!(int_stat(writer, "flow_control_paused_ns") > 0, "the writers were paused");
    assert_eq!(int_stat(writer, "flow_control_sent"), 0, "a fast node never pauses the group");
    // The slow node catches up, lifts its pause, and the data agree.
    wait_until("the slow node caught up", || *slow.db.lock() == *writer.db.lock());
    wait_until("the pause lifted", || stat(writer, "flow_control_active") == tandem_engine::stats::StatValue::Str("false".into()));
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
    wait_until("the writers are paused", || stat(&writer, "flow_control_active") == tandem_engine::stats::StatValue::Str("true".into()));
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

/// `wsrep_local_bf_aborts` counts a local transaction once when an applier
/// aborts it; a victim ordered before the applier is not aborted (it commits
/// first) and not counted, nor is one the provider does not know.
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
    assert_eq!(int_stat(&server, "local_bf_aborts"), 1, "an unknown victim is not counted");
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
