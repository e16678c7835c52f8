//! `gmcast.isolate` on a live node under writes on every node: the node
//! leaves the primary component and refuses work, the other two remove it
//! and go on, and set back to 0 it is taken back without a restart, catching
//! up by IST, with no acknowledged commit lost and every node identical.

use std::time::Duration;

use tandem_cluster_tests::*;

const NOT_READY: &str = "WSREP has not yet prepared node for application use";

#[test]
fn an_isolated_node_is_removed_then_rejoins_by_ist_without_a_restart() -> anyhow::Result<()> {
    let mut c = up(3)?;
    sql(c.node(1), "CREATE DATABASE iso; CREATE TABLE iso.acks (node INT, seq INT, PRIMARY KEY (node, seq))")
        .map_err(anyhow::Error::msg)?;
    let writers = AckedWriters::start(&c, "iso.acks");
    std::thread::sleep(Duration::from_secs(3));
    let (n1, n3) = (c.node(1).clone(), c.node(3).clone());
    put_no_sst_marker(&n3)?;
    let pid = n3.pid;

    sql(&n3, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'").map_err(anyhow::Error::msg)?;
    wait_for("node 3 non-primary", Duration::from_secs(60), || Ok(status(&n3, "wsrep_cluster_status")? != "Primary"))?;
    let refused = sql(&n3, "SELECT COUNT(*) FROM iso.acks").expect_err("an isolated node refuses queries");
    assert!(refused.contains(NOT_READY), "refusal says why: {refused}");
    // The inactive timeout removes it from the others' view.
    wait_for("node 3 removed", Duration::from_secs(120), || Ok(status(&n1, "wsrep_cluster_size")? == "2"))?;
    std::thread::sleep(Duration::from_secs(3)); // writes node 3 has to catch up on

    sql(&n3, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'").map_err(anyhow::Error::msg)?;
    c.wait_synced(3, Duration::from_secs(240))?;
    wait_for("three nodes again", Duration::from_secs(120), || {
        Ok((1..=3).all(|i| status(c.node(i), "wsrep_cluster_size").is_ok_and(|s| s == "3")))
    })?;
    std::thread::sleep(Duration::from_secs(3)); // node 3 takes writes again
    let acked = writers.stop();

    assert!(c.is_running(3) && c.node(3).pid == pid, "the same mariadbd process came back");
    assert!(has_no_sst_marker(&n3), "caught up by IST, not a state transfer");
    assert!(acked.iter().any(|(node, _)| *node == 3), "node 3 took writes");
    assert_identical(&c, &["iso.acks"])?;
    for i in 1..=3 {
        let missing = missing_acked(c.node(i), "iso.acks", &acked)?;
        assert!(missing.is_empty(), "node {i} lost acknowledged commits: {missing:?}");
    }
    let log = error_log(&n3);
    assert!(log.contains("asking to be taken back"), "the rejoin is logged:\n{}", tail(&log));
    Ok(())
}
