//! TLS on the group channel of real clusters (`tandem cluster up --tls`):
//! - what crosses the group ports carries none of the rows written, and the
//!   same capture of a plaintext cluster does (so the check can fail);
//! - a TLS cluster resolves conflicts, survives a kill -9 with every
//!   acknowledged commit kept, and rotates its certificates with
//!   `socket.ssl_reload` while writes go on;
//! - `socket.ssl=YES` with a missing file stops startup naming the file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{ensure, Context};
use tandem::cluster::{certs, Start};
use tandem_cluster_tests::*;

const SYNCED: Duration = Duration::from_secs(300);

/// tcpdump on loopback, limited to some ports, writing raw packets.
struct Capture {
    child: Child,
    file: PathBuf,
}

impl Capture {
    fn start(dir: &Path, ports: &[u16]) -> anyhow::Result<Capture> {
        let file = dir.join("group.pcap");
        let filter = ports.iter().map(|p| format!("port {p}")).collect::<Vec<_>>().join(" or ");
        let child = Command::new("tcpdump")
            .args(["-i", "lo", "-U", "-s", "0", "-w"])
            .arg(&file)
            .arg(format!("tcp and ({filter})"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting tcpdump (make deps installs it)")?;
        // tcpdump creates the file once it listens.
        wait_for("tcpdump to listen", Duration::from_secs(20), || Ok(file.exists()))?;
        std::thread::sleep(Duration::from_millis(500));
        Ok(Capture { child, file })
    }

    /// Stops the capture; returns everything it saw.
    fn stop(mut self) -> anyhow::Result<Vec<u8>> {
        // SIGINT: tcpdump flushes what it buffered and exits.
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        self.child.wait()?;
        Ok(std::fs::read(&self.file)?)
    }
}

fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack.windows(needle.len()).filter(|w| *w == needle).count()
}

/// Writes rows carrying `marker` on every node, captured on the group ports;
/// returns how often the marker crossed them.
fn marker_on_the_wire(tls: bool) -> anyhow::Result<usize> {
    let c = up_with(3, |spec| spec.tls = tls)?;
    let ports: Vec<u16> = (1..=3).map(|i| c.node(i).base_port).collect();
    sql(c.node(1), "CREATE DATABASE wire; CREATE TABLE wire.t (id INT PRIMARY KEY, secret VARCHAR(64))")
        .map_err(anyhow::Error::msg)?;
    let capture_dir = tempfile::tempdir()?;
    let capture = Capture::start(capture_dir.path(), &ports)?;
    let marker = format!("row-value-{:016x}", rand::random::<u64>());
    for i in 1..=3 {
        for k in 0..20 {
            let id = i * 100 + k;
            sql(c.node(i), &format!("INSERT INTO wire.t VALUES ({id}, '{marker}')")).map_err(anyhow::Error::msg)?;
        }
    }
    for i in 1..=3 {
        let n = sql(c.node(i), "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM wire.t").map_err(anyhow::Error::msg)?;
        ensure!(n == "60", "node {i} holds every row: {n}");
    }
    let seen = capture.stop()?;
    ensure!(seen.len() > 10_000, "the capture saw the replication traffic ({} bytes)", seen.len());
    if tls {
        for i in 1..=3 {
            ensure!(
                error_log(c.node(i)).contains("The group channel is encrypted with TLS"),
                "node {i} says it encrypts"
            );
        }
    }
    Ok(occurrences(&seen, marker.as_bytes()))
}

#[test]
fn the_group_ports_carry_no_row_values_with_tls_and_do_without() -> anyhow::Result<()> {
    let plain = marker_on_the_wire(false)?;
    ensure!(plain >= 40, "plaintext: each row's value crosses to two other nodes ({plain} seen)");
    let encrypted = marker_on_the_wire(true)?;
    ensure!(encrypted == 0, "TLS: no row value on the wire ({encrypted} seen)");
    Ok(())
}

/// One round of two nodes updating the same row: exactly one commits, the
/// other gets a deadlock error, every node holds the winner's value.
fn conflict_round(c: &TestCluster, round: i32) -> anyhow::Result<()> {
    let (a, b) = (c.node(1).clone(), c.node(2).clone());
    sql(&b, "SET SESSION wsrep_sync_wait=15; SELECT 1").map_err(anyhow::Error::msg)?;
    let txn = |who: i32| format!("BEGIN; UPDATE race.t SET v = {who} WHERE id = 1; DO SLEEP(1); COMMIT;");
    let (qa, qb) = (txn(10 * round + 1), txn(10 * round + 2));
    let ta = std::thread::spawn(move || sql(&a, &qa));
    let tb = std::thread::spawn(move || sql(&b, &qb));
    let results = [ta.join().expect("writer"), tb.join().expect("writer")];
    let ok: Vec<usize> = (0..2).filter(|&k| results[k].is_ok()).collect();
    ensure!(ok.len() == 1, "round {round}: exactly one commits: {results:?}");
    let loser = &results[1 - ok[0]];
    ensure!(loser.as_ref().is_err_and(|e| e.contains("1213")), "round {round}: the other deadlocks: {loser:?}");
    let winner = (10 * round + 1 + ok[0] as i32).to_string();
    for i in 1..=3 {
        let v = sql(c.node(i), "SET SESSION wsrep_sync_wait=15; SELECT v FROM race.t WHERE id = 1")
            .map_err(anyhow::Error::msg)?;
        ensure!(v == winner, "round {round}: node {i} holds the winner's value {winner}, not {v}");
    }
    Ok(())
}

#[test]
fn a_tls_cluster_resolves_conflicts_survives_a_crash_and_rotates_its_certificates_under_writes() -> anyhow::Result<()> {
    let mut c = up_with(3, |spec| spec.tls = true)?;
    sql(c.node(1), "CREATE DATABASE race; CREATE TABLE race.t (id INT PRIMARY KEY, v INT); INSERT INTO race.t VALUES (1, 0)")
        .map_err(anyhow::Error::msg)?;
    for round in 1..=3 {
        conflict_round(&c, round)?;
    }

    sql(c.node(1), "CREATE DATABASE acked; CREATE TABLE acked.t (node INT, seq INT, PRIMARY KEY (node, seq))")
        .map_err(anyhow::Error::msg)?;
    let writers = AckedWriters::start(&c, "acked.t");
    std::thread::sleep(Duration::from_secs(2));

    // Rotation: a new key and certificate per node from the cluster's CA,
    // written over the old files, then re-read while the writers go on.
    let dir = c.state().dir.clone();
    for i in 1..=3 {
        let name = c.node(i).name.clone();
        let before = std::fs::read(certs::cert_file(&dir, &name))?;
        certs::reissue(&dir, &name)?;
        ensure!(std::fs::read(certs::cert_file(&dir, &name))? != before, "{name} has a new certificate");
        sql(c.node(i), "SET GLOBAL wsrep_provider_options='socket.ssl_reload=1'").map_err(anyhow::Error::msg)?;
        ensure!(error_log(c.node(i)).contains("Reloaded the TLS certificate and key"), "{name} reloaded");
    }
    // A crashed node comes back with new connections: the rotated pairs.
    c.kill(3)?;
    std::thread::sleep(Duration::from_secs(2));
    c.start(3)?;
    c.wait_synced(3, SYNCED)?;
    std::thread::sleep(Duration::from_secs(2));
    let acked = writers.stop();
    ensure!(acked.len() > 50, "the writers were acknowledged while all this went on ({})", acked.len());
    for i in 1..=3 {
        let missing = missing_acked(c.node(i), "acked.t", &acked)?;
        ensure!(missing.is_empty(), "node {i} lacks acknowledged commits: {missing:?}");
    }
    conflict_round(&c, 4)?;
    assert_identical(&c, &["race.t", "acked.t"])
}

#[test]
fn tls_with_a_missing_key_file_stops_startup_naming_the_file() -> anyhow::Result<()> {
    let mut c = up_with(2, |spec| spec.tls = true)?;
    c.stop(2)?;
    let missing = c.state().dir.join("tls").join("no-such-key.pem");
    let from = error_log(c.node(2)).len();
    let start = Start {
        provider_options: vec![("socket.ssl_key".into(), missing.display().to_string())],
        ..Start::default()
    };
    c.start_with(2, &start)?;
    wait_for("node 2 to refuse to start", Duration::from_secs(120), || Ok(!c.is_running(2)))?;
    let log = error_log(c.node(2))[from..].to_string();
    ensure!(log.contains("socket.ssl_key") && log.contains("no-such-key.pem"), "the file is named:\n{log}");
    ensure!(status(c.node(1), "wsrep_cluster_size")? == "1", "the rest goes on");
    sql(c.node(1), "CREATE DATABASE fine").map_err(anyhow::Error::msg)?;
    Ok(())
}
