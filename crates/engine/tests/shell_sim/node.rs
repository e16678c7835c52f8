//! A node of the simulated cluster: the engine's `Node` as it ships, its
//! server (the tests' `FakeServer`), and its group member on its host,
//! with its log on a memory disk; and what a crash leaves of it (the
//! server's commits, the group's disk, the data directory) to start again
//! from.

use std::path::Path;
use std::sync::Arc;
use std::thread;

use parking_lot::Mutex;
use tandem_engine::node::{GroupFactory, Node, NodeConfig};
use tandem_engine::types::Gtid;
use tandem_gcache::MemStorage;
use tandem_group::{GivenDisk, GroupStarter, RaftGroup, Wires};
use tempfile::TempDir;

use super::world::{World, HOSTS, PORT};
use crate::common::{self, FakeServer};
use crate::{sim_disk, sim_net};

/// Every node's options, before the scenario's own.
const OPTIONS: &str = "evs.suspect_timeout=PT1S";

/// The servers of the cluster, every incarnation: a donor copies its data
/// to those of them waiting for a transfer.
pub type Servers = Mutex<Vec<Arc<FakeServer>>>;

pub struct SimNode {
    /// Index of its host in `HOSTS`.
    pub host: usize,
    pub server: Arc<FakeServer>,
    appliers: Vec<thread::JoinHandle<()>>,
    /// The group's log, as the member writes it.
    disk: MemStorage,
    data_dir: TempDir,
    /// Its options beyond `OPTIONS`, kept for its restart.
    options: &'static str,
}

/// What a node starts from.
pub struct Start {
    pub server: Arc<FakeServer>,
    pub disk: MemStorage,
    pub data_dir: TempDir,
    /// The server's `wsrep_start_position`.
    pub position: Gtid,
    /// Options beyond `OPTIONS`.
    pub options: &'static str,
}

impl Start {
    /// With `defect` put back on the node's appliers.
    pub fn with_applier_defect(self, defect: Option<tandem_engine::injected::Defect>) -> Start {
        *self.server.applier_defect.lock() = defect;
        self
    }

    /// A new node: no data, no log.
    pub fn fresh(host: usize, options: &'static str) -> Start {
        Start {
            server: Arc::new(FakeServer::default()),
            disk: MemStorage::new(),
            data_dir: data_dir(host),
            position: Gtid::UNDEFINED,
            options,
        }
    }
}

fn data_dir(host: usize) -> TempDir {
    tempfile::Builder::new().prefix(&format!("tandem-shell-sim-{}-", HOSTS[host])).tempdir().unwrap()
}

/// The group of the node on `host`: its member on that host, over the
/// simulated network, its log on `disk`.
fn factory(world: Arc<World>, host: &'static str, disk: MemStorage) -> GroupFactory {
    Box::new(move |mut config| {
        config.listen_addr = format!("0.0.0.0:{PORT}");
        config.me.group_addr = format!("{host}:{PORT}");
        config.wires = Some(Wires(Arc::new(sim_net::SimNet)));
        config.log.dir = None;
        config.log.memory = Some(GivenDisk(disk.clone()));
        let starter = RaftGroup::open(config)?.on_runtime(world.runtime(host));
        Ok(Box::new(starter) as Box<dyn GroupStarter>)
    })
}

/// Starts the node of `host` from `start`, connecting to `url`.
pub fn start(world: &Arc<World>, host: usize, start: Start, servers: &Servers, url: &str) -> SimNode {
    let name = HOSTS[host];
    let config = NodeConfig {
        name: name.into(),
        node_address: name.into(),
        incoming: format!("{name}:3306"),
        data_dir: start.data_dir.path().to_path_buf(),
        options: [OPTIONS, start.options].join(";").trim_end_matches(';').into(),
        start_position: start.position,
        arbitrator: false,
    };
    let node = Node::new(start.server.clone(), config, factory(world.clone(), name, start.disk.clone())).unwrap();
    let appliers = common::connect(node, &start.server, servers, url, "", url == "gcomm://");
    SimNode { host, server: start.server, appliers, disk: start.disk, data_dir: start.data_dir, options: start.options }
}

/// The address of every host: where a restarted node looks for its group.
pub fn everyone() -> String {
    let hosts: Vec<String> = HOSTS.iter().map(|h| format!("{h}:{PORT}")).collect();
    format!("gcomm://{}", hosts.join(","))
}

