//! The null provider (`libtandem_null.so`, crates/null-provider), the floor
//! the bench measures every provider against, on a real mariadbd: it must
//! do every step of the server's wsrep work, or the floor would be too low.
//! Commits from many clients, DDL (TOI), a streaming transaction, causal
//! reads, FTWRL (desync and pause), and a clean shutdown that ends with the
//! final view, not a kill; then a restart continues the same history.

use std::time::Duration;

use tandem_cluster_tests::*;

fn run(n: &tandem::cluster::state::Node, query: &str) -> anyhow::Result<String> {
    sql(n, query).map_err(anyhow::Error::msg)
}

#[test]
fn the_null_provider_carries_a_server_through_its_wsrep_work() -> anyhow::Result<()> {
    let mut c = up_with(1, |spec| spec.provider_path = Some(null_provider_path()))?;
    let n = c.node(1).clone();
    assert_eq!(status(&n, "wsrep_provider_name")?, "Tandem null provider");
    assert_eq!(status(&n, "wsrep_ready")?, "ON");
    assert_eq!(status(&n, "wsrep_cluster_status")?, "Primary");
    assert_eq!(status(&n, "wsrep_cluster_size")?, "1");
    assert_eq!(status(&n, "wsrep_local_state_comment")?, "Synced");
    let uuid = status(&n, "wsrep_local_state_uuid")?;

    run(&n, "CREATE DATABASE floor; CREATE TABLE floor.t (id INT PRIMARY KEY, client INT, v INT)")?;
    // Commits from 8 clients at once leave in seqno order, or they hang.
    let clients: Vec<_> = (0..8)
        .map(|client| {
            let n = n.clone();
            std::thread::spawn(move || {
                let rows: Vec<String> = (0..50).map(|i| format!("({}, {client}, {i})", client * 1000 + i)).collect();
                let statements: Vec<String> = rows.iter().map(|r| format!("INSERT INTO floor.t VALUES {r}")).collect();
                sql(&n, &statements.join(";"))
            })
        })
        .collect();
    for client in clients {
        client.join().expect("client thread").map_err(anyhow::Error::msg)?;
    }
    assert_eq!(run(&n, "SELECT COUNT(*) FROM floor.t")?.trim(), "400");
    let committed = status_i64(&n, "wsrep_last_committed")?;
    assert!(committed >= 402, "a seqno per commit and per DDL: last committed {committed}");

    // A streaming transaction: every fragment is ordered, then the commit.
    run(
        &n,
        "SET SESSION wsrep_trx_fragment_size=1; START TRANSACTION; \
         INSERT INTO floor.t VALUES (90001, 9, 1), (90002, 9, 2); COMMIT",
    )?;
    // A causal read, and FTWRL (desync, pause, resume, resync).
    let read = run(&n, "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM floor.t WHERE client = 9")?;
    assert_eq!(read.trim(), "2");
    run(&n, "FLUSH TABLES WITH READ LOCK; UNLOCK TABLES")?;
    run(&n, "SET GLOBAL wsrep_desync=ON; SET GLOBAL wsrep_desync=OFF")?;
    run(&n, "INSERT INTO floor.t VALUES (90003, 9, 3)")?;
    let before_restart = status_i64(&n, "wsrep_last_committed")?;
    assert!(before_restart > committed, "{before_restart} after {committed}");

    // A clean stop: the final view reaches the server and it shuts down
    // on its own (a hang would end in SIGKILL, without this line).
    let logged_before = error_log(&n).len();
    c.stop(1)?;
    let log = error_log(c.node(1))[logged_before..].to_string();
    assert!(log.contains("final: yes"), "the final view reached the server:\n{}", tail(&log));
    assert!(log.contains("mariadbd: Shutdown complete"), "mariadbd shut down cleanly:\n{}", tail(&log));
    // It keeps no state of its own: the server's InnoDB checkpoint says
    // where the history stands.
    c.start_bootstrap(1)?;
    c.wait_synced(1, Duration::from_secs(120))?;
    let n = c.node(1).clone();
    assert_eq!(status(&n, "wsrep_local_state_uuid")?, uuid, "the same history");
    let after_restart = status_i64(&n, "wsrep_last_committed")?;
    assert!(after_restart > before_restart, "continues past {before_restart}: {after_restart}");
    assert_eq!(run(&n, "SELECT COUNT(*) FROM floor.t")?.trim(), "403");
    Ok(())
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
