//! Causal reads (`wsrep_sync_wait`): a read that starts after a write was
//! acknowledged on another node sees that write, however far behind the
//! reading node's appliers are.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Result};
use tandem_cluster_tests::*;

fn causal_count(node: &tandem::cluster::Node, id: u64) -> Result<String> {
    sql(node, &format!("SET SESSION wsrep_sync_wait=1; SELECT COUNT(*) FROM causal.t WHERE id={id}"))
        .map_err(anyhow::Error::msg)
}

#[test]
fn a_causal_read_sees_every_write_acknowledged_before_it() -> Result<()> {
    let c = up(3)?;
    sql(c.node(1), "CREATE DATABASE causal; CREATE TABLE causal.t (id INT PRIMARY KEY, node INT)")
        .map_err(anyhow::Error::msg)?;

    // Every node writes in turn; right after each acknowledgement the other
    // two read the row causally (one through the leader, one not). Then the
    // same with reads on the leader's lease, switched on while the cluster
    // runs (the rest of the test keeps it on).
    for (lease, ids) in [(false, 0..45u64), (true, 45..90u64)] {
        if lease {
            for n in 1..=3 {
                sql(c.node(n), "SET GLOBAL wsrep_provider_options='repl.causal_read_lease=YES'")
                    .map_err(anyhow::Error::msg)?;
            }
        }
        for id in ids {
            let writer = (id % 3) as usize + 1;
            sql(c.node(writer), &format!("INSERT INTO causal.t VALUES ({id}, {writer})"))
                .map_err(anyhow::Error::msg)?;
            for reader in (1..=3).filter(|&r| r != writer) {
                let n = causal_count(c.node(reader), id)?;
                ensure!(n == "1", "node {reader} read row {id} (written on node {writer}) as {n} (lease: {lease})");
            }
        }
    }

    // Node 2 cannot apply (FLUSH TABLES WITH READ LOCK pauses its provider).
    // A causal read there must wait for the row written on node 1, not
    // answer without it.
    let n2 = c.node(2).clone();
    let mut lock = Command::new("mariadb")
        .args(["--no-defaults", "-uroot", "-N", "-B", "-S"])
        .arg(&n2.socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut lock_input = lock.stdin.take().expect("piped");
    lock_input.write_all(b"FLUSH TABLES WITH READ LOCK;\n")?;
    lock_input.flush()?;
    wait_for("node 2 paused by FLUSH TABLES WITH READ LOCK", Duration::from_secs(60), || {
        Ok(status(&n2, "wsrep_local_state_comment")? != "Synced")
    })?;
    sql(c.node(1), "INSERT INTO causal.t VALUES (1000, 1)").map_err(anyhow::Error::msg)?;
    let plain = sql(&n2, "SET SESSION wsrep_sync_wait=0; SELECT COUNT(*) FROM causal.t WHERE id=1000")
        .map_err(anyhow::Error::msg)?;
    ensure!(plain == "0", "node 2 cannot have applied row 1000 while paused (a plain read found {plain})");

    let reader = {
        let n2 = n2.clone();
        std::thread::spawn(move || causal_count(&n2, 1000))
    };
    let seen_waiting = wait_for("the causal read to be waiting on node 2", Duration::from_secs(60), || {
        if reader.is_finished() {
            return Ok(true);
        }
        let waiting = sql(
            &n2,
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%WHERE id=1000' AND ID <> CONNECTION_ID()",
        )
        .map_err(anyhow::Error::msg)?;
        Ok(waiting == "1")
    });
    let early = reader.is_finished();
    lock_input.write_all(b"UNLOCK TABLES;\n")?;
    drop(lock_input);
    let _ = lock.wait();
    seen_waiting?;
    let n = match reader.join() {
        Ok(result) => result?,
        Err(_) => bail!("the reader thread panicked"),
    };
    ensure!(
        !early && n == "1",
        "the causal read waited for node 2 to apply row 1000 (it answered {n}, early: {early})"
    );
    wait_for(
        "node 2 to resync",
        Duration::from_secs(60),
        || Ok(status(&n2, "wsrep_local_state_comment")? == "Synced"),
    )?;
    Ok(())
}
