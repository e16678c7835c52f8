//! The donor of a restart's catch-up killed with -9 half-way (issue 48).
//! Four nodes: with one stopped and the donor killed, the other two still
//! make a majority of the three left (with three nodes, the one left alone
//! would lose the primary component, in Galera as here). The returning node
//! names node 1, which no longer holds what it missed, then the donor in
//! `wsrep_sst_donor` (with a trailing comma: any other node may serve
//! after them), asks for small batches (`ist.batch_size=4K`,
//! so that the catch-up lasts long enough to kill the donor in it), and the
//! donor is killed once the first batch is appended. The returning node keeps
//! the prefix it appended and then:
//! - goes on from the next member that holds the rest (node 4, frozen too)
//!   and comes back by IST, keeping its data; or
//! - with no other member that holds the rest, falls back to a full state
//!   transfer and says why.
//!
//! Bank tellers run on the leader and the donor throughout; in the end
//! every node holds every acknowledged transfer once, nothing else but
//! transfers in doubt, and the same data.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use tandem_cluster_tests::bank::{self, Bank};
use tandem_cluster_tests::*;

const TABLE: &str = "donor.rows";
/// The returning node.
const AWAY: usize = 2;
/// The frozen node it names as its donor, killed half-way.
const DONOR: usize = 3;
/// The node that may serve next.
const NEXT: usize = 4;

/// What follows the donor's death.
#[derive(Clone, Copy, PartialEq)]
enum Next {
    /// Node 4 is frozen too: the catch-up goes on from it, and the
    /// returning node comes back by IST.
    Member,
    /// Nodes 1 and 4 purged what the returning node misses: SST.
    Sst,
}

#[test]
fn a_donor_killed_mid_ist_hands_over_to_the_next_member_and_loses_nothing() -> Result<()> {
    donor_killed_mid_ist(Next::Member)
}

#[test]
fn a_donor_killed_mid_ist_with_no_other_holder_ends_in_sst_and_loses_nothing() -> Result<()> {
    donor_killed_mid_ist(Next::Sst)
}

fn donor_killed_mid_ist(next: Next) -> Result<()> {
    let mut c = up_with(4, |s| s.provider_options.push(("gcache.size".into(), "2M".into())))?;
    let leader_name = status(c.node(1), "wsrep_group_leader")?;
    ensure!(leader_name == c.node(1).name, "node 1 founded the cluster and leads: {leader_name}");
    open_bank(&c)?;
    create_rows_table(c.node(1), TABLE)?;
    insert_rows(c.node(1), TABLE, 1, 0, 50, 100)?;
    checksums(c.node(AWAY), &[TABLE])?; // it has applied everything so far

    set_provider_option(c.node(DONOR), "gcache.freeze_purge_at_seqno=now")?;
    if next == Next::Member {
        set_provider_option(c.node(NEXT), "gcache.freeze_purge_at_seqno=now")?;
    }
    let position = status_i64(c.node(AWAY), "wsrep_last_committed")?;
    c.stop(AWAY)?;
    put_no_sst_marker(c.node(AWAY))?;
    let tellers = Bank::start(&c, &[1, DONOR], 1);
    // About 10 MB of write-sets (4 KB each), five times the 2M caches.
    insert_rows_on(&c, &[1, DONOR], TABLE, 1_000_000, 1250, 4000)?;
    let purged = if next == Next::Sst { vec![1, NEXT] } else { vec![1] };
    wait_for("the unfrozen nodes to purge past the stopped node's position", Duration::from_secs(120), || {
        for &i in &purged {
            if status_i64(c.node(i), "wsrep_local_cached_downto")? <= position + 1 {
                return Ok(false);
            }
        }
        Ok(true)
    })?;

    // Node 1 first, which lacks the range, then the donor, then any other.
    let donors = format!("{},{},", c.node(1).name, c.node(DONOR).name);
    let how = tandem::cluster::Start {
        provider_options: vec![("ist.batch_size".to_string(), "4K".to_string())],
        server_options: vec![("wsrep_sst_donor".to_string(), donors)],
        ..Default::default()
    };
    let started = Instant::now();
    c.start_with(AWAY, &how)?;
    first_batch_in(&c)?;
    c.kill(DONOR)?;
    let killed = started.elapsed();
    c.wait_synced(AWAY, Duration::from_secs(300))?;
    let synced = started.elapsed();
    println!(
        "node {DONOR} killed {:.2} s after node {AWAY}'s start; node {AWAY} Synced after {:.1} s",
        killed.as_secs_f64(),
        synced.as_secs_f64()
    );
    let (stopped, leader_first) = cut_short(&c)?;
    match next {
        Next::Member => went_on_by_ist(&c, position)?,
        Next::Sst if stopped < leader_first => fell_back_to_sst(&c)?,
        Next::Sst => {
            // The kill came late (a slow poll on a loaded machine): node 1
            // holds the rest, so the node must resume by IST, not by SST.
            println!("node {AWAY} reached {stopped} before the kill, node 1 holds from {leader_first}: IST expected");
            resumed_by_ist(&c, position)?
        }
    }

    lost_nothing(&mut c, tellers)
}

