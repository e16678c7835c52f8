//! kill -9 one node at a time under continuous writes on all nodes, restart
//! it, again and again: no acknowledged commit is lost and all nodes end
//! identical.

use std::thread;
use std::time::{Duration, Instant};

use tandem_cluster_tests::*;

#[test]
fn crash_restart_cycles_lose_no_acknowledged_commit() -> anyhow::Result<()> {
    let mut c = up(3)?;
    sql(c.node(1), "CREATE DATABASE crash; CREATE TABLE crash.acks (node INT, seq INT, PRIMARY KEY (node, seq))")
        .map_err(anyhow::Error::msg)?;
    let writers = AckedWriters::start(&c, "crash.acks");

    let minutes = workload_seconds().max(60) * 3;
    let deadline = Instant::now() + Duration::from_secs(minutes);
    let mut cycles = 0;
    while Instant::now() < deadline {
        let victim = 1 + cycles % 3;
        thread::sleep(Duration::from_secs(5));
        c.kill(victim)?;
        thread::sleep(Duration::from_secs(2));
        c.start(victim)?;
        c.wait_synced(victim, Duration::from_secs(240))?;
        cycles += 1;
    }
    let acked = writers.stop();
    assert!(cycles >= 3, "at least one crash of every node");
    assert!(!acked.is_empty());
    let reference = checksums(c.node(1), &["crash.acks"])?;
    for i in 1..=3 {
        let n = c.node(i);
        assert_eq!(status(n, "wsrep_cluster_size")?, "3", "node {i} rejoined");
        assert_eq!(checksums(n, &["crash.acks"])?, reference, "node {i} identical to node 1");
        let missing = missing_acked(n, "crash.acks", &acked)?;
        assert!(missing.is_empty(), "node {i} lost acknowledged commits: {missing:?}");
    }

    // A gracefully stopped node restarts and rejoins with the data written
    // while it was away.
    c.stop(2)?;
    sql(c.node(1), "INSERT INTO crash.acks VALUES (9, 1)").map_err(anyhow::Error::msg)?;
    c.start(2)?;
    c.wait_synced(2, Duration::from_secs(240))?;
    let seen = sql(c.node(2), "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM crash.acks WHERE node = 9")
        .map_err(anyhow::Error::msg)?;
    assert_eq!(seen, "1", "the restarted node has what was written while it was stopped");
    assert_eq!(status(c.node(2), "wsrep_cluster_size")?, "3");
    Ok(())
}