impl SimNode {
    /// Stops the node cleanly and waits for its appliers.
    pub fn stop(self) {
        self.server.node().disconnect();
        self.appliers.into_iter().for_each(|t| t.join().unwrap());
    }

    /// Whether the node stopped on its own: its appliers' loops all ended
    /// (it refused to go on, as a node whose data is ahead of the group's
    /// history does: "restart required").
    pub fn stopped(&self) -> bool {
        self.server.recv_ends.lock().len() >= self.appliers.len()
    }

    /// Waits for the appliers of a node that was stopped.
    pub fn join(self) {
        self.appliers.into_iter().for_each(|t| t.join().unwrap());
    }
}

/// How a node dies.
#[derive(Clone, Copy, Debug)]
pub enum Death {
    /// kill -9: every write the group's log made is kept (the page cache
    /// survives), and so is every commit of the server.
    Kill,
    /// A power cut: the log's writes since its last fsync are torn at a
    /// point `seed`'s draws pick, and the server loses up to `db_tail` of
    /// its last commits (InnoDB with `innodb_flush_log_at_trx_commit=2`),
    /// never what a state transfer installed.
    PowerCut { seed: u64, db_tail: u64 },
}

/// What a dead node left: what it starts again from.
pub struct Remains {
    pub host: usize,
    pub start: Start,
    /// Commits the server lost in the crash.
    pub lost_commits: usize,
    /// Bytes of the log's writes the power cut tore.
    pub torn: u64,
}

/// `node`'s host dies as `how` says. Its disks are taken at the instant
/// of the crash, on the simulation's thread; the `Node` left behind (its
/// OS threads live on in this process, as a killed process's do not) is
/// stopped on a thread of its own, and nothing it does after counts.
pub fn crash(world: &World, node: SimNode, how: Death) -> Remains {
    let taken = Arc::new(Mutex::new(None));
    let (server, disk, into) = (node.server.clone(), node.disk.clone(), taken.clone());
    let (host, dir, options) = (node.host, node.data_dir.path().to_path_buf(), node.options);
    world.crash(HOSTS[host], move || *into.lock() = Some(take(host, &server, &disk, &dir, how, options)));
    thread::spawn(move || node.stop());
    let remains = taken.lock().take();
    remains.expect("taken at the crash")
}

/// What the node on `host` leaves if it dies now as `how` says.
fn take(host: usize, server: &FakeServer, disk: &MemStorage, dir: &Path, how: Death, options: &'static str) -> Remains {
    let history = Some(server.position().uuid).filter(|u| !u.is_nil());
    let mut commits = server.commits.lock().clone();
    let installed = *server.installed.lock();
    let (disk, lost_commits, torn) = match how {
        Death::Kill => (disk.kill(), 0, 0),
        Death::PowerCut { seed, db_tail } => {
            let mut draw = sim_disk::tear_draws(seed);
            let (after, torn) = sim_disk::power_cut(disk, &mut draw);
            let image = installed.map_or(0, |g| commits.iter().take_while(|c| c.seqno <= g.seqno).count());
            let keep = commits.len().saturating_sub((draw() % (db_tail + 1)) as usize).max(image);
            let lost = commits.len() - keep;
            commits.truncate(keep);
            (after, lost, torn)
        }
    };
    let position = common::position_of(history, &commits, installed);
    let server = Arc::new(FakeServer::restored(commits, installed));
    let start = Start { server, disk, data_dir: data_dir_copy(host, dir), position, options };
    Remains { host, start, lost_commits, torn }
}

/// A copy of the data directory as it is now (grastate.dat and the like).
fn data_dir_copy(host: usize, dir: &Path) -> TempDir {
    let copy = data_dir(host);
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
    }
    copy
}

/// Starts the dead node's host again, and the node on it from what it
/// left, looking for its group at every host's address.
pub fn restart(world: &Arc<World>, remains: Remains, servers: &Servers) -> SimNode {
    world.bounce(HOSTS[remains.host]);
    start(world, remains.host, remains.start, servers, &everyone())
}

impl Remains {
    /// Inverts a byte in the middle of the first segment of the dead
    /// node's log, as a failing disk would: its store can no longer trust
    /// what it holds. Returns the file damaged.
    pub fn damage_log(&self) -> Option<String> {
        let disk = &self.start.disk;
        let names = tandem_gcache::Storage::list(disk).ok()?;
        let first = names.into_iter().filter(|n| n.ends_with(".seg")).min()?;
        let len = disk.file_len(&first)?;
        disk.flip_byte(&first, len / 2).then_some(first)
    }
}
