//! The faults of the list-append runs (issue 49), each on a 3-node cluster
//! under the clients of `list_append`, on either provider: kills of one
//! node, a majority or all (a crash, at any `innodb_flush_log_at_trx_commit`),
//! pauses (SIGSTOP) of a follower, the leader or a majority, and, where the
//! nodes live in network namespaces (`netns::Net`), partitions: one node
//! cut off, the leader cut off, a bridge (nodes 1 and 3 cannot talk, node 2
//! talks to both: two majorities that overlap), one-way (node 3 hears
//! nobody but is heard), and a flapping link. Every fault ends healed, with
//! every node synced again.
//!
//! Galera has no leader: "the leader" is node 1 there. Galera's group forms
//! again only around a bootstrapped node, so its whole-cluster and majority
//! crashes end as an operator ends them: the most advanced node
//! bootstrapped (`Cluster::bootstrap`), or the survivor told
//! `pc.bootstrap=YES`.

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tandem::cluster::Cluster;

use crate::netns::Net;
use crate::restart::{kill_all, send_signal};
use crate::{sql, status, wait_for};

/// How long a cut, a pause or a node's absence lasts: past the suspect
/// timeout of either provider, so the group notices.
const OUTAGE: Duration = Duration::from_secs(10);
const PAUSE: Duration = Duration::from_secs(5);
const SYNCED: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No fault: the clients alone, for as long as the others run.
    None,
    KillOne,
    KillMajority,
    KillAll,
    PauseFollower,
    PauseLeader,
    PauseMajority,
    IsolateOne,
    IsolateLeader,
    Bridge,
    OneWay,
    Flapping,
}

impl Fault {
    pub const ALL: [Fault; 12] = [
        Fault::None,
        Fault::KillOne,
        Fault::KillMajority,
        Fault::KillAll,
        Fault::PauseFollower,
        Fault::PauseLeader,
        Fault::PauseMajority,
        Fault::IsolateOne,
        Fault::IsolateLeader,
        Fault::Bridge,
        Fault::OneWay,
        Fault::Flapping,
    ];

    /// The name a filter (`TANDEM_LA_FAULTS`) and the table use.
    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::KillOne => "kill-one",
            Fault::KillMajority => "kill-majority",
            Fault::KillAll => "kill-all",
            Fault::PauseFollower => "pause-follower",
            Fault::PauseLeader => "pause-leader",
            Fault::PauseMajority => "pause-majority",
            Fault::IsolateOne => "isolate-one",
            Fault::IsolateLeader => "isolate-leader",
            Fault::Bridge => "bridge",
            Fault::OneWay => "one-way",
            Fault::Flapping => "flapping",
        }
    }

    /// What the fault does, in the table's words.
    pub fn words(self) -> &'static str {
        match self {
            Fault::None => "clients only, 30 s",
            Fault::KillOne => "kill -9 node 3, restart",
            Fault::KillMajority => "kill -9 nodes 2 and 3 at once, restart",
            Fault::KillAll => "kill -9 all three at once, restart",
            Fault::PauseFollower => "SIGSTOP a follower 5 s",
            Fault::PauseLeader => "SIGSTOP the leader 5 s",
            Fault::PauseMajority => "SIGSTOP nodes 2 and 3 for 5 s",
            Fault::IsolateOne => "node 3 cut off 10 s",
            Fault::IsolateLeader => "the leader cut off 10 s",
            Fault::Bridge => "nodes 1 and 3 cut apart 10 s (node 2 sees both)",
            Fault::OneWay => "node 3 hears nobody for 10 s (is heard)",
            Fault::Flapping => "node 3 cut off 1 s in every 2, 8 times",
        }
    }

    pub fn needs_network(self) -> bool {
        matches!(self, Fault::IsolateOne | Fault::IsolateLeader | Fault::Bridge | Fault::OneWay | Fault::Flapping)
    }

    /// Runs the fault on `c` (whose nodes are on `net` for the partitions)
    /// and heals it: every node synced again when this returns.
    pub fn inject(self, c: &mut Cluster, net: Option<&Net>, galera: bool) -> Result<()> {
        thread::sleep(Duration::from_secs(6)); // the clients' history before the fault
        let net = || net.context("this fault needs the nodes in network namespaces");
        match self {
            Fault::None => thread::sleep(Duration::from_secs(24)),
            Fault::KillOne => kill_and_restart(c, &[3], galera)?,
            Fault::KillMajority => kill_and_restart(c, &[2, 3], galera)?,
            Fault::KillAll => {
                kill_all(c)?;
                thread::sleep(Duration::from_secs(1));
                restart_all(c, galera)?;
            }
            Fault::PauseFollower => pause(c, &[follower(c, galera)])?,
            Fault::PauseLeader => pause(c, &[leader(c, galera)])?,
            Fault::PauseMajority => pause(c, &[2, 3])?,
            Fault::IsolateOne => cut(c, net()?, &[3])?,
            Fault::IsolateLeader => cut(c, net()?, &[leader(c, galera)])?,
            Fault::Bridge => bridge(net()?)?,
            Fault::OneWay => one_way(net()?)?,
            Fault::Flapping => flapping(net()?)?,
        }
        all_synced(c)?;
        thread::sleep(Duration::from_secs(4)); // the clients' history after it
        Ok(())
    }
}

