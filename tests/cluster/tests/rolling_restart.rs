//! A rolling restart under load, as a DBA runs one: every node stopped
//! cleanly in turn, the group's leader first, while tellers write on all
//! three nodes; each comes back by IST and serves writes again. Then the
//! same with two group threads, and a leader killed with -9 in the middle
//! of its clean stop. Each stop must end within a minute (a liveness bound:
//! a leader's clean stop under load used to hang for good), and at the end
//! the bank's ledger holds on every node: nothing acknowledged lost, the
//! money adds up, the nodes identical.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use tandem::cluster::Cluster;
use tandem_cluster_tests::bank::{self, Bank};
use tandem_cluster_tests::restart::{kill_while_leaving, leader, stop_within, WriteLoad, STOP_BOUND};
use tandem_cluster_tests::*;

/// Acknowledged transfers each still-running node must see while one is
/// away, and the restarted one once back: the cluster kept serving.
const ACKS: usize = 5;
const ACK_WAIT: Duration = Duration::from_secs(120);
/// sysbench clients per node beside the tellers.
const LOAD_THREADS: usize = 4;

fn cluster(group_threads: Option<&str>) -> Result<TestCluster> {
    let c = up_with(3, |spec| {
        if let Some(threads) = group_threads {
            spec.provider_options.push(("gcomm.threads".into(), threads.into()));
        }
    })?;
    bank::open(c.node(1))?;
    for i in 1..=3 {
        wait_for(&format!("the bank on node {i}"), Duration::from_secs(60), || {
            Ok(sql(c.node(i), "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM bank.account")
                .is_ok_and(|n| n == "20"))
        })?;
    }
    Ok(c)
}

/// The leader first, then the others in order.
fn restart_order(c: &Cluster) -> Result<Vec<usize>> {
    let first = leader(c, 1)?;
    Ok(std::iter::once(first).chain((1..=3).filter(|i| *i != first)).collect())
}

/// Node `victim` is down: the others go on committing; then it starts,
/// reaches Synced by IST, and commits again.
fn bring_back(c: &mut Cluster, bank: &Bank, victim: usize, how: &str) -> Result<()> {
    put_no_sst_marker(c.node(victim))?;
    for other in (1..=3).filter(|i| *i != victim) {
        bank.wait_acks(other, ACKS, ACK_WAIT).with_context(|| format!("node {other} while node {victim} is down"))?;
    }
    c.start(victim)?;
    c.wait_synced(victim, Duration::from_secs(240))?;
    ensure!(has_no_sst_marker(c.node(victim)), "node {victim} took a full state transfer after {how}, not IST");
    ensure!(ist_received(c.node(victim)).is_some(), "node {victim} logs no IST received after {how}");
    ensure!(ist_status(c.node(victim))?.is_none(), "wsrep_ist_receive_status is empty once synced");
    bank.wait_acks(victim, ACKS, ACK_WAIT).with_context(|| format!("node {victim} back after {how}"))?;
    Ok(())
}

fn restart_every_node(c: &mut Cluster, bank: &Bank) -> Result<()> {
    for i in 1..=3 {
        bank.wait_acks(i, ACKS, ACK_WAIT).with_context(|| format!("node {i} before the restarts"))?;
    }
    for victim in restart_order(c)? {
        let took = stop_within(c, victim, STOP_BOUND)?;
        println!("node {victim}: clean stop under load took {:.1} s", took.as_secs_f64());
        bring_back(c, bank, victim, "a clean stop")?;
    }
    Ok(())
}

fn check(c: &Cluster, bank: Bank, load: WriteLoad) -> Result<()> {
    let runs = load.stop();
    let ledger = bank.stop();
    println!("{runs} sysbench runs of 3 s ended well");
    println!(
        "{} transfers acknowledged, {} in doubt; errors seen: {:?}",
        ledger.acked.len(),
        ledger.doubtful.len(),
        ledger.errors
    );
    ensure!(!ledger.acked.is_empty(), "no transfer was acknowledged");
    ledger.verify(c)?;
    for i in 1..=3 {
        ensure!(status(c.node(i), "wsrep_cluster_size")? == "3", "node {i} is not in a cluster of 3");
    }
    Ok(())
}

#[test]
fn a_rolling_restart_under_load_ends_and_loses_nothing() -> Result<()> {
    let mut c = cluster(None)?;
    let load = WriteLoad::start(&c, LOAD_THREADS)?;
    let bank = Bank::start(&c, &[1, 2, 3], 1);
    restart_every_node(&mut c, &bank)?;
    check(&c, bank, load)
}

/// With two group threads, then the leader killed with -9 while it hands
/// its leadership over on its way out.
#[test]
fn two_group_threads_and_a_leader_killed_in_its_hand_over_lose_nothing() -> Result<()> {
    let mut c = cluster(Some("2"))?;
    let load = WriteLoad::start(&c, LOAD_THREADS)?;
    let bank = Bank::start(&c, &[1, 2, 3], 2);
    restart_every_node(&mut c, &bank)?;
    let victim = leader(&c, 1)?;
    kill_while_leaving(&mut c, victim)?;
    bring_back(&mut c, &bank, victim, "kill -9 in the middle of its clean stop")?;
    check(&c, bank, load)
}
