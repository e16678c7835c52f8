//! What the engine-cluster tests share: a fake server that applies
//! write-sets to a map the way MariaDB does (commit order calls inside
//! apply), and helpers that start, drive and stop nodes on the in-process
//! group hub. Each test file uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tandem_engine::app::{Application, Applied, ApplyJob};
use tandem_engine::client::{Status, TRACKED};
use tandem_engine::local_group::LocalHub;
use tandem_engine::node::{Node, NodeConfig, RecvEnd};
use tandem_engine::types::{Gtid, Uuid};
use tandem_engine::view::View;
use tandem_engine::writeset::{flags, KeyType};

pub type Db = BTreeMap<u8, u64>;

/// One write-set the server committed, in commit order: what InnoDB's
/// redo log holds of it (the seqno is its wsrep XID).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    pub seqno: i64,
    pub trx_id: u64,
    pub data: Vec<u8>,
}

/// The rows `commits` leave, from empty.
pub fn db_of(commits: &[Commit]) -> Db {
    let mut db = Db::new();
    for c in commits {
        add(&mut db, &c.data);
    }
    db
}

fn add(db: &mut Db, data: &[u8]) {
    for pair in data.chunks(2) {
        *db.entry(pair[0]).or_default() += pair[1] as u64;
    }
}

#[derive(Default)]
pub struct FakeServer {
    pub node: OnceLock<Node>,
    pub db: Mutex<Db>,
    /// Every commit since the server's data began (a state transfer copies
    /// the donor's), changed only with `db` locked.
    pub commits: Mutex<Vec<Commit>>,
    /// Where the last state transfer put the data, if one did.
    pub installed: Mutex<Option<Gtid>>,
    pub views: Mutex<Vec<View>>,
    pub synced: Mutex<u32>,
    /// Where a donor "sends" its state: the joiner's server.
    pub peers: Mutex<Vec<Arc<FakeServer>>>,
    /// As donor: the transfer fails (the donor's SST script exits non-zero).
    pub fail_donation: std::sync::atomic::AtomicBool,
    /// As joiner: the server fails to prepare for a transfer (its SST
    /// script refuses, a certificate is missing).
    pub fail_prepare: std::sync::atomic::AtomicBool,
    /// How each of this node's applier loops ended.
    pub recv_ends: Mutex<Vec<RecvEnd>>,
    /// Every write-set from another node fails to apply, with no error for
    /// the group to vote on (the server's apply returns failure).
    pub fail_applies: std::sync::atomic::AtomicBool,
    /// Each remote write-set takes this long to apply (a slow node).
    pub apply_delay_us: std::sync::atomic::AtomicU64,
    /// While set, remote write-sets wait before they are applied (a node
    /// whose appliers are stuck).
    pub hold_applies: std::sync::atomic::AtomicBool,
    /// While set, a delivered view waits in the server's view callback
    /// (a server slow to take a membership change).
    pub hold_views: std::sync::atomic::AtomicBool,
    /// While set, the server waits in its connected callback (a joiner's
    /// server slow to be brought in step).
    pub hold_connected: std::sync::atomic::AtomicBool,
    /// Provider options beyond the tests' defaults.
    pub options: Mutex<String>,
    /// Fragments of streaming transactions applied here and not yet
    /// committed, by (origin, transaction): the server's streaming log.
    pub streams: Mutex<BTreeMap<(Uuid, u64), Vec<u8>>>,
    /// The transactions whose rollback fragment came through `apply`.
    pub stream_rollbacks: Mutex<Vec<u64>>,
    /// A defect put back on the node's applier threads (feature
    /// `negative-tests`), set before it connects.
    pub applier_defect: Mutex<Option<tandem_engine::injected::Defect>>,
}

impl FakeServer {
    pub fn node(&self) -> &Node {
        self.node.get().expect("node set")
    }

    pub fn write(&self, seqno: i64, trx_id: u64, opaque: usize, data: &[u8]) {
        self.write_as(seqno, trx_id, opaque, data, trx_id);
    }

    /// As `write`, recording the commit as transaction `id` (a statement
    /// in total order isolation has no transaction id: its connection's).
    pub fn write_as(&self, seqno: i64, trx_id: u64, opaque: usize, data: &[u8], id: u64) {
        assert_eq!(self.node().commit_order_enter(trx_id, opaque, seqno), Status::Ok);
        self.record(seqno, id, data);
        self.node().commit_order_leave(seqno, &[]);
    }