/// The node that orders: Tandem's `wsrep_group_leader`; node 1 on Galera
/// (no leader), or when the status does not name one.
fn leader(c: &Cluster, galera: bool) -> usize {
    if galera {
        return 1;
    }
    let name = status(c.node(1), "wsrep_group_leader").unwrap_or_default();
    c.nodes().iter().find(|n| n.name == name).map_or(1, |n| n.index)
}

fn follower(c: &Cluster, galera: bool) -> usize {
    let leader = leader(c, galera);
    (1..=3).rev().find(|i| *i != leader).expect("three nodes")
}

fn all_synced(c: &mut Cluster) -> Result<()> {
    (1..=c.len()).try_for_each(|i| c.wait_synced(i, SYNCED))
}

/// Every node started again as configured: Tandem re-forms by itself;
/// Galera around its most advanced node, bootstrapped.
fn restart_all(c: &mut Cluster, galera: bool) -> Result<()> {
    if !galera {
        return (1..=c.len()).try_for_each(|i| c.start(i));
    }
    let outcome = c.bootstrap(None, false, false, SYNCED)?;
    eprintln!("Galera: bootstrapped node {} after the crash", outcome.chosen);
    Ok(())
}

/// `victims` killed at once, started again after a few seconds. A
/// survivor left without a majority waits for them (Tandem); Galera's
/// survivor is told to form the primary component again, as an operator
/// would, when the restarted nodes cannot join it.
fn kill_and_restart(c: &mut Cluster, victims: &[usize], galera: bool) -> Result<()> {
    let pids: Vec<u32> = victims.iter().map(|i| c.node(*i).pid.context("the victim runs")).collect::<Result<_>>()?;
    for pid in pids {
        send_signal(pid, "KILL")?;
    }
    for &i in victims {
        c.kill(i)?; // reaps and records the node as stopped
    }
    thread::sleep(Duration::from_secs(3));
    for &i in victims {
        c.start(i)?;
    }
    let survivor = (1..=3).find(|i| !victims.contains(i)).expect("a survivor");
    if galera && victims.len() > 1 {
        let node = c.node(survivor).clone();
        let primary = || Ok(status(&node, "wsrep_cluster_status")? == "Primary");
        if wait_for("Galera's survivor primary again", Duration::from_secs(30), primary).is_err() {
            eprintln!("Galera: pc.bootstrap on node {survivor}, the survivor");
            sql(&node, "SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'").map_err(anyhow::Error::msg)?;
        }
    }
    Ok(())
}

fn pause(c: &Cluster, nodes: &[usize]) -> Result<()> {
    let pids: Vec<u32> = nodes.iter().map(|i| c.node(*i).pid.context("the node runs")).collect::<Result<_>>()?;
    eprintln!("pausing nodes {nodes:?}");
    pids.iter().try_for_each(|pid| send_signal(*pid, "STOP"))?;
    thread::sleep(PAUSE);
    pids.iter().try_for_each(|pid| send_signal(*pid, "CONT"))
}

/// `minority` cut off from the others for `OUTAGE`, seen to leave the
/// primary component, then healed.
fn cut(c: &Cluster, net: &Net, minority: &[usize]) -> Result<()> {
    let majority: Vec<usize> = (1..=3).filter(|i| !minority.contains(i)).collect();
    eprintln!("cutting off nodes {minority:?}");
    net.split(minority, &majority)?;
    let started = Instant::now();
    for &i in minority {
        let node = c.node(i).clone();
        wait_for(&format!("node {i} out of the primary component"), Duration::from_secs(120), || {
            Ok(status(&node, "wsrep_cluster_status")? != "Primary")
        })?;
    }
    thread::sleep(OUTAGE.saturating_sub(started.elapsed()));
    net.heal()
}

fn bridge(net: &Net) -> Result<()> {
    net.split(&[1], &[3])?;
    thread::sleep(OUTAGE);
    net.heal()
}

fn one_way(net: &Net) -> Result<()> {
    net.block(1, 3)?;
    net.block(2, 3)?;
    thread::sleep(OUTAGE);
    net.heal()
}

fn flapping(net: &Net) -> Result<()> {
    for _ in 0..8 {
        net.split(&[3], &[1, 2])?;
        thread::sleep(Duration::from_secs(1));
        net.heal()?;
        thread::sleep(Duration::from_secs(1));
    }
    Ok(())
}
