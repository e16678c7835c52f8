//! Every node killed with -9 at once under writes on all three, then all
//! restarted with their configuration unchanged (no `--wsrep-new-cluster`):
//! the cluster forms again by itself from the members' durable logs, and
//! every commit acknowledged to a client is on every node. Run with each
//! `innodb_flush_log_at_trx_commit`: with 0 (and 2 on a power loss) InnoDB
//! itself may lose the last commits, which the log then replays.

use std::thread;
use std::time::{Duration, Instant};

use tandem_cluster_tests::restart::kill_all;
use tandem_cluster_tests::*;

const TABLE: &str = "crash.acks";

fn whole_cluster_kill_and_restart(flush_log_at_trx_commit: u32) -> anyhow::Result<()> {
    let flush = flush_log_at_trx_commit.to_string();
    let mut c = up_with(3, |s| s.mysqld_options.push(("innodb_flush_log_at_trx_commit".into(), flush.clone())))?;
    sql(
        c.node(1),
        &format!("CREATE DATABASE crash; CREATE TABLE {TABLE} (node INT, seq INT, PRIMARY KEY (node, seq))"),
    )
    .map_err(anyhow::Error::msg)?;
    let writers = AckedWriters::start(&c, TABLE);

    // Writes go on for a while, then all three die at the same instant.
    thread::sleep(Duration::from_secs(6));
    kill_all(&mut c)?;
    let acked = writers.stop();
    assert!(!acked.is_empty(), "writes were acknowledged before the crash");

    let started = Instant::now();
    for i in 1..=3 {
        c.start(i)?;
    }
    for i in 1..=3 {
        c.wait_synced(i, Duration::from_secs(300))?;
    }
    let took = started.elapsed();
    let positions: Vec<i64> = (1..=3).map(|i| recovered_seqno(c.node(i))).collect::<anyhow::Result<_>>()?;
    let last = status_i64(c.node(1), "wsrep_last_committed")?;
    println!(
        "innodb_flush_log_at_trx_commit={flush}: {} commits acknowledged; InnoDB positions after the crash \
         {positions:?}; restart of all three to all Synced {:.1} s; last committed after the restart {last}",
        acked.len(),
        took.as_secs_f64()
    );

    for i in 1..=3 {
        let n = c.node(i);
        assert_eq!(status(n, "wsrep_cluster_size")?, "3", "node {i} is in the re-formed cluster");
        assert_eq!(status(n, "wsrep_cluster_status")?, "Primary", "node {i}");
        let missing = missing_acked(n, TABLE, &acked)?;
        assert!(missing.is_empty(), "node {i} lost {} acknowledged commits: {missing:?}", missing.len());
    }
    assert_identical(&c, &[TABLE])?;
    // The re-formed cluster takes writes.
    sql(c.node(2), &format!("INSERT INTO {TABLE} VALUES (9, 1)")).map_err(anyhow::Error::msg)?;
    assert_identical(&c, &[TABLE])?;
    Ok(())
}

#[test]
fn whole_cluster_kill_9_flush_at_commit_1() -> anyhow::Result<()> {
    whole_cluster_kill_and_restart(1)
}

#[test]
fn whole_cluster_kill_9_flush_at_commit_2() -> anyhow::Result<()> {
    whole_cluster_kill_and_restart(2)
}

#[test]
fn whole_cluster_kill_9_flush_at_commit_0() -> anyhow::Result<()> {
    whole_cluster_kill_and_restart(0)
}
