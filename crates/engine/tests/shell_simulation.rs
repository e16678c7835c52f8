//! The engine's production shell on the production group, over a simulated
//! network: three `Node`s (client calls, appliers, the ticker, flow
//! control, the clean stop, the restart from a crash: the code that ships)
//! each start a member of the group on a turmoil host
//! (`RaftStarter::on_runtime`), with its log on a memory disk that a crash
//! tears as a kill -9 or a power cut would, and turmoil's TCP carries
//! everything between them. One thread steps the simulation, at the wall
//! clock's pace, since the shell's own timers and waits run on it; the
//! nodes' threads are OS threads, as mariadbd's are.
//!
//! So this is not replayed from a seed as `crates/group/tests/simulation.rs`
//! is: which thread runs when is the OS's choice. What it can find is what
//! the deterministic runs cannot reach, the shell's threads and locks
//! against the group's, and the engine's recovery (its own log replayed
//! beyond the server's position, IST from the group's) on the production
//! store. A group thread that blocks stops the simulation itself (its one
//! thread runs every member), which the runner sees and reports: the clean
//! stop of issue 44, put back with the feature `negative-tests`, is caught
//! so.
//!
//! Every run ends with the checks of `shell_sim/checks.rs`: the same
//! commits on every node, each transaction once, every acknowledged one
//! among them, in its client's order.

mod common;
mod shell_sim;
// The group simulation's network (turmoil's TCP behind `wires::Network`)
// and its power cuts.
#[path = "../../group/tests/sim_disk/mod.rs"]
mod sim_disk;
#[path = "../../group/tests/sim_net/mod.rs"]
#[allow(dead_code)]
mod sim_net;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;
use shell_sim::checks::{check_history, end_of_run};
use shell_sim::init_logging;
use shell_sim::node::{self, crash, Death, Servers, SimNode, Start};
use shell_sim::reader::Reader;
use shell_sim::world::{wait_for, World, HOSTS};
use shell_sim::writer::{acked, Work, Writer};
use tandem_engine::injected::Defect;
use tandem_group::injected::Defect as GroupDefect;

/// A run's world, servers and clients; dropped, on an error too, it stops
/// the clients and the stepping, so that a run that failed leaves no
/// client retrying in the background. (A thread blocked for good, as the
/// negative test leaves the simulation's, stays so until the process ends.)
struct Run {
    world: Arc<World>,
    servers: Servers,
    writers: Vec<Arc<Writer>>,
}

impl Run {
    fn new() -> Run {
        Run::with_defect(None)
    }

    /// A run with a defect of the group's put back (`World::start`).
    fn with_defect(defect: Option<GroupDefect>) -> Run {
        let (world, _stepper) = World::start(defect);
        Run { world, servers: Mutex::new(vec![]), writers: vec![] }
    }

    fn wait(&self, what: &str, secs: u64, cond: impl Fn() -> bool) -> Result<(), String> {
        wait_for(&self.world, what, Duration::from_secs(secs), cond)
    }

    /// As `wait`, failing at once if one of `nodes` stopped on its own.
    fn wait_running(&self, what: &str, secs: u64, nodes: &[SimNode], cond: impl Fn() -> bool) -> Result<(), String> {
        let stopped = || nodes.iter().find(|n| n.stopped()).map(|n| HOSTS[n.host]);
        self.wait(what, secs, || cond() || stopped().is_some())?;
        match stopped() {
            Some(host) => Err(format!("{host} stopped on its own while waiting for {what}")),
            None => Ok(()),
        }
    }

    /// Three nodes with `options`, the first founding the group, the
    /// others joining by state transfer, until each has a view of three.
    fn three_nodes(&self, options: &'static str) -> Result<Vec<SimNode>, String> {
        self.three_nodes_with(options, None)
    }

    /// As `three_nodes`, with `defect` put back on every node's appliers.
    fn three_nodes_with(&self, options: &'static str, defect: Option<Defect>) -> Result<Vec<SimNode>, String> {
        let mut nodes: Vec<SimNode> = vec![];
        for i in 0..3 {
            let url = if i == 0 {
                "gcomm://".to_string()
            } else {
                format!("gcomm://{}:{}", HOSTS[0], shell_sim::world::PORT)
            };
            let start = Start::fresh(i, options).with_applier_defect(defect);
            nodes.push(node::start(&self.world, i, start, &self.servers, &url));
            let s = nodes[i].server.clone();
            self.wait("synced", 30, || *s.synced.lock() > 0)?;
        }
        self.wait("three members", 30, || nodes.iter().all(|n| cluster_size(n) == 3))?;
        Ok(nodes)
    }

