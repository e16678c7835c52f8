//! The engine's production shell on the production group, over a simulated
//! network: three `Node`s (client calls, appliers, the ticker, flow
//! control, the clean stop: the code that ships) each start a member of
//! the group on a turmoil host (`RaftStarter::on_runtime`), and turmoil's
//! TCP carries everything between them. One thread steps the simulation,
//! at the wall clock's pace, since the shell's own timers and waits run on
//! it; the nodes' threads are OS threads, as mariadbd's are.
//!
//! So this is not replayed from a seed as `crates/group/tests/simulation.rs`
//! is: which thread runs when is the OS's choice. What it can find is what
//! the deterministic runs cannot reach, the shell's threads and locks
//! against the group's. A group thread that blocks stops the simulation
//! itself (its one thread runs every member), which the runner sees and
//! reports: the clean stop of issue 44, put back with the feature
//! `negative-tests`, is caught so.

mod common;
// The group simulation's network (turmoil's TCP behind `wires::Network`).
#[path = "../../group/tests/sim_net/mod.rs"]
#[allow(dead_code)]
mod sim_net;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{transact, FakeServer};
use parking_lot::Mutex;
use tandem_engine::client::Status;
use tandem_engine::injected::Defect;
use tandem_engine::node::{GroupFactory, Node, NodeConfig};
use tandem_engine::types::Gtid;
use tandem_gcache::MemStorage;
use tandem_group::{GivenDisk, GroupStarter, RaftGroup, Wires};
use tokio::runtime::Handle;

const HOSTS: [&str; 3] = ["n1", "n2", "n3"];
const PORT: u16 = 4567;
/// How long the simulation may stand still before the run counts it as
/// stopped: its one thread is blocked (a group thread waiting for a lock).
const STALL: Duration = Duration::from_secs(5);

/// The simulation, stepped on a thread of its own (`World::start`).
#[derive(Default)]
struct World {
    /// Each host's runtime, once its software runs.
    runtimes: StdMutex<BTreeMap<&'static str, Handle>>,
    /// Steps taken: the runner's sign of life.
    steps: AtomicU64,
    stop: AtomicBool,
    /// Links to cut (`true`) or mend, carried out before the next step.
    links: StdMutex<Vec<(&'static str, &'static str, bool)>>,
}

impl World {
    /// Starts the thread that steps the simulation: three hosts, each
    /// keeping its runtime up for the members started on it.
    fn start() -> (Arc<World>, thread::JoinHandle<()>) {
        let world = Arc::new(World::default());
        let stepper = {
            let world = world.clone();
            thread::spawn(move || world.run())
        };
        (world, stepper)
    }

