//! A node that was away (stopped cleanly, or killed with -9) while the
//! others wrote 20,000+ write-sets comes back by IST from the group's
//! durable log, with no SST: a file a state transfer would delete survives,
//! `wsrep_ist_receive_status` covers exactly the gap, the nodes that served
//! it still cache it, and all nodes end identical.

use std::time::{Duration, Instant};

use tandem_cluster_tests::*;

const TABLE: &str = "ist.rows";
/// Write-sets written while the node is away, split over the two others.
const GAP: u64 = 20_000;
const VICTIM: usize = 3;

fn rejoin_by_ist(crash: bool) -> anyhow::Result<()> {
    let how = if crash { "kill -9" } else { "clean stop" };
    let mut c = up(3)?;
    create_rows_table(c.node(1), TABLE)?;
    insert_rows(c.node(1), TABLE, 1, 0, 100, 50)?;
    checksums(c.node(VICTIM), &[TABLE])?; // the victim has applied everything so far
    let before = status_i64(c.node(VICTIM), "wsrep_last_committed")?;

    if crash {
        c.kill(VICTIM)?;
    } else {
        c.stop(VICTIM)?;
    }
    put_no_sst_marker(c.node(VICTIM))?;

    let started = Instant::now();
    insert_rows_on(&c, &[1, 2], TABLE, 1_000_000, GAP / 2, 50)?;
    let wrote = started.elapsed();
    let group_last = status_i64(c.node(1), "wsrep_last_committed")?;

    let started = Instant::now();
    c.start(VICTIM)?;
    c.wait_synced(VICTIM, Duration::from_secs(300))?;
    let synced = started.elapsed();
    let position = recovered_seqno(c.node(VICTIM))?;
    let ist = ist_status(c.node(VICTIM))?;
    println!(
        "IST after {how}: {GAP} write-sets written in {:.1} s; node {VICTIM} at seqno {position} \
         (last committed before it left: {before}), group at {group_last}; start to Synced {:.1} s; \
         wsrep_ist_receive_status {ist:?}",
        wrote.as_secs_f64(),
        synced.as_secs_f64()
    );

    assert!(
        has_no_sst_marker(c.node(VICTIM)),
        "node {VICTIM} ran a full state transfer (the marker in its data directory is gone) instead of IST"
    );
    if crash {
        assert!(position <= before, "InnoDB cannot be ahead of what the node committed: {position} > {before}");
    } else {
        assert_eq!(position, before, "a clean stop keeps InnoDB at the last committed seqno");
    }
    assert!(group_last - position >= GAP as i64, "the gap {position}..{group_last} holds the {GAP} write-sets");
    ist_was_received(&c, VICTIM, ist, position, group_last)?;
    for i in [1, 2] {
        let downto = status_i64(c.node(i), "wsrep_local_cached_downto")?;
        println!("node {i}: wsrep_local_cached_downto {downto}");
        assert!(
            (1..=position + 1).contains(&downto),
            "node {i} caches from {downto}, so it could not have served seqno {}",
            position + 1
        );
    }

    assert_identical(&c, &[TABLE])?;
    let rows = sql(c.node(VICTIM), &format!("SELECT COUNT(*) FROM {TABLE}")).map_err(anyhow::Error::msg)?;
    assert_eq!(rows, (100 + GAP).to_string(), "node {VICTIM} has every row");
    assert_eq!(status(c.node(VICTIM), "wsrep_cluster_size")?, "3");
    Ok(())
}

#[test]
fn rejoin_after_clean_stop_is_ist_not_sst() -> anyhow::Result<()> {
    rejoin_by_ist(false)
}

#[test]
fn rejoin_after_kill_9_is_ist_not_sst() -> anyhow::Result<()> {
    rejoin_by_ist(true)
}
