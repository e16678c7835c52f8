//! IST from any member that still holds the history (issue 48): PXC's
//! freeze-the-donor procedure for planned maintenance, with the frozen node
//! not the leader.
//! 1. On a node that stays up (not the leader): `gcache.freeze_purge_at_seqno=now`.
//! 2. Stop another node; the cluster writes far beyond `gcache.size`.
//! 3. Restart that node with `wsrep_sst_donor=<the frozen node>`: it
//!    rejoins by IST, which only the frozen node could serve.
//! 4. `-1` on the donor: purging resumes.
//!
//! And the other way PXC documents: a designated donor with a larger
//! `gcache.size`, no freeze and no `wsrep_sst_donor`.

use std::time::{Duration, Instant};

use tandem_cluster_tests::*;

const TABLE: &str = "donor.rows";
/// The returning node.
const AWAY: usize = 2;
/// The frozen node, the donor.
const DONOR: usize = 3;

/// How the donor keeps the history the returning node needs.
#[derive(Clone, Copy, PartialEq)]
enum Keeps {
    /// `gcache.freeze_purge_at_seqno=now`, and the returning node names it
    /// in `wsrep_sst_donor`.
    Frozen,
    /// A `gcache.size` of 64M where the others have 2M, and no
    /// `wsrep_sst_donor`: the returning node finds it by itself.
    LargerCache,
}

#[test]
fn a_restart_catches_up_from_a_frozen_member_that_is_not_the_leader() -> anyhow::Result<()> {
    rejoin_from_a_follower(Keeps::Frozen)
}

#[test]
fn a_restart_catches_up_from_a_follower_with_a_larger_cache() -> anyhow::Result<()> {
    rejoin_from_a_follower(Keeps::LargerCache)
}

fn rejoin_from_a_follower(keeps: Keeps) -> anyhow::Result<()> {
    let mut c = up_with(3, |s| s.provider_options.push(("gcache.size".into(), "2M".into())))?;
    let leader_name = status(c.node(1), "wsrep_group_leader")?;
    anyhow::ensure!(leader_name == c.node(1).name, "node 1 founded the cluster and leads: {leader_name}");
    if keeps == Keeps::LargerCache {
        c.stop(DONOR)?;
        let larger = vec![("gcache.size".to_string(), "64M".to_string())];
        c.start_with(DONOR, &tandem::cluster::Start { provider_options: larger, ..Default::default() })?;
        c.wait_synced(DONOR, Duration::from_secs(120))?;
    }
    create_rows_table(c.node(1), TABLE)?;
    insert_rows(c.node(1), TABLE, 1, 0, 50, 100)?;
    checksums(c.node(AWAY), &[TABLE])?; // it has applied everything so far

    if keeps == Keeps::Frozen {
        set_provider_option(c.node(DONOR), "gcache.freeze_purge_at_seqno=now")?;
    }
    // A clean stop leaves the server at its last committed seqno.
    let position = status_i64(c.node(AWAY), "wsrep_last_committed")?;
    c.stop(AWAY)?;
    put_no_sst_marker(c.node(AWAY))?;

    // About 10 MB of write-sets (4 KB each), five times the 2M caches.
    insert_rows_on(&c, &[1, DONOR], TABLE, 1_000_000, 1250, 4000)?;
    let group_last = status_i64(c.node(1), "wsrep_last_committed")?;
    wait_for("the leader to purge past the stopped node's position", Duration::from_secs(120), || {
        Ok(status_i64(c.node(1), "wsrep_local_cached_downto")? > position + 1)
    })?;
    let leader_downto = status_i64(c.node(1), "wsrep_local_cached_downto")?;
    let donor_downto = status_i64(c.node(DONOR), "wsrep_local_cached_downto")?;
    assert!(donor_downto <= position + 1, "node {DONOR} caches from {donor_downto}, past {}", position + 1);

    let mut how = tandem::cluster::Start::default();
    if keeps == Keeps::Frozen {
        how.server_options.push(("wsrep_sst_donor".to_string(), c.node(DONOR).name.clone()));
    }
    let started = Instant::now();
    c.start_with(AWAY, &how)?;
    c.wait_synced(AWAY, Duration::from_secs(300))?;
    println!(
        "node {AWAY} at seqno {position}, group at {group_last}; the leader caches from {leader_downto}, node \
         {DONOR} from {donor_downto}; start to Synced {:.1} s",
        started.elapsed().as_secs_f64()
    );
    caught_up_by_ist(&c, position, group_last)?;

    if keeps == Keeps::Frozen {
        set_provider_option(c.node(DONOR), "gcache.freeze_purge_at_seqno=-1")?;
    }
    insert_rows_on(&c, &[1, AWAY, DONOR], TABLE, 2_000_000, 30, 100)?;
    assert_identical(&c, &[TABLE])?;
    let rows = sql(c.node(AWAY), &format!("SELECT COUNT(*) FROM {TABLE}")).map_err(anyhow::Error::msg)?;
    assert_eq!(rows, (50 + 1250 * 2 + 30 * 3).to_string(), "node {AWAY} has every row");
    Ok(())
}

/// The returning node came back by IST from the donor: its data directory
/// kept the marker a state transfer deletes, its server resumed where it
/// stopped, it received the whole gap as an IST (Galera's lines, the
/// metrics) and the IST status is empty again, and both logs say who served.
fn caught_up_by_ist(c: &tandem::cluster::Cluster, position: i64, group_last: i64) -> anyhow::Result<()> {
    assert!(
        has_no_sst_marker(c.node(AWAY)),
        "node {AWAY} ran a full state transfer (the marker in its data directory is gone) instead of IST"
    );
    assert_eq!(recovered_seqno(c.node(AWAY))?, position, "the server came back where it stopped");
    ist_was_received(c, AWAY, ist_status(c.node(AWAY))?, position, group_last)?;
    let log = error_log(c.node(AWAY));
    let line = log.lines().find(|l| l.contains("Caught up the group log from member ")).map(str::to_string);
    let line = line.ok_or_else(|| anyhow::anyhow!("node {AWAY} did not catch up from a member:\n{}", tail(&log)))?;
    assert!(line.contains(&format!("({})", c.node(DONOR).name)), "not from node {DONOR}: {line}");
    println!("{line}");
    let donor_log = error_log(c.node(DONOR));
    assert!(donor_log.contains("asks which log entries this member holds"), "node {DONOR} was not asked");
    let served = donor_log.lines().find(|l| l.contains("Served the group log to member "));
    let served =
        served.ok_or_else(|| anyhow::anyhow!("node {DONOR} did not log the end of its IST:\n{}", tail(&donor_log)))?;
    println!("{served}");
    Ok(())
}
