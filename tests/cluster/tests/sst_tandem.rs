//! `wsrep_sst_method=tandem` with real servers: nodes that join with an
//! empty data directory get it from a donor by the tandem method, over TLS
//! with the cluster's certificates, while every node takes writes; and a
//! transfer that fails leaves the joiner's data as it was, its server
//! stopped rather than half-joined, and no SST process behind.

use std::time::{Duration, Instant};

use tandem::cluster::state::Node;
use tandem_cluster_tests::*;

const TABLE: &str = "sst.acked";

fn tandem_sst(spec: &mut tandem::cluster::ClusterSpec) {
    spec.mysqld_options.push(("wsrep_sst_method".into(), "tandem".into()));
}

/// Empties a stopped node's data directory: no data, no group log, no
/// identity. It can only come back by a full state transfer.
fn wipe(node: &Node) -> anyhow::Result<()> {
    std::fs::remove_dir_all(&node.datadir)?;
    std::fs::create_dir(&node.datadir)?;
    Ok(())
}

fn sst_processes() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmd| cmd.contains(" sst --role"))
        .collect()
}

#[test]
fn an_empty_node_joins_by_the_tandem_method_over_tls_under_writes() -> anyhow::Result<()> {
    let mut c = up_with(3, |s| {
        tandem_sst(s);
        s.tls = true;
    })?;
    for i in [2, 3] {
        let log = error_log(c.node(i));
        assert!(log.contains("Running: 'wsrep_sst_tandem --role 'joiner'"), "node {i}:\n{}", tail(&log));
        assert!(log.contains("streams, TLS"), "node {i}:\n{}", tail(&log));
    }
    sql(c.node(1), "CREATE DATABASE sst; CREATE TABLE sst.acked (node INT, seq INT, PRIMARY KEY (node, seq))")
        .map_err(anyhow::Error::msg)?;
    let writers = AckedWriters::start(&c, TABLE);
    std::thread::sleep(Duration::from_secs(2));
    c.stop(3)?;
    wipe(c.node(3))?;
    put_no_sst_marker(c.node(3))?;
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    c.start(3)?;
    c.wait_synced(3, Duration::from_secs(240))?;
    let took = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let acked = writers.stop();

    let log = error_log(c.node(3));
    let received = log.lines().rev().find(|l| l.contains("WSREP_SST: [INFO] Received")).unwrap_or_default();
    println!("node 3: start to Synced in {:.1} s by the tandem method; {received}", took.as_secs_f64());
    assert!(!has_no_sst_marker(c.node(3)), "the wiped node's marker survived: no full transfer ran");
    assert!(received.contains("TLS"), "the transfer was not encrypted: {received:?}\n{}", tail(&log));
    assert!(!c.node(3).datadir.join(".tandem_sst").exists(), "the staging directory was left behind");
    let donor_sent = (1..=2).any(|i| error_log(c.node(i)).matches("WSREP_SST: [INFO] Sent").count() >= 2);
    assert!(donor_sent, "no donor logged a third transfer");
    assert!(acked.iter().any(|(n, _)| *n == 3), "node 3 took no writes after its transfer");
    for i in 1..=3 {
        let missing = missing_acked(c.node(i), TABLE, &acked)?;
        assert!(missing.is_empty(), "node {i} lacks acknowledged commits {missing:?}");
    }
    assert_identical(&c, &[TABLE, "mysql.user"])?;
    assert!(sst_processes().is_empty(), "SST processes left: {:?}", sst_processes());
    Ok(())
}

#[test]
fn a_failed_transfer_stops_the_joiner_and_leaves_its_data_unchanged() -> anyhow::Result<()> {
    let mut c = up_with(2, tandem_sst)?;
    sql(
        c.node(1),
        "CREATE DATABASE sst; CREATE TABLE sst.acked (node INT, seq INT, PRIMARY KEY (node, seq)); \
                    INSERT INTO sst.acked VALUES (1, 1), (1, 2)",
    )
    .map_err(anyhow::Error::msg)?;
    c.stop(2)?;
    wipe(c.node(2))?;
    put_no_sst_marker(c.node(2))?;
    // The donor's own configuration is broken: its SST process refuses to
    // run, and the joiner hears that from the group.
    let cnf = c.node(1).cnf.clone();
    let good = std::fs::read_to_string(&cnf)?;
    std::fs::write(&cnf, format!("{good}\n[sst]\nstreams=0\n"))?;

    c.start(2)?;
    let outcome = c.wait_synced(2, Duration::from_secs(120));
    assert!(outcome.is_err(), "node 2 became Synced without its state transfer");
    let joiner_log = error_log(c.node(2));
    assert!(
        joiner_log.contains("State transfer to") || joiner_log.contains("Will never receive state"),
        "node 2 does not say its transfer failed:\n{}",
        tail(&joiner_log)
    );
    assert!(
        error_log(c.node(1)).contains("[sst] streams=0: expected a number from 1 to 64"),
        "the donor's reason is not logged"
    );
    assert!(has_no_sst_marker(c.node(2)), "the failed transfer removed the joiner's files");
    assert!(!c.node(2).datadir.join(".tandem_sst").exists(), "the staging directory was left behind");
    wait_for("the joiner's SST process to go with its server", Duration::from_secs(30), || {
        Ok(sst_processes().is_empty())
    })?;
    assert_eq!(status(c.node(1), "wsrep_local_state_comment")?, "Synced", "the donor must stay in service");

    // Fixed, it works.
    std::fs::write(&cnf, good)?;
    c.start(2)?;
    c.wait_synced(2, Duration::from_secs(120))?;
    assert!(!has_no_sst_marker(c.node(2)));
    assert_identical(&c, &[TABLE])?;
    Ok(())
}