    fn run(self: Arc<World>) {
        let mut sim = turmoil::Builder::new()
            .simulation_duration(Duration::from_secs(3600))
            .tick_duration(Duration::from_millis(1))
            .tcp_capacity(1 << 20)
            // A LAN: turmoil's default of up to 100 ms a message would make
            // a commit a matter of several hundred.
            .min_message_latency(Duration::from_micros(100))
            .max_message_latency(Duration::from_millis(2))
            .build();
        for name in HOSTS {
            let world = self.clone();
            sim.host(name, move || {
                let world = world.clone();
                async move {
                    world.runtimes.lock().unwrap().insert(name, Handle::current());
                    std::future::pending::<()>().await;
                    Ok(())
                }
            });
        }
        let started = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            for (a, b, cut) in self.links.lock().unwrap().drain(..) {
                if cut {
                    sim.partition(a, b);
                } else {
                    sim.repair(a, b);
                }
            }
            sim.step().expect("the simulation");
            self.steps.fetch_add(1, Ordering::Release);
            // The wall clock's pace: the shell's timers run on it.
            let ahead = sim.elapsed().saturating_sub(started.elapsed());
            if !ahead.is_zero() {
                thread::sleep(ahead);
            }
        }
    }

    fn runtime(&self, host: &str) -> Handle {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(h) = self.runtimes.lock().unwrap().get(host) {
                return h.clone();
            }
            assert!(Instant::now() < deadline, "host {host} did not start");
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Cuts (or mends) the links between `host` and every other host.
    fn isolate(&self, host: &'static str, cut: bool) {
        let mut links = self.links.lock().unwrap();
        for other in HOSTS.into_iter().filter(|h| *h != host) {
            links.push((host, other, cut));
        }
    }

    /// Whether the simulation still moves: some step within `STALL`.
    fn moving(&self) -> bool {
        let before = self.steps.load(Ordering::Acquire);
        let deadline = Instant::now() + STALL;
        while Instant::now() < deadline {
            if self.steps.load(Ordering::Acquire) != before {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

/// The group of node `host`: its member on that host, over the simulated
/// network, its log in memory.
fn factory(world: Arc<World>, host: &'static str) -> GroupFactory {
    Box::new(move |mut config| {
        config.listen_addr = format!("0.0.0.0:{PORT}");
        config.me.group_addr = format!("{host}:{PORT}");
        config.wires = Some(Wires(Arc::new(sim_net::SimNet)));
        config.log.dir = None;
        config.log.memory = Some(GivenDisk(MemStorage::new()));
        let starter = RaftGroup::open(config)?.on_runtime(world.runtime(host));
        Ok(Box::new(starter) as Box<dyn GroupStarter>)
    })
}

/// A node of the simulated cluster: its server, and the threads of its
/// two appliers.
struct SimNode {
    server: Arc<FakeServer>,
    appliers: Vec<thread::JoinHandle<()>>,
    _data_dir: tempfile::TempDir,
}

fn start_node(world: &Arc<World>, i: usize, all: &Mutex<Vec<Arc<FakeServer>>>) -> SimNode {
    let host = HOSTS[i];
    let server = Arc::new(FakeServer::default());
    let data_dir = tempfile::Builder::new().prefix(&format!("tandem-shell-sim-{host}-")).tempdir().unwrap();
    let config = NodeConfig {
        name: host.into(),
        node_address: host.into(),
        incoming: format!("{host}:3306"),
        data_dir: data_dir.path().to_path_buf(),
        options: "evs.suspect_timeout=PT1S".into(),
        start_position: Gtid::UNDEFINED,
        arbitrator: false,
    };
    let node = Node::new(server.clone(), config, factory(world.clone(), host)).unwrap();
    let url = if i == 0 { "gcomm://".to_string() } else { format!("gcomm://{}:{PORT}", HOSTS[0]) };
    let appliers = common::connect(node, &server, all, &url, "", i == 0);
    SimNode { server, appliers, _data_dir: data_dir }
}

/// Waits up to `within` of wall time for `cond`, while the simulation moves.
fn wait_for(world: &World, what: &str, within: Duration, cond: impl Fn() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + within;
    while !cond() {
        if !world.moving() {
            return Err(format!("the simulation stopped while waiting for {what}: a group thread is blocked"));
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {within:?}"));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A client on one node: one-row transactions on its own row, until told
/// to stop; counts those acknowledged.
struct Writer {
    row: u8,
    stop: AtomicBool,
    acked: AtomicUsize,
    thread: StdMutex<Option<thread::JoinHandle<()>>>,
}

impl Writer {
    /// Starts a writer on node `i`, on row `i`.
    fn start(nodes: &[SimNode], i: usize) -> Arc<Writer> {
        let writer = Arc::new(Writer {
            row: i as u8,
            stop: AtomicBool::new(false),
            acked: AtomicUsize::new(0),
            thread: StdMutex::new(None),
        });
        let (server, w) = (nodes[i].server.clone(), writer.clone());
        *writer.thread.lock().unwrap() = Some(thread::spawn(move || write(server, w)));
        writer
    }

    fn acked(&self) -> usize {
        self.acked.load(Ordering::Acquire)
    }

    fn finished(&self) -> bool {
        self.thread.lock().unwrap().as_ref().is_none_or(|t| t.is_finished())
    }
}

fn write(server: Arc<FakeServer>, writer: Arc<Writer>) {
    let mut trx_id = u64::from(writer.row) << 32;
    while !writer.stop.load(Ordering::Acquire) {
        trx_id += 1;
        if transact(&server, trx_id, writer.row, 1) == Status::Ok {
            writer.acked.fetch_add(1, Ordering::AcqRel);
        } else {
            // Not primary, or stopping: a client would try again later.
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Stops the writers and the stepping when a run ends, on an error too:
/// a run that failed leaves no client retrying in the background. (A
/// thread blocked for good, as the negative test leaves the simulation's,
/// stays so until the process ends.)
struct Stopping(Arc<World>, Vec<Arc<Writer>>);

impl Drop for Stopping {
    fn drop(&mut self) {
        self.1.iter().for_each(|w| w.stop.store(true, Ordering::Release));
        self.0.stop.store(true, Ordering::Release);
    }
}

fn acked(writers: &[Arc<Writer>]) -> usize {
    writers.iter().map(|w| w.acked()).sum()
}

/// Members of the last view the server was given.
fn cluster_size(server: &FakeServer) -> usize {
    server.views.lock().last().map_or(0, |v| v.members.len())
}

/// The member `nodes` take for their group's leader.
fn leader(nodes: &[SimNode]) -> Option<usize> {
    nodes.iter().position(|n| {
        n.server.node().group().is_some_and(|g| {
            let status = g.status();
            status.leader == Some(status.me)
        })
    })
}

/// Three nodes, the first founding the group, the others joining by state
/// transfer, until each has a view of three.
fn three_nodes(world: &Arc<World>) -> Result<Vec<SimNode>, String> {
    let all = Mutex::new(vec![]);
    let mut nodes: Vec<SimNode> = vec![];
    for i in 0..3 {
        nodes.push(start_node(world, i, &all));
        let s = nodes[i].server.clone();
        wait_for(world, "synced", Duration::from_secs(30), || *s.synced.lock() > 0)?;
    }
    wait_for(world, "three members", Duration::from_secs(30), || nodes.iter().all(|n| cluster_size(&n.server) == 3))?;
    Ok(nodes)
}

/// Stops the writers, then checks that `nodes` end with the same data, in
/// which each writer's row holds at least its acknowledged transactions
/// (a transaction whose client was told of an error may have committed
/// all the same, as a COMMIT cut off by a dropped connection may).
/// Returns how many were acknowledged.
fn end_of_run(world: &World, nodes: &[SimNode], writers: &[Arc<Writer>]) -> Result<usize, String> {
    writers.iter().for_each(|w| w.stop.store(true, Ordering::Release));
    for w in writers {
        wait_for(world, "the writers' last transaction", Duration::from_secs(30), || w.finished())?;
    }
    let dbs = || nodes.iter().map(|n| n.server.db.lock().clone()).collect::<Vec<_>>();
    wait_for(world, "the same data on every node", Duration::from_secs(30), || dbs().windows(2).all(|w| w[0] == w[1]))?;
    let db = dbs().remove(0);
    for w in writers {
        let applied = db.get(&w.row).copied().unwrap_or(0);
        if applied < w.acked() as u64 {
            return Err(format!("row {}: {applied} transactions applied, {} acknowledged", w.row, w.acked()));
        }
    }
    Ok(acked(writers))
}

/// Stops every node cleanly, then the simulation.
fn stop_all(world: &World, nodes: Vec<SimNode>) {
    for n in &nodes {
        n.server.node().disconnect();
    }
    for n in nodes {
        n.appliers.into_iter().for_each(|t| t.join().unwrap());
    }
    world.stop.store(true, Ordering::Release);
}

/// Three nodes; both followers write while the leader stops cleanly
/// (`disconnect`, with `defect` put back on the stopping thread). The stop
/// must end, its appliers come back, and the two others go on and hold
/// the same data, every acknowledged transaction in it.
fn leader_stops_under_load(defect: Option<Defect>) -> Result<usize, String> {
    let (world, _stepper) = World::start();
    let mut nodes = three_nodes(&world)?;
    let leading = leader(&nodes).ok_or("no leader")?;
    let writers: Vec<Arc<Writer>> = (0..3).filter(|i| *i != leading).map(|i| Writer::start(&nodes, i)).collect();
    let _stopping = Stopping(world.clone(), writers.clone());
    wait_for(&world, "200 transactions", Duration::from_secs(30), || acked(&writers) >= 200)?;
    let stopping = nodes[leading].server.clone();
    let stop = thread::spawn(move || {
        #[cfg(feature = "negative-tests")]
        tandem_engine::injected::inject(defect);
        stopping.node().disconnect();
    });
    #[cfg(not(feature = "negative-tests"))]
    let _ = defect;
    wait_for(&world, "the leader's clean stop", Duration::from_secs(60), || stop.is_finished())?;
    let left = nodes.remove(leading);
    for applier in left.appliers {
        applier.join().unwrap();
    }
    let before = acked(&writers);
    wait_for(&world, "100 transactions after the stop", Duration::from_secs(30), || acked(&writers) >= before + 100)?;
    let acked = end_of_run(&world, &nodes, &writers)?;
    stop_all(&world, nodes);
    Ok(acked)
}

/// Three nodes, each writing; the leader is cut off from both others (no
/// message passes), then the links mend. The two others go on under a
/// leader of their own while the cut-off node's clients get errors; once
/// back, it is taken back into the primary component, catches up, and its
/// client commits again. All three end with the same data, every
/// acknowledged transaction in it.
fn leader_cut_off_under_load() -> Result<usize, String> {
    let (world, _stepper) = World::start();
    let nodes = three_nodes(&world)?;
    let leading = leader(&nodes).ok_or("no leader")?;
    let writers: Vec<Arc<Writer>> = (0..3).map(|i| Writer::start(&nodes, i)).collect();
    let _stopping = Stopping(world.clone(), writers.clone());
    wait_for(&world, "200 transactions", Duration::from_secs(30), || acked(&writers) >= 200)?;
    world.isolate(HOSTS[leading], true);
    let others: Vec<&Arc<Writer>> = writers.iter().filter(|w| usize::from(w.row) != leading).collect();
    let before: usize = others.iter().map(|w| w.acked()).sum();
    wait_for(&world, "100 transactions by the two others", Duration::from_secs(60), || {
        others.iter().map(|w| w.acked()).sum::<usize>() >= before + 100
    })?;
    world.isolate(HOSTS[leading], false);
    let cut = &writers[leading];
    let before = cut.acked();
    wait_for(&world, "20 transactions on the node that was cut off", Duration::from_secs(60), || {
        cut.acked() >= before + 20
    })?;
    let acked = end_of_run(&world, &nodes, &writers)?;
    stop_all(&world, nodes);
    Ok(acked)
}

/// `TANDEM_TEST_LOG=info` (or debug): what the nodes and members log, on
/// stderr, with the wall time.
fn init_logging() {
    struct Stderr(Instant);
    impl log::Log for Stderr {
        fn enabled(&self, _: &log::Metadata) -> bool {
            true
        }
        fn log(&self, r: &log::Record) {
            eprintln!("{:>9.3}s {:5} {}", self.0.elapsed().as_secs_f64(), r.level(), r.args());
        }
        fn flush(&self) {}
    }
    static LOGGER: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    LOGGER.get_or_init(|| {
        let level = std::env::var("TANDEM_TEST_LOG").ok().and_then(|l| l.parse::<log::LevelFilter>().ok());
        if let Some(level) = level {
            let _ = log::set_logger(Box::leak(Box::new(Stderr(Instant::now()))));
            log::set_max_level(level);
        }
    });
}

#[test]
fn a_leader_stops_cleanly_under_load_on_the_simulated_network() {
    init_logging();
    let acked = leader_stops_under_load(None).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on both nodes that stayed");
}

#[test]
fn a_leader_cut_off_under_load_comes_back_on_the_simulated_network() {
    init_logging();
    let acked = leader_cut_off_under_load().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on all three nodes");
}

/// With the clean stop of issue 44 put back, the leader's stop under load
/// deadlocks against the group's thread, and the run says so.
#[cfg(feature = "negative-tests")]
#[test]
fn the_run_catches_a_clean_stop_that_holds_the_group_across_the_leave() {
    init_logging();
    let caught = (1..=3).find_map(|_| leader_stops_under_load(Some(Defect::HoldsGroupAcrossLeave)).err());
    let why = caught.expect("a stop holding the group across its leave deadlocks within 3 runs");
    assert!(why.contains("the simulation stopped"), "caught, but not as a blocked group thread: {why}");
    eprintln!("caught: {why}");
}