    /// Commits `data` at `seqno` as transaction `id`, the caller holding
    /// the commit order (a statement in total order isolation does).
    pub fn record(&self, seqno: i64, id: u64, data: &[u8]) {
        let mut db = self.db.lock();
        add(&mut db, data);
        self.commits.lock().push(Commit { seqno, trx_id: id, data: data.to_vec() });
    }

    /// A server restarted on `commits` (what survived of another's) and
    /// the state transfer that `installed` them, if one did.
    pub fn restored(commits: Vec<Commit>, installed: Option<Gtid>) -> FakeServer {
        let server = FakeServer { db: Mutex::new(db_of(&commits)), ..FakeServer::default() };
        *server.commits.lock() = commits;
        *server.installed.lock() = installed;
        server
    }

    /// The data's position, as `mariadbd --wsrep-recover` reads it: the
    /// history of the last primary view or transfer, and the last commit.
    pub fn position(&self) -> Gtid {
        let history = self.views.lock().iter().rev().map(|v| v.state_id.uuid).find(|u| !u.is_nil());
        position_of(history, &self.commits.lock(), *self.installed.lock())
    }
}

/// Where data made of `commits`, on a transfer that `installed` them if
/// one did, stands in `history` (else the transfer's).
pub fn position_of(history: Option<Uuid>, commits: &[Commit], installed: Option<Gtid>) -> Gtid {
    let last = commits.last().map_or(-1, |c| c.seqno);
    let seqno = last.max(installed.map_or(-1, |g| g.seqno));
    match history.or(installed.map(|g| g.uuid)) {
        Some(uuid) if seqno >= 0 => Gtid { uuid, seqno },
        _ => Gtid::UNDEFINED,
    }
}

impl FakeServer {
    /// What this server's `sst_request` returns: the address its (fake)
    /// receiver listens on, its own.
    fn request(&self) -> Vec<u8> {
        format!("fake\0{:p}", self as *const FakeServer).into_bytes()
    }
}

