//! An in-place switch of a whole cluster from Galera to Tandem, and back
//! (docs/operations.md, "Switching from Galera"): stop every node, change
//! `wsrep_provider`, bootstrap the most advanced node, start the others.
//!
//! Galera's departures each take a seqno, so the nodes stop a few seqnos
//! apart; the ones behind lack only those configuration changes. Tandem's
//! founder reads them from Galera's cache (`crates/engine/src/inherited.rs`)
//! and nobody takes a state transfer. One node is killed rather than
//! stopped, so that its position comes from InnoDB (`--wsrep-recover`, as
//! the distribution's `galera_recovery` does), as after a crash.
//!
//! wsrep GTIDs are on throughout, and continue in their domain on every
//! node: the nodes that resume under Tandem take the domain from the
//! founder's SST script, run in bypass mode (the IST handshake).
//!
//! The way back is Galera's own restart from Tandem's saved state. Galera
//! cannot read Tandem's log, so the nodes that left before the last one
//! take a full state transfer there (docs/operations.md says what that
//! costs); the data must still end identical.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use tandem::cluster::ProviderKind;
use tandem_cluster_tests::*;

const GALERA: &str = "/usr/lib/galera/libgalera_smm.so";
const TABLE: &str = "sw.rows";
const SYNCED: Duration = Duration::from_secs(240);
/// `wsrep_gtid_domain_id`, on with Galera and kept through both switches.
const DOMAIN: u32 = 7;

#[test]
fn a_galera_cluster_switches_to_tandem_without_a_transfer_and_back() -> Result<()> {
    let mut c = up_with(3, |s| {
        s.provider = ProviderKind::Galera;
        s.provider_path = None;
        s.mysqld_options.extend(gtid_mode_options(DOMAIN));
    })?;
    create_rows_table(c.node(1), TABLE)?;
    insert_rows_on(&c, &[1, 2, 3], TABLE, 0, 20, 100)?;
    let history = status(c.node(1), "wsrep_local_state_uuid")?;
    let galera_gtids = same_gtids(&c, "under Galera", 0)?;

    // Node 3 crashes; then 2 and 1 stop cleanly. The eviction and each
    // departure take a seqno of their own, and carry no data.
    c.kill(3)?;
    wait_for("Galera to see node 3 gone", SYNCED, || Ok(status_i64(c.node(1), "wsrep_cluster_size")? == 2))?;
    c.stop(2)?;
    c.stop(1)?;
    let galera_end = saved_seqno(c.node(1))?;
    ensure!(saved_seqno(c.node(2))? < galera_end, "Galera's departures took no seqno: the test proves nothing");

    switch_provider(&c, &provider_path().display().to_string())?;
    for i in 1..=3 {
        put_no_sst_marker(c.node(i))?;
    }
    start_in_order(&mut c)?;
    for i in 1..=3 {
        let n = c.node(i);
        ensure!(has_no_sst_marker(n), "node {i} took a state transfer:\n{}", tail(&error_log(n)));
        ensure!(status(n, "wsrep_local_state_uuid")? == history, "node {i} left Galera's history");
        ensure!(status_i64(n, "wsrep_last_committed")? > galera_end, "node {i}: seqnos do not continue");
    }
    let joiner_log = error_log(c.node(2));
    ensure!(joiner_log.contains("without a state transfer"), "node 2 says why it needs none:\n{}", tail(&joiner_log));
    ensure!(error_log(c.node(1)).contains("were configuration changes"), "the founder says what Galera's cache held");
    insert_rows_on(&c, &[1, 2, 3], TABLE, 100, 10, 100)?;
    assert_identical(&c, &[TABLE])?;
    ensure!(count(&c, 1)? == 3 * 20 + 3 * 10, "rows written under Galera and Tandem");
    let tandem_gtids = same_gtids(&c, "under Tandem", galera_gtids)?;

    // And back: Galera continues Tandem's state with the same history. The
    // nodes that left first take a full transfer there (the markers show
    // that the check above can fail).
    for i in [3, 2, 1] {
        c.stop(i)?;
    }
    switch_provider(&c, GALERA)?;
    for i in 1..=3 {
        put_no_sst_marker(c.node(i))?;
    }
    start_in_order(&mut c)?;
    for i in 1..=3 {
        ensure!(status(c.node(i), "wsrep_local_state_uuid")? == history, "node {i} left the history on the way back");
    }
    ensure!(has_no_sst_marker(c.node(1)), "the founder kept its data");
    ensure!(!has_no_sst_marker(c.node(2)) && !has_no_sst_marker(c.node(3)), "Galera could not serve Tandem's seqnos");
    insert_rows_on(&c, &[1, 2, 3], TABLE, 200, 10, 100)?;
    assert_identical(&c, &[TABLE])?;
    ensure!(count(&c, 3)? == 3 * 20 + 6 * 10, "rows after the way back");
    same_gtids(&c, "back under Galera", tandem_gtids)?;
    Ok(())
}

/// wsrep GTIDs: the same on every node, all in `DOMAIN`, and numbered on
/// from `after` (each transaction takes the next one, whichever provider).
fn same_gtids(c: &tandem::cluster::Cluster, when: &str, after: u64) -> Result<u64> {
    let position = settled_gtids(c, when)?;
    ensure!(all_in_domain(&position, DOMAIN), "{when}: GTIDs outside domain {DOMAIN}: {position}");
    let seqno = domain_seqno(&position, DOMAIN).context("no GTID in the domain")?;
    ensure!(seqno > after, "{when}: GTIDs do not carry on from {after}: {position}");
    Ok(seqno)
}

/// `wsrep_provider` in every node's configuration, as an operator edits it.
fn switch_provider(c: &tandem::cluster::Cluster, provider: &str) -> Result<()> {
    for node in c.nodes() {
        let cnf = std::fs::read_to_string(&node.cnf).with_context(|| format!("reading {}", node.cnf.display()))?;
        let edited: Vec<String> = cnf
            .lines()
            .map(
                |l| if l.starts_with("wsrep_provider=") { format!("wsrep_provider={provider}") } else { l.to_string() },
            )
            .collect();
        ensure!(edited.iter().any(|l| l == &format!("wsrep_provider={provider}")), "no wsrep_provider line");
        std::fs::write(&node.cnf, edited.join("\n") + "\n")?;
    }
    Ok(())
}

/// The usual start of a stopped cluster: the most advanced node (1, the
/// last to stop) bootstraps, the others join.
fn start_in_order(c: &mut tandem::cluster::Cluster) -> Result<()> {
    c.start_bootstrap(1)?;
    c.wait_synced(1, SYNCED)?;
    for i in [2, 3] {
        c.start(i)?;
        c.wait_synced(i, SYNCED)?;
    }
    Ok(())
}

/// The seqno in a stopped node's grastate.dat.
fn saved_seqno(node: &tandem::cluster::state::Node) -> Result<i64> {
    let path = node.datadir.join("grastate.dat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    seqno_in(&text).with_context(|| format!("no seqno in {}:\n{text}", path.display()))
}

fn seqno_in(grastate: &str) -> Option<i64> {
    grastate.lines().find_map(|l| l.strip_prefix("seqno:")).and_then(|v| v.trim().parse().ok())
}

fn count(c: &tandem::cluster::Cluster, i: usize) -> Result<i64> {
    let n = sql(c.node(i), &format!("SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM {TABLE}"))
        .map_err(anyhow::Error::msg)?;
    n.trim().parse().with_context(|| format!("count: {n}"))
}
