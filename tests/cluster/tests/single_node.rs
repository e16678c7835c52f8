//! One node: bootstraps, is ready, and serves a real OLTP workload.

use tandem_cluster_tests::*;

#[test]
fn single_node_is_ready_and_runs_oltp_read_write() -> anyhow::Result<()> {
    let c = up(1)?;
    let n = c.node(1);
    assert_eq!(status(n, "wsrep_ready")?, "ON");
    assert_eq!(status(n, "wsrep_cluster_size")?, "1");
    assert_eq!(status(n, "wsrep_local_state_comment")?, "Synced");
    assert_eq!(status(n, "wsrep_cluster_status")?, "Primary");
    assert_eq!(status(n, "wsrep_provider_name")?, "Tandem");

    sql(n, "CREATE DATABASE sbtest").map_err(anyhow::Error::msg)?;
    let common = ["--tables=4", "--table-size=10000"];
    sysbench(n, &[&common[..], &["oltp_read_write", "prepare"]].concat())?;
    let secs = format!("--time={}", workload_seconds());
    let out = sysbench(n, &[&common[..], &["--threads=8", &secs, "oltp_read_write", "run"]].concat())?;
    // sysbench exits non-zero on any error it cannot retry; InnoDB's own
    // deadlocks (which standalone MariaDB has too) are retried and counted.
    assert!(out.contains("transactions:"), "sysbench finished its run:\n{out}");
    let commits: u64 = status(n, "wsrep_local_commits")?.parse()?;
    assert!(commits > 100, "the workload committed through the provider ({commits})");
    assert_eq!(status(n, "wsrep_local_cert_failures")?, "0", "a single node never conflicts with itself");
    Ok(())
}