impl Application for FakeServer {
    fn connected(&self, view: &View) -> bool {
        // The server takes a joiner's first view from connected_cb.
        self.views.lock().push(view.clone());
        while self.hold_connected.load(std::sync::atomic::Ordering::Acquire) {
            thread::sleep(Duration::from_millis(1));
        }
        true
    }
    fn view(&self, _ctx: usize, view: &View) -> bool {
        self.views.lock().push(view.clone());
        while self.hold_views.load(std::sync::atomic::Ordering::Acquire) {
            thread::sleep(Duration::from_millis(1));
        }
        true
    }
    fn sst_request(&self) -> Option<Vec<u8>> {
        if self.fail_prepare.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        Some(self.request())
    }
    fn apply(&self, _ctx: usize, job: &ApplyJob<'_>) -> Applied {
        if self.fail_applies.load(std::sync::atomic::Ordering::Relaxed) {
            return Applied { ok: false, exit_loop: false };
        }
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
            let id = if job.flags & flags::ISOLATION != 0 { job.conn_id } else { job.trx_id };
            self.write_as(job.gtid.seqno, job.trx_id, job.opaque, job.data, id);
        }
        Applied { ok: true, exit_loop: false }
    }
    fn sst_donate(&self, _ctx: usize, request: &[u8], state: Gtid, bypass: bool) -> bool {
        // Copy our map to the joiner that asked, as an SST script would; in
        // bypass mode (an IST's handshake) nothing is copied, and the joiner
        // reports its own position.
        let snapshot = {
            let db = self.db.lock();
            (db.clone(), self.commits.lock().clone())
        };
        let joiners: Vec<_> = self.peers.lock().iter().filter(|j| j.request() == request).cloned().collect();
        let donor = self.node().clone();
        let fail = self.fail_donation.load(std::sync::atomic::Ordering::Relaxed);
        thread::spawn(move || {
            for j in joiners {
                // The request names the joiner's receiver, which listens
                // from its sst_request on, whatever its provider's state.
                if j.node.get().is_some() {
                    if fail {
                        // What mariadbd reports when the joiner script fails.
                        j.node().sst_received(Gtid::UNDEFINED, -2);
                    } else if bypass {
                        j.node().sst_received(state, 0);
                    } else {
                        let mut db = j.db.lock();
                        *db = snapshot.0.clone();
                        *j.commits.lock() = snapshot.1.clone();
                        *j.installed.lock() = Some(state);
                        drop(db);
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

pub struct Member {
    pub server: Arc<FakeServer>,
    pub threads: Vec<thread::JoinHandle<()>>,
    /// The node's data directory, removed when the member is dropped.
    pub data_dir: tempfile::TempDir,
}

pub fn start(hub: &Arc<LocalHub>, name: &str, bootstrap: bool, all: &Mutex<Vec<Arc<FakeServer>>>) -> Member {
    start_with_donor(hub, name, bootstrap, all, "")
}

/// `donors`: the joiner's `wsrep_sst_donor`.
pub fn start_with_donor(
    hub: &Arc<LocalHub>,
    name: &str,
    bootstrap: bool,
    all: &Mutex<Vec<Arc<FakeServer>>>,
    donors: &str,
) -> Member {
    start_at(hub, name, Arc::new(FakeServer::default()), bootstrap, all, donors, Gtid::UNDEFINED)
}

/// A joiner with a server prepared by the caller.
pub fn start_server(
    hub: &Arc<LocalHub>,
    name: &str,
    server: Arc<FakeServer>,
    all: &Mutex<Vec<Arc<FakeServer>>>,
) -> Member {
    start_at(hub, name, server, false, all, "", Gtid::UNDEFINED)
}

/// A member whose server gives `start_position` at init
/// (`wsrep_start_position`; `Gtid::UNDEFINED` for a new data dir).
pub fn start_at(
    hub: &Arc<LocalHub>,
    name: &str,
    server: Arc<FakeServer>,
    bootstrap: bool,
    all: &Mutex<Vec<Arc<FakeServer>>>,
    donors: &str,
    start_position: Gtid,
) -> Member {
    let hub2 = hub.clone();
    let data_dir = tempfile::Builder::new().prefix(&format!("tandem-node-{name}-")).tempdir().unwrap();
    let config = NodeConfig {
        name: name.into(),
        node_address: "127.0.0.1".into(),
        incoming: format!("{name}:3306"),
        data_dir: data_dir.path().to_path_buf(),
        options: ["evs.suspect_timeout=PT1S", server.options.lock().as_str()].join(";").trim_end_matches(';').into(),
        start_position,
        arbitrator: false,
    };
    let node = Node::new(server.clone(), config, Box::new(move |c| Ok(hub2.open(c)))).unwrap();
    let url = if bootstrap { "gcomm://" } else { "gcomm://127.0.0.1:1" };
    let threads = connect(node, &server, all, url, donors, bootstrap);
    Member { server, threads, data_dir }
}

/// Gives `server` its `node`, makes it a peer of `all` (state transfers go
/// between peers), connects the node to the cluster at `url`, and starts
/// its two applier threads, which note how their loops end.
pub fn connect(
    node: Node,
    server: &Arc<FakeServer>,
    all: &Mutex<Vec<Arc<FakeServer>>>,
    url: &str,
    donors: &str,
    bootstrap: bool,
) -> Vec<thread::JoinHandle<()>> {
    server.node.set(node.clone()).ok().unwrap();
    // Both ways: a server started again after the others (a whole group
    // restarted) donates to them too, the IST handshake's bypass included;
    // knowing none, it left a joiner waiting for good.
    for other in all.lock().iter() {
        other.peers.lock().push(server.clone());
        server.peers.lock().push(other.clone());
    }
    all.lock().push(server.clone());
    node.connect("test", url, donors, bootstrap).unwrap();
    appliers(&node, server)
}

/// The node's two applier threads, which note how their loops end.
pub fn appliers(node: &Node, server: &Arc<FakeServer>) -> Vec<thread::JoinHandle<()>> {
    (0..2)
        .map(|i| {
            let (node, server) = (node.clone(), server.clone());
            thread::spawn(move || {
                #[cfg(feature = "negative-tests")]
                tandem_engine::injected::inject(*server.applier_defect.lock());
                let end = node.recv(i);
                server.recv_ends.lock().push(end);
            })
        })
        .collect()
}

pub fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// One client transaction adding `amount` to `row` on `server`'s node.
pub fn transact(server: &FakeServer, trx_id: u64, row: u8, amount: u8) -> Status {
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

pub fn cluster(n: usize) -> (Arc<LocalHub>, Vec<Member>) {
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

pub fn stop(hub: Arc<LocalHub>, members: Vec<Member>) {
    for m in &members {
        m.server.node().disconnect();
    }
    for m in members {
        m.threads.into_iter().for_each(|t| t.join().unwrap());
    }
    hub.stop();
}

pub fn stat(server: &FakeServer, name: &str) -> tandem_engine::stats::StatValue {
    server.node().status().into_iter().find(|(k, _)| *k == name).map(|(_, v)| v).unwrap_or_else(|| panic!("no {name}"))
}

pub fn int_stat(server: &FakeServer, name: &str) -> i64 {
    match stat(server, name) {
        tandem_engine::stats::StatValue::Int(n) => n,
        other => panic!("{name} is {other:?}"),
    }
}