/// The donor back, the freezes lifted, the tellers served on both their
/// nodes again: the ledger holds on every node, and so do the rows.
fn lost_nothing(c: &mut TestCluster, tellers: Bank) -> Result<()> {
    c.start(DONOR)?;
    c.wait_synced(DONOR, Duration::from_secs(300))?;
    for i in [DONOR, NEXT] {
        set_provider_option(c.node(i), "gcache.freeze_purge_at_seqno=-1")?;
    }
    tellers.wait_acks(1, 5, Duration::from_secs(120))?;
    tellers.wait_acks(DONOR, 5, Duration::from_secs(120))?;
    let ledger = tellers.stop();
    println!("{} transfers acknowledged, {} in doubt: {:?}", ledger.acked.len(), ledger.doubtful.len(), ledger.errors);
    ledger.verify(c)?;
    insert_rows_on(c, &[1, AWAY, DONOR, NEXT], TABLE, 2_000_000, 30, 100)?;
    assert_identical(c, &[TABLE])?;
    let rows = sql(c.node(AWAY), &format!("SELECT COUNT(*) FROM {TABLE}")).map_err(anyhow::Error::msg)?;
    assert_eq!(rows, (50 + 1250 * 2 + 30 * 4).to_string(), "node {AWAY} has every row");
    Ok(())
}

