//! The switch from Galera without downtime (docs/operations.md, "Switching
//! from Galera"): a new Tandem cluster is fed by MariaDB's asynchronous
//! replication from a node of the running Galera cluster, catches up while
//! Galera keeps taking writes, and takes over at the cut-over. The replica
//! thread's commits on Tandem's node 1 are replicated to the other two like
//! any local commit, with the source's GTIDs. The way back (a rollback
//! without downtime) is the same with the roles swapped.

use anyhow::{ensure, Context, Result};
use tandem::cluster::ProviderKind;
use tandem_cluster_tests::*;

const TABLE: &str = "app.rows";

#[test]
fn a_tandem_cluster_fed_by_replication_from_galera_takes_over() -> Result<()> {
    takes_over(ProviderKind::Galera, ProviderKind::Tandem)
}

#[test]
fn a_galera_cluster_fed_by_replication_from_tandem_takes_over() -> Result<()> {
    takes_over(ProviderKind::Tandem, ProviderKind::Galera)
}

/// `from` serves the writes until the cut-over, `to` after it.
fn takes_over(from: ProviderKind, to: ProviderKind) -> Result<()> {
    let old = up_with(3, |s| {
        provider(s, from);
        binlog(s, 11, 9);
    })?;
    create_rows_table(old.node(1), TABLE)?;
    insert_rows_on(&old, &[1, 2, 3], TABLE, 0, 20, 100)?;

    // An empty new cluster replicates the old one's binary log from its start.
    let new = up_with(3, |s| {
        provider(s, to);
        binlog(s, 12, 10);
    })?;
    let source = old.node(1);
    sql(
        new.node(1),
        &format!(
            "CHANGE MASTER TO MASTER_HOST='{}', MASTER_PORT={}, MASTER_USER='root', \
             MASTER_USE_GTID=slave_pos; START SLAVE",
            source.host, source.sql_port
        ),
    )
    .map_err(anyhow::Error::msg)?;
    // The old cluster keeps taking writes on every node meanwhile.
    insert_rows_on(&old, &[1, 2, 3], TABLE, 20, 20, 100)?;

    // The cut-over: writes stop on the old cluster, the replica catches up
    // to the source's last GTID, replication stops, the new one takes the
    // writes.
    for i in 1..=3 {
        sql(old.node(i), "SET GLOBAL read_only=ON").map_err(anyhow::Error::msg)?;
    }
    let last = sql(source, "SET SESSION wsrep_sync_wait=15; SELECT @@gtid_binlog_pos").map_err(anyhow::Error::msg)?;
    let waited =
        sql(new.node(1), &format!("SELECT MASTER_GTID_WAIT('{}', 120)", last.trim())).map_err(anyhow::Error::msg)?;
    ensure!(waited.trim() == "0", "the replica did not reach {last} (MASTER_GTID_WAIT said {waited})");
    sql(new.node(1), "STOP SLAVE; RESET SLAVE ALL").map_err(anyhow::Error::msg)?;
    let reference = checksums(source, &[TABLE])?;
    for i in 1..=3 {
        ensure!(checksums(new.node(i), &[TABLE])? == reference, "node {i} of the new cluster differs from the old one");
        let applied = sql(new.node(i), "SELECT @@gtid_slave_pos").map_err(anyhow::Error::msg)?;
        ensure!(applied.trim() == last.trim(), "node {i} records the source's GTIDs as applied: {applied} vs {last}");
    }

    insert_rows_on(&new, &[1, 2, 3], TABLE, 100, 10, 100)?;
    assert_identical(&new, &[TABLE])?;
    let rows = sql(new.node(3), &format!("SELECT COUNT(*) FROM {TABLE}")).map_err(anyhow::Error::msg)?;
    ensure!(rows.trim().parse::<u64>().context("count")? == 3 * 40 + 3 * 10, "rows: {rows}");
    Ok(())
}

fn provider(s: &mut tandem::cluster::ClusterSpec, kind: ProviderKind) {
    if kind == ProviderKind::Galera {
        s.provider = kind;
        s.provider_path = None;
    }
}

/// Binary logs with GTIDs: each cluster its own server id and GTID domain,
/// as two clusters joined by replication need.
fn binlog(s: &mut tandem::cluster::ClusterSpec, server_id: u32, domain: u32) {
    for (k, v) in [("log_bin", "binlog"), ("log_slave_updates", "ON"), ("wsrep_gtid_mode", "ON")] {
        s.mysqld_options.push((k.into(), v.into()));
    }
    s.mysqld_options.push(("server_id".into(), server_id.to_string()));
    s.mysqld_options.push(("wsrep_gtid_domain_id".into(), domain.to_string()));
}
