//! Three nodes, two of them joined by SST: DDL everywhere, writers on every
//! node at once with identical data afterwards, and first-committer-wins.

use std::thread;

use tandem_cluster_tests::*;

const TABLES: [&str; 4] = ["sbtest.sbtest1", "sbtest.sbtest2", "sbtest.sbtest3", "sbtest.sbtest4"];

#[test]
fn three_nodes_replicate_ddl_and_concurrent_writes() -> anyhow::Result<()> {
    let c = up(3)?;
    for i in 1..=3 {
        let n = c.node(i);
        assert_eq!(status(n, "wsrep_cluster_size")?, "3", "{}", n.name);
        assert_eq!(status(n, "wsrep_local_state_comment")?, "Synced", "{}", n.name);
        assert_eq!(status(n, "wsrep_ready")?, "ON");
    }
    // Nodes 2 and 3 got their data by SST from a donor.
    assert!(error_log(c.node(2)).contains("State transfer from"), "node 2 joined by state transfer");

    // DDL on node 2 appears everywhere.
    sql(c.node(2), "CREATE DATABASE sbtest; CREATE TABLE sbtest.ddl_probe (id INT PRIMARY KEY, v INT)")
        .map_err(anyhow::Error::msg)?;
    for i in [1, 3] {
        let tables =
            sql(c.node(i), "SET SESSION wsrep_sync_wait=15; SHOW TABLES FROM sbtest").map_err(anyhow::Error::msg)?;
        assert!(tables.contains("ddl_probe"), "table created on node 2 is on node {i}");
    }

    // Writers on all three nodes at once.
    let common = ["--tables=4", "--table-size=5000"];
    sysbench(c.node(1), &[&common[..], &["oltp_write_only", "prepare"]].concat())?;
    // A commit on node 1 is ordered everywhere but applied on the others a
    // moment later: sysbench on node 3 once found no sbtest4 yet. A causal
    // read waits for what node 1 committed, and checks that it all arrived.
    for i in [2, 3] {
        for table in TABLES {
            let query = format!("SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM {table}");
            let rows = sql(c.node(i), &query).map_err(anyhow::Error::msg)?;
            assert_eq!(rows, "5000", "{table} on node {i}");
        }
    }
    let secs = format!("--time={}", workload_seconds());
    let writers: Vec<_> = (1..=3)
        .map(|i| {
            let node = c.node(i).clone();
            let secs = secs.clone();
            thread::spawn(move || {
                sysbench(&node, &[&common[..], &["--threads=4", &secs, "oltp_write_only", "run"]].concat())
            })
        })
        .collect();
    for w in writers {
        let out = w.join().expect("writer thread")?;
        assert!(out.contains("transactions:"), "writer finished:\n{out}");
    }
    let reference = checksums(c.node(1), &TABLES)?;
    for i in [2, 3] {
        assert_eq!(checksums(c.node(i), &TABLES)?, reference, "node {i} has the same data as node 1");
    }
    Ok(())
}

#[test]
fn two_nodes_updating_the_same_row_commit_exactly_one() -> anyhow::Result<()> {
    let c = up(3)?;
    sql(
        c.node(1),
        "CREATE DATABASE race; CREATE TABLE race.t (id INT PRIMARY KEY, v INT); INSERT INTO race.t VALUES (1, 0)",
    )
    .map_err(anyhow::Error::msg)?;
    for round in 1..=5 {
        let (a, b) = (c.node(1).clone(), c.node(2).clone());
        sql(&b, "SET SESSION wsrep_sync_wait=15; SELECT 1").map_err(anyhow::Error::msg)?;
        // Both update the row locally, wait, then commit at about the same time.
        let txn = |who: i32| format!("BEGIN; UPDATE race.t SET v = {who} WHERE id = 1; DO SLEEP(1); COMMIT;");
        let ta = thread::spawn({
            let q = txn(10 * round + 1);
            move || sql(&a, &q)
        });
        let tb = thread::spawn({
            let q = txn(10 * round + 2);
            move || sql(&b, &q)
        });
        let results = [ta.join().unwrap(), tb.join().unwrap()];
        let ok: Vec<usize> = (0..2).filter(|&k| results[k].is_ok()).collect();
        assert_eq!(ok.len(), 1, "round {round}: exactly one commits: {results:?}");
        let loser = &results[1 - ok[0]];
        assert!(
            loser.as_ref().unwrap_err().contains("1213"),
            "round {round}: the other gets ER_LOCK_DEADLOCK: {loser:?}"
        );
        let winner_value = (10 * round + 1 + ok[0] as i32).to_string();
        for i in 1..=3 {
            let v = sql(c.node(i), "SET SESSION wsrep_sync_wait=15; SELECT v FROM race.t WHERE id = 1")
                .map_err(anyhow::Error::msg)?;
            assert_eq!(v, winner_value, "round {round}: node {i} holds the winner's value");
        }
    }
    Ok(())
}