/// Waits until the returning node has appended a first batch from the
/// donor (its progress line), looking every 10 ms (not `wait_for`'s 200): on
/// a fast machine the whole catch-up takes a second or two, and the kill
/// must come early in it, before the prefix reaches what nodes 1 and 4 hold.
fn first_batch_in(c: &TestCluster) -> Result<()> {
    let started = Instant::now();
    let progress = ["Catching up the group log from member ", &format!("({}): at log index ", c.node(DONOR).name)];
    while !error_log(c.node(AWAY)).lines().any(|l| progress.iter().all(|p| l.contains(p))) {
        ensure!(started.elapsed() < Duration::from_secs(120), "node {AWAY} appended nothing from node {DONOR}");
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn open_bank(c: &TestCluster) -> Result<()> {
    bank::open(c.node(1))?;
    for i in 1..=4 {
        wait_for(&format!("the bank on node {i}"), Duration::from_secs(60), || {
            Ok(sql(c.node(i), "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM bank.account")
                .is_ok_and(|n| n == "20"))
        })?;
    }
    Ok(())
}

/// The returning node passed over node 1, named first but lacking the
/// range; its catch-up from the donor started, appended a first batch, and
/// stopped short when the donor died. Returns where it stopped and where
/// node 1's log begins.
fn cut_short(c: &tandem::cluster::Cluster) -> Result<(u64, u64)> {
    let log = error_log(c.node(AWAY));
    let line = |parts: &[&str]| log.lines().find(|l| parts.iter().all(|p| l.contains(p))).map(str::to_string);
    let lacks = format!("wsrep_sst_donor names {}, which holds committed log indexes ", c.node(1).name);
    let lacks = line(&[&lacks]).ok_or_else(|| anyhow::anyhow!("node 1's lack not said:\n{}", tail(&log)))?;
    let donor = format!("({})", c.node(DONOR).name);
    let appended = line(&["Catching up the group log from member ", &donor, ": at log index "]);
    let appended =
        appended.ok_or_else(|| anyhow::anyhow!("node {AWAY} appended nothing from the donor:\n{}", tail(&log)))?;
    let stopped = line(&["Catching up from member ", &donor, " stopped at log index "]);
    let stopped =
        stopped.ok_or_else(|| anyhow::anyhow!("node {AWAY}'s catch-up did not stop short:\n{}", tail(&log)))?;
    println!("{lacks}\n{appended}\n{stopped}");
    ensure!(line(&["Caught up the group log from member ", &donor]).is_none(), "the donor finished before its death");
    let number_after = |text: &str, tag: &str| -> Result<u64> {
        let rest = text.split(tag).nth(1).ok_or_else(|| anyhow::anyhow!("no {tag:?} in {text:?}"))?;
        Ok(rest.split(|ch: char| !ch.is_ascii_digit()).next().unwrap_or_default().parse()?)
    };
    Ok((number_after(&stopped, "stopped at log index ")?, number_after(&lacks, "committed log indexes ")?))
}

/// The catch-up went on from node 4 and the node came back by IST: the
/// data stayed, the whole gap was received, the status is empty again.
fn went_on_by_ist(c: &tandem::cluster::Cluster, position: i64) -> Result<()> {
    let log = error_log(c.node(AWAY));
    let next = format!("({})", c.node(NEXT).name);
    let line = log.lines().find(|l| l.contains("Caught up the group log from member ") && l.contains(&next));
    let line = line.ok_or_else(|| anyhow::anyhow!("node {AWAY} did not go on from node {NEXT}:\n{}", tail(&log)))?;
    println!("{line}");
    resumed_by_ist(c, position)
}

/// The returning node kept its data and the server resumed by IST from
/// where it stopped.
fn resumed_by_ist(c: &tandem::cluster::Cluster, position: i64) -> Result<()> {
    ensure!(has_no_sst_marker(c.node(AWAY)), "node {AWAY} ran a full state transfer instead of IST");
    assert_eq!(recovered_seqno(c.node(AWAY))?, position, "the server came back where it stopped");
    // The tellers keep writing: the IST ends wherever the group was when
    // node 2 joined, somewhere past the 10 MB written while it was away.
    let group_last = status_i64(c.node(1), "wsrep_last_committed")?;
    assert_eq!(ist_status(c.node(AWAY))?, None, "wsrep_ist_receive_status is empty once the IST is done");
    let last = ist_went_on_from(c, AWAY, position)?;
    ensure!(last > position + 2500, "the IST covers the gap: {position}..{last}");
    ensure!(last <= group_last, "{last} > {group_last}");
    Ok(())
}

/// No member but the dead donor held the rest: SST, and the log says why.
/// (Galera's IST would fail the same way: no other node caches the gap.)
fn fell_back_to_sst(c: &tandem::cluster::Cluster) -> Result<()> {
    let log = error_log(c.node(AWAY));
    ensure!(log.contains("falling back to a full state transfer (SST)"), "no SST line:\n{}", tail(&log));
    ensure!(
        !has_no_sst_marker(c.node(AWAY)),
        "node {AWAY} got a full state transfer (its data directory was replaced)"
    );
    assert_eq!(ist_status(c.node(AWAY))?, None, "no IST reported after an SST");
    Ok(())
}