    /// A client of one-row transactions on `node`, on its host's row.
    fn write_on(&mut self, node: &SimNode, incarnation: u16) -> Arc<Writer> {
        self.run_on(node, Work::Rows, incarnation)
    }

    /// A client of `work` on `node`.
    fn run_on(&mut self, node: &SimNode, work: Work, incarnation: u16) -> Arc<Writer> {
        let writer = Writer::start(&node.server, node.host, work, incarnation);
        self.writers.push(writer.clone());
        writer
    }

    /// Stops every node cleanly, then the simulation.
    fn stop(&self, nodes: Vec<SimNode>) {
        nodes.into_iter().for_each(SimNode::stop);
        self.world.stop.store(true, std::sync::atomic::Ordering::Release);
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.writers.iter().for_each(|w| w.stop());
        self.world.stop.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Members of the last view the node's server was given.
fn cluster_size(node: &SimNode) -> usize {
    node.server.views.lock().last().map_or(0, |v| v.members.len())
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

/// How the leader that stops cleanly is loaded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    /// Both followers write; the leader applies as fast as it can.
    Writers,
    /// The other follower applies slowly (`slow_follower`) and flow
    /// control holds the writers back.
    FlowControl,
    /// The leader's own appliers are held when it starts to stop, with
    /// write-sets queued behind them (a backlog its flow control allows),
    /// and let go once its stop has queued the final view.
    Backlog,
}

/// Three nodes; both followers write (one-row transactions, and on one of
/// them TOI statements and streaming transactions too) while the leader
/// stops cleanly (`disconnect`, with `defect` put back on the stopping
/// thread, and on every node's appliers where the defect is theirs) under
/// `load`. The stop must end, the stopped node must have applied every
/// seqno the group ordered to it (a clean stop leaves its data at the
/// group's position when it left), and the two others go on and hold the
/// same commits, every acknowledged transaction among them.
fn leader_stops_under_load(defect: Option<Defect>, load: Load) -> Result<usize, String> {
    let mut run = Run::new();
    let on_appliers =
        defect.filter(|d| matches!(d, Defect::SendsFlowControlUnderItsLock | Defect::EndsBeforeItsBacklog));
    let slow = load == Load::FlowControl;
    // A low limit: the slow node asks for pauses and go-aheads often.
    let mut nodes = run.three_nodes_with(if slow { "gcs.fc_limit=2" } else { "" }, on_appliers)?;
    let leading = leader(&nodes).ok_or("no leader")?;
    for i in (0..3).filter(|i| *i != leading) {
        run.write_on(&nodes[i], 0);
    }
    let follower = (0..3).find(|i| *i != leading).expect("a follower");
    run.run_on(&nodes[follower], Work::Toi, 0);
    run.run_on(&nodes[follower], Work::Streams, 0);
    if slow {
        let other = (0..3).find(|i| *i != leading && *i != follower).expect("another follower");
        slow_follower(&run, &nodes[other])?;
    }
    run.wait("200 transactions", 30, || acked(&run.writers) >= 200)?;
    let stopping = nodes[leading].server.clone();
    if load == Load::Backlog {
        stopping.hold_applies.store(true, std::sync::atomic::Ordering::Release);
        run.wait("write-sets queued on the leader", 30, || common::int_stat(&stopping, "local_recv_queue") >= 3)?;
    }
    let stop = {
        let stopping = stopping.clone();
        thread::spawn(move || {
            #[cfg(feature = "negative-tests")]
            tandem_engine::injected::inject(defect);
            stopping.node().disconnect();
        })
    };
    #[cfg(not(feature = "negative-tests"))]
    let _ = defect;
    run.wait("the leader's clean stop", 60, || stop.is_finished())?;
    stopping.hold_applies.store(false, std::sync::atomic::Ordering::Release);
    nodes.remove(leading).join();
    let (ordered, applied) = (stopping.node().last_ordered(), common::int_stat(&stopping, "last_committed"));
    if applied != ordered {
        return Err(format!("the stopped leader applied up to seqno {applied} of the {ordered} ordered to it"));
    }
    let before = acked(&run.writers);
    run.wait("100 transactions after the stop", 30, || acked(&run.writers) >= before + 100)?;
    let acked = end_of_run(&run.world, &nodes, &run.writers)?;
    run.stop(nodes);
    Ok(acked)
}

/// Makes `node` apply slowly: its write-sets are held until its queue
/// makes it ask the group to pause (however slowly the writers go on a
/// loaded machine), then take 10 ms each; returns once it asked for 30
/// pauses, and go-aheads between them, while write-sets kept arriving.
fn slow_follower(run: &Run, node: &SimNode) -> Result<(), String> {
    let slow = &node.server;
    slow.apply_delay_us.store(10_000, std::sync::atomic::Ordering::Relaxed);
    slow.hold_applies.store(true, std::sync::atomic::Ordering::Release);
    let paused = || common::int_stat(slow, "flow_control_sent") > 0;
    run.wait("the slow node asking the group to pause", 30, paused)?;
    slow.hold_applies.store(false, std::sync::atomic::Ordering::Release);
    let cycled = || common::int_stat(slow, "flow_control_sent") >= 30;
    run.wait("the slow node asking for 30 pauses", 60, cycled)
}

/// Three nodes, each writing (and a follower running TOI statements and
/// streaming transactions too); the leader is cut off from both others (no
/// message passes), then the links mend. The two others go on under a
/// leader of their own while the cut-off node's clients get errors; once
/// back, it is taken back into the primary component, catches up, and its
/// client commits again. Throughout, each node reads causally what the
/// other two nodes' clients were told of (`shell_sim/reader.rs`).
fn leader_cut_off_under_load(defect: Option<GroupDefect>) -> Result<usize, String> {
    let mut run = Run::with_defect(defect);
    let nodes = run.three_nodes("")?;
    let leading = leader(&nodes).ok_or("no leader")?;
    let writers: Vec<Arc<Writer>> = nodes.iter().map(|n| run.write_on(n, 0)).collect();
    let follower = (0..3).find(|i| *i != leading).expect("a follower");
    run.run_on(&nodes[follower], Work::Toi, 0);
    run.run_on(&nodes[follower], Work::Streams, 0);
    let readers: Vec<Arc<Reader>> = nodes
        .iter()
        .map(|n| {
            Reader::start(&n.server, n.host, writers.iter().filter(|w| usize::from(w.row) != n.host).cloned().collect())
        })
        .collect();
    run.wait("200 transactions", 30, || acked(&writers) >= 200)?;
    run.world.isolate(HOSTS[leading], true);
    let others: Vec<Arc<Writer>> = writers.iter().filter(|w| usize::from(w.row) != leading).cloned().collect();
    let before = acked(&others);
    run.wait("100 transactions by the two others", 60, || acked(&others) >= before + 100)?;
    run.world.isolate(HOSTS[leading], false);
    let cut = &writers[leading];
    let before = cut.acked();
    run.wait("20 transactions on the node that was cut off", 60, || cut.acked() >= before + 20)?;
    let reads = readers.iter().map(|r| r.finish()).collect::<Result<Vec<usize>, String>>()?;
    eprintln!("causal reads that went on, per node: {reads:?}");
    let acked = end_of_run(&run.world, &nodes, &run.writers)?;
    run.stop(nodes);
    Ok(acked)
}

/// Three nodes, each writing; the leader (`leading`) or a follower is
/// killed with -9 (its log keeps every write, its server every commit)
/// while the two others go on (under a new leader, if it led), and starts
/// again a second later from what it left, as itself: it replays its own
/// log beyond its server's position, catches up from the group's (IST),
/// and its new client commits again.
fn killed_under_load(leading: bool) -> Result<usize, String> {
    let mut run = Run::new();
    let mut nodes = run.three_nodes("")?;
    let writers: Vec<Arc<Writer>> = nodes.iter().map(|n| run.write_on(n, 0)).collect();
    run.wait("200 transactions", 30, || acked(&writers) >= 200)?;
    let victim = (0..3).find(|i| (Some(*i) == leader(&nodes)) == leading).ok_or("no leader")?;
    writers[victim].kill();
    let remains = crash(&run.world, nodes.remove(victim), Death::Kill);
    let before = acked(&writers);
    run.wait("100 transactions by the two others", 60, || acked(&writers) >= before + 100)?;
    thread::sleep(Duration::from_secs(1));
    let back = node::restart(&run.world, remains, &run.servers);
    let again = run.write_on(&back, 1);
    nodes.insert(victim, back);
    run.wait_running("20 transactions on the node killed", 60, &nodes, || again.acked() >= 20)?;
    let acked = end_of_run(&run.world, &nodes, &run.writers)?;
    run.stop(nodes);
    Ok(acked)
}

/// As [`killed_under_load`] of a follower, but a byte in the middle of the
/// killed follower's log goes bad while it is down: its store trusts
/// nothing it holds, so it starts over under a new identity (see
/// docs/durability.md); its server's data is where it was, so it catches
/// up from the group's log (IST), and commits again.
fn follower_with_a_damaged_log_starts_over() -> Result<usize, String> {
    let mut run = Run::new();
    let mut nodes = run.three_nodes("")?;
    let writers: Vec<Arc<Writer>> = nodes.iter().map(|n| run.write_on(n, 0)).collect();
    run.wait("200 transactions", 30, || acked(&writers) >= 200)?;
    let victim = (0..3).find(|i| Some(*i) != leader(&nodes)).expect("a follower");
    writers[victim].kill();
    let remains = crash(&run.world, nodes.remove(victim), Death::Kill);
    let damaged = remains.damage_log().ok_or("no log segment to damage")?;
    let before = acked(&writers);
    run.wait("100 transactions by the two others", 60, || acked(&writers) >= before + 100)?;
    let back = node::restart(&run.world, remains, &run.servers);
    let again = run.write_on(&back, 1);
    nodes.insert(victim, back);
    run.wait_running("20 transactions on the node whose log was damaged", 60, &nodes, || again.acked() >= 20)?;
    eprintln!("damaged {damaged}");
    let acked = end_of_run(&run.world, &nodes, &run.writers)?;
    run.stop(nodes);
    Ok(acked)
}

/// Three nodes with `gcache.fsync=yes`, each writing, lose power at once:
/// each log's writes since its last fsync are torn, and each server loses
/// up to 40 of its last commits. A second later all three start again from
/// what they left, with no bootstrap: they form the group again, each
/// replays its own log beyond its server's position, and no acknowledged
/// transaction is lost.
fn group_lost_power_under_load(seed: u64, defect: Option<GroupDefect>) -> Result<usize, String> {
    const OPTIONS: &str = "gcache.fsync=yes";
    let mut run = Run::with_defect(defect);
    let nodes = run.three_nodes(OPTIONS)?;
    let writers: Vec<Arc<Writer>> = nodes.iter().map(|n| run.write_on(n, 0)).collect();
    run.wait("300 transactions", 30, || acked(&writers) >= 300)?;
    writers.iter().for_each(|w| w.kill());
    let mut remains = vec![];
    for n in nodes {
        let how = Death::PowerCut { seed: seed * 3 + n.host as u64, db_tail: 40 };
        remains.push(crash(&run.world, n, how));
    }
    let lost: Vec<(usize, u64)> = remains.iter().map(|r| (r.lost_commits, r.torn)).collect();
    eprintln!("seed {seed}: (server commits lost, log bytes torn) per node: {lost:?}");
    thread::sleep(Duration::from_secs(1));
    let nodes: Vec<SimNode> = remains.into_iter().map(|r| node::restart(&run.world, r, &run.servers)).collect();
    let again: Vec<Arc<Writer>> = nodes.iter().map(|n| run.write_on(n, 1)).collect();
    run.wait_running("20 transactions on each node", 90, &nodes, || again.iter().all(|w| w.acked() >= 20))?;
    let acked = end_of_run(&run.world, &nodes, &run.writers)?;
    run.stop(nodes);
    Ok(acked)
}

#[test]
fn a_leader_stops_cleanly_under_load_on_the_simulated_network() {
    init_logging();
    let acked = leader_stops_under_load(None, Load::Writers).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on both nodes that stayed");
}

#[test]
fn a_leader_stops_cleanly_under_flow_control_on_the_simulated_network() {
    init_logging();
    let acked = leader_stops_under_load(None, Load::FlowControl).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on both nodes that stayed");
}

#[test]
fn a_leader_stops_cleanly_with_a_backlog_on_the_simulated_network() {
    init_logging();
    let acked = leader_stops_under_load(None, Load::Backlog).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on both nodes that stayed");
}

#[test]
fn a_leader_cut_off_under_load_comes_back_on_the_simulated_network() {
    init_logging();
    let acked = leader_cut_off_under_load(None).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on all three nodes");
}

#[test]
fn a_follower_killed_under_load_comes_back_on_the_simulated_network() {
    init_logging();
    let acked = killed_under_load(false).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on all three nodes");
}

#[test]
fn a_leader_killed_under_load_comes_back_on_the_simulated_network() {
    init_logging();
    let acked = killed_under_load(true).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on all three nodes");
}

#[test]
fn a_follower_whose_log_was_damaged_starts_over_on_the_simulated_network() {
    init_logging();
    let acked = follower_with_a_damaged_log_starts_over().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{acked} transactions acknowledged, all of them on all three nodes");
}

/// `SHELL_SIM_SEED=n` picks the tears and the servers' lost commits (the
/// threads' timing is the OS's, so it does not replay the run).
#[test]
fn a_group_that_lost_power_under_load_keeps_every_acknowledged_commit_on_the_simulated_network() {
    init_logging();
    let seed = std::env::var("SHELL_SIM_SEED").map_or(1, |s| s.parse().expect("SHELL_SIM_SEED is a number"));
    let acked = group_lost_power_under_load(seed, None).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    eprintln!("{acked} transactions acknowledged, all of them on all three nodes");
}

/// The checks bite: each way a history can break is named.
#[test]
fn the_history_check_finds_each_broken_promise() {
    let commit = |seqno, trx_id| common::Commit { seqno, trx_id, data: vec![0, 1] };
    let good = vec![commit(1, 10), commit(2, 20), commit(4, 11)];
    let client = || vec![Writer::recorded(0, vec![10, 11]), Writer::recorded(1, vec![20])];
    assert_eq!(check_history(&good, &client()), Ok(()));
    let cases = [
        (vec![commit(1, 10), commit(2, 20)], "is on no node"),
        (vec![commit(1, 10), commit(2, 20), commit(3, 11), commit(4, 10)], "committed twice"),
        (vec![commit(1, 11), commit(2, 20), commit(3, 10)], "acknowledged earlier"),
        (vec![commit(1, 10), commit(3, 20), commit(2, 11)], "committed after"),
    ];
    for (history, named) in cases {
        let why = check_history(&history, &client()).expect_err(named);
        assert!(why.contains(named), "{history:?}: {why}");
    }
}

/// With flow control's message sent under its decision lock put back, the
/// slow node's applier that asks the group to pause waits in the group's
/// submit for the group's thread, which waits for that lock, and the run
/// says so.
#[cfg(feature = "negative-tests")]
#[test]
fn the_run_catches_flow_control_sent_under_its_lock() {
    init_logging();
    let caught = (1..=3)
        .find_map(|_| leader_stops_under_load(Some(Defect::SendsFlowControlUnderItsLock), Load::FlowControl).err());
    let why = caught.expect("flow control sent under its lock stops the group within 3 runs");
    assert!(why.contains("the simulation stopped"), "caught, but not as a blocked group thread: {why}");
    eprintln!("caught: {why}");
}

/// With the clean stop of issue 44 put back, the leader's stop under load
/// deadlocks against the group's thread, and the run says so.
#[cfg(feature = "negative-tests")]
#[test]
fn the_run_catches_a_clean_stop_that_holds_the_group_across_the_leave() {
    init_logging();
    let caught =
        (1..=3).find_map(|_| leader_stops_under_load(Some(Defect::HoldsGroupAcrossLeave), Load::Writers).err());
    let why = caught.expect("a stop holding the group across its leave deadlocks within 3 runs");
    assert!(why.contains("the simulation stopped"), "caught, but not as a blocked group thread: {why}");
    eprintln!("caught: {why}");
}

/// With the final view put back at the front of the appliers' queue,
/// dropping what was queued behind it (issue 44's other hang), the stopped
/// leader leaves seqnos the group ordered to it unapplied, and the run
/// says so. Its appliers are held while the stop queues the final view, so
/// there is a backlog to drop every time.
#[cfg(feature = "negative-tests")]
#[test]
fn the_run_catches_a_clean_stop_that_drops_its_backlog() {
    init_logging();
    let why = leader_stops_under_load(Some(Defect::EndsBeforeItsBacklog), Load::Backlog).expect_err("caught");
    assert!(why.contains("ordered to it"), "caught, but not as a backlog left unapplied: {why}");
    eprintln!("caught: {why}");
}

/// With a log that acknowledges appends before it fsyncs them put back,
/// a power cut of the whole group takes transactions already acknowledged,
/// and the run says so.
#[cfg(feature = "negative-tests")]
#[test]
fn the_run_catches_a_log_that_acknowledges_before_its_fsync() {
    init_logging();
    let caught =
        (1..=5).find_map(|seed| group_lost_power_under_load(seed, Some(GroupDefect::AcknowledgesBeforeSync)).err());
    let why = caught.expect("a log acknowledging before its fsync loses acknowledged commits within 5 power cuts");
    eprintln!("caught: {why}");
}

/// With a follower's read barrier put back that takes its own applied
/// index instead of asking the leader, a causal read on a follower goes on
/// without a transaction another node's client was told of, and the run
/// says so.
#[cfg(feature = "negative-tests")]
#[test]
fn the_run_catches_a_causal_read_that_does_not_ask_the_leader() {
    init_logging();
    let caught = (1..=3).find_map(|_| leader_cut_off_under_load(Some(GroupDefect::FollowerReadsItsOwnIndex)).err());
    let why = caught.expect("a follower reading its own index is caught within 3 runs");
    assert!(why.contains("causal read"), "caught, but not as a stale read: {why}");
    eprintln!("caught: {why}");
}
