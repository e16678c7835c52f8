//! Flow control on a real cluster: one node applies slowly (one applier
//! thread, and its copy of the table has no primary key, so every row event
//! is a full table scan there) while clients on another node write as fast
//! as they can. The writers are throttled to the slow node's pace; its
//! receive queue and lag stay bounded by the flow-control limit however long
//! the writers go on.

use std::time::Duration;

use anyhow::{ensure, Result};
use tandem_cluster_tests::*;

/// `gcs.fc_limit`; with three members the limit is fc_limit * sqrt(3).
const FC_LIMIT: i64 = 20;
const WRITERS: usize = 4;
const UPDATES_PER_WRITER: usize = 1200;
const ROWS: usize = 20_000;

fn q(node: &tandem::cluster::Node, query: &str) -> Result<String> {
    sql(node, query).map_err(anyhow::Error::msg)
}

fn rss_kib(node: &tandem::cluster::Node) -> Result<i64> {
    let pid = node.pid.ok_or_else(|| anyhow::anyhow!("{} has no pid", node.name))?;
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    Ok(line.split_whitespace().nth(1).unwrap_or("0").parse()?)
}

#[test]
fn a_slow_node_throttles_the_writers_and_its_lag_stays_bounded() -> Result<()> {
    let c = up_with(3, |s| s.provider_options.push(("gcs.fc_limit".into(), FC_LIMIT.to_string())))?;
    let (n1, slow) = (c.node(1).clone(), c.node(3).clone());
    q(
        &n1,
        "CREATE DATABASE fc; CREATE TABLE fc.t (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, pad CHAR(60) NOT NULL)",
    )?;
    q(&n1, &format!("USE fc; INSERT INTO fc.t SELECT seq, 0, 'x' FROM seq_1_to_{ROWS}"))?;
    wait_for("the rows on node 3", Duration::from_secs(60), || {
        Ok(q(&slow, "SELECT COUNT(*) FROM fc.t")? == ROWS.to_string())
    })?;
    // Node 3 only: no key to find a row by, one applier.
    q(&slow, "SET SESSION wsrep_on=OFF; ALTER TABLE fc.t DROP PRIMARY KEY")?;
    q(&slow, "SET GLOBAL wsrep_slave_threads=1")?;
    // Surplus appliers leave once they have applied one more write-set; two
    // appliers on a table without a key can deadlock (a row lock taken by
    // one's scan against the other's commit order), so wait for one.
    q(&n1, "CREATE TABLE fc.tick (id INT PRIMARY KEY, n INT NOT NULL)")?;
    wait_for("a single applier on node 3", Duration::from_secs(60), || {
        q(&n1, "INSERT INTO fc.tick VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1")?;
        Ok(status_i64(&slow, "wsrep_applier_thread_count")? == 1)
    })?;
    q(&slow, "FLUSH STATUS")?;

    // Each writer updates rows by key, one autocommit write-set each.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let n1 = n1.clone();
            std::thread::spawn(move || {
                let stmt = format!(
                    "DELIMITER //\nBEGIN NOT ATOMIC FOR i IN 1..{UPDATES_PER_WRITER} DO \
                     UPDATE fc.t SET k = k + 1 WHERE id = 1 + (i * {WRITERS} + {w}) * 7 % {ROWS}; END FOR; END//"
                );
                sql(&n1, &stmt)
            })
        })
        .collect();

    // Sample while they write. Node 1's position is read first: the lag
    // measured this way is never more than the real one.
    //
    // Past the limit the queue takes what was ordered before node 3's pause
    // took effect: what the writers committed while node 3's delivery
    // lagged the order and while the pause was on its way. The leader's send
    // window (gcs.send_window, 4 x fc_limit = 80 here) caps what node 3 may
    // be behind in receiving; the rest depends on the scheduler, not on
    // Tandem. Before the window we saw up to 35 write-sets per writer past
    // the limit (peaks of 79 to 174) on the 2-core development machine, and
    // on loaded CI machines one sample of 131 (24 per writer) and, on
    // 2026-11-26, one of 249 (54 per writer); with it (2026-11-27) peaks of
    // 118 to 152 here. We allow 96 per writer. What this bound tells apart is
    // bounded from unbounded: with
    // the limit out of reach (fc_limit 100000) node 3's queue held 3,509
    // write-sets after 1.7 s of this run, eight times the bound, and grows
    // with the run; limited, the peak stays near 100 however long it goes
    // (600 or 1200 updates per writer, the same peaks).
    let upper = (FC_LIMIT as f64 * 3f64.sqrt()) as i64;
    let bound = upper + 96 * WRITERS as i64;
    let (mut max_lag, mut samples, mut rss) = (0i64, 0u32, vec![]);
    while writers.iter().any(|w| !w.is_finished()) {
        let ahead = status_i64(&n1, "wsrep_last_committed")?;
        let behind = status_i64(&slow, "wsrep_last_committed")?;
        let queue = status_i64(&slow, "wsrep_local_recv_queue")?;
        max_lag = max_lag.max(ahead - behind);
        ensure!(queue <= bound, "node 3's receive queue holds {queue} write-sets, over {bound}");
        ensure!(ahead - behind <= bound, "node 3 is {} write-sets behind, over {bound}", ahead - behind);
        samples += 1;
        if samples % 10 == 0 {
            rss.push(rss_kib(&slow)?);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for w in writers {
        w.join().expect("writer thread").map_err(anyhow::Error::msg)?;
    }

    let peak = status_i64(&slow, "wsrep_local_recv_queue_max")?;
    let peak_bytes = status_i64(&slow, "wsrep_local_recv_queue_bytes_max")?;
    let sent = status_i64(&slow, "wsrep_flow_control_sent")?;
    let paused_ns = status_i64(&n1, "wsrep_flow_control_paused_ns")?;
    let received = status_i64(&n1, "wsrep_flow_control_recv")?;
    eprintln!(
        "flow control: {samples} samples, node 3 lag max {max_lag}, queue peak {peak} write-sets / {peak_bytes} bytes \
         (bound {bound}), pauses sent {sent}, node 1 paused {:.1} s, received {received}, node 3 RSS KiB {rss:?}",
        paused_ns as f64 / 1e9
    );
    // The slow node did fall behind, so the bound above was tested.
    ensure!(peak > upper, "node 3's queue peaked at {peak}, never over the limit {upper}: nothing was tested");
    ensure!(peak <= bound, "node 3's queue peaked at {peak} write-sets, over {bound}");
    // An UPDATE of one row: two row images of ~70 bytes and the headers.
    ensure!(peak_bytes <= bound * 1024, "node 3's queue peaked at {peak_bytes} bytes");
    ensure!(
        sent > 0 && received >= sent && paused_ns > 0,
        "node 1 was paused by node 3 (sent {sent}, received {received})"
    );
    ensure!(status_i64(&n1, "wsrep_flow_control_sent")? == 0, "node 1 never paused the group");

    // Node 3 catches up, lets the group go, and holds the same data.
    wait_for("node 3 to catch up", Duration::from_secs(120), || {
        Ok(status_i64(&slow, "wsrep_last_committed")? >= status_i64(&n1, "wsrep_last_committed")?)
    })?;
    wait_for(
        "the pause to lift",
        Duration::from_secs(30),
        || Ok(status(&n1, "wsrep_flow_control_active")? == "false"),
    )?;
    let total = (WRITERS * UPDATES_PER_WRITER).to_string();
    for node in c.nodes() {
        ensure!(q(node, "SELECT SUM(k) FROM fc.t")? == total, "{} lost or repeated updates", node.name);
    }
    Ok(())
}
