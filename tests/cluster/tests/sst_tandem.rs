//! `wsrep_sst_method=tandem` with real servers: nodes that join with an
//! empty data directory get it from a donor by the tandem method, over TLS
//! with the cluster's certificates, compressed, while every node takes
//! writes; a joiner shows its transfer on its own endpoints; and a
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

/// The SST processes of this cluster's nodes (tests may run side by side).
fn sst_processes(c: &TestCluster) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let ours: Vec<String> = (1..=c.len()).map(|i| c.node(i).datadir.display().to_string()).collect();
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmd| cmd.contains(" sst --role") && ours.iter().any(|d| cmd.contains(d.as_str())))
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
    // This time the donor compresses (read from its option file when the
    // transfer starts; no restart).
    for i in [1, 2] {
        let cnf = c.node(i).cnf.clone();
        let text = std::fs::read_to_string(&cnf)?;
        std::fs::write(&cnf, format!("{text}\n[sst]\ncompression=zstd\n"))?;
    }
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
    let sent: Vec<String> = (1..=2)
        .flat_map(|i| {
            error_log(c.node(i))
                .lines()
                .filter(|l| l.contains("WSREP_SST: [INFO] Sent "))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(sent.len(), 3, "three transfers, one of them compressed: {sent:#?}");
    let compressed: Vec<&String> = sent.iter().filter(|l| l.contains(", TLS, zstd level 1 to ")).collect();
    assert_eq!(compressed.len(), 1, "the rejoin was not compressed: {sent:#?}");
    assert!(acked.iter().any(|(n, _)| *n == 3), "node 3 took no writes after its transfer");
    for i in 1..=3 {
        let missing = missing_acked(c.node(i), TABLE, &acked)?;
        assert!(missing.is_empty(), "node {i} lacks acknowledged commits {missing:?}");
    }
    assert_identical(&c, &[TABLE, "mysql.user"])?;
    assert!(sst_processes(&c).is_empty(), "SST processes left: {:?}", sst_processes(&c));
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
        Ok(sst_processes(&c).is_empty())
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

/// The data directory's size in bytes, as a donor would send it (near
/// enough: the node's own small files are counted too).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => dir_bytes(&e.path()),
                    _ => e.metadata().map_or(0, |m| m.len()),
                })
                .sum()
        })
        .unwrap_or(0)
}

fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// What a scrape of the joiner showed of its transfer.
#[derive(Debug, PartialEq)]
struct Sample {
    received: f64,
    total: f64,
    ratio: Option<f64>,
}

/// The joining server answers no SQL until its transfer is over: a DBA
/// watches it on the joiner's own `/metrics` and health check (the donor's
/// show the other end), and caps the donor's rate with `[sst] rlimit` so
/// its clients keep their link.
#[test]
fn the_endpoints_of_both_ends_show_a_rate_capped_transfer_as_it_goes() -> anyhow::Result<()> {
    let mut c = up_with(2, tandem_sst)?;
    sql(c.node(1), "CREATE DATABASE sst; CREATE TABLE sst.acked (node INT, seq INT, PRIMARY KEY (node, seq))")
        .map_err(anyhow::Error::msg)?;
    c.stop(2)?;
    wipe(c.node(2))?;
    // About eight seconds of transfer, whatever this server's files weigh:
    // long enough to be seen in flight, and to log its progress once.
    let rate = (dir_bytes(&c.node(1).datadir) / 8).max(1 << 20);
    let cnf = c.node(1).cnf.clone();
    let text = std::fs::read_to_string(&cnf)?;
    std::fs::write(&cnf, format!("{text}\n[sst]\nrlimit={rate}\n"))?;
    let addr = c.node(2).health_addr().expect("tandem nodes have a health listener");
    let donor_addr = c.node(1).health_addr().expect("tandem nodes have a health listener");

    c.start(2)?;
    let mut samples: Vec<Sample> = Vec::new();
    let mut unavailable_during_transfer = Vec::new();
    let (mut donor_sent, mut donor_health) = (Vec::new(), Vec::new());
    wait_for("node 2 to become Synced", Duration::from_secs(240), || {
        if let Ok((200, metrics)) = tandem::cluster::endpoints::http_get(donor_addr, "/metrics") {
            if let Some(sent) = gauge(&metrics, "tandem_sst_sent_bytes") {
                donor_sent.push(sent as u64);
                donor_health.extend(tandem::cluster::endpoints::http_get(donor_addr, "/health"));
            }
        }
        if let Ok((200, metrics)) = tandem::cluster::endpoints::http_get(addr, "/metrics") {
            if let (Some(received), Some(total)) =
                (gauge(&metrics, "tandem_sst_received_bytes"), gauge(&metrics, "tandem_sst_total_bytes"))
            {
                samples.push(Sample { received, total, ratio: gauge(&metrics, "tandem_sst_progress_ratio") });
                if let Ok((code, body)) = tandem::cluster::endpoints::http_get(addr, "/health") {
                    unavailable_during_transfer.push((code, body));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        Ok(status(c.node(2), "wsrep_local_state_comment").is_ok_and(|s| s == "Synced"))
    })?;
    let in_flight: Vec<&Sample> = samples.iter().filter(|s| s.total > 0.0 && s.received < s.total).collect();
    println!("{} scrapes during the transfer, {} in flight, at most {rate} B/s", samples.len(), in_flight.len());
    let mut seen: Vec<u64> = in_flight.iter().map(|s| s.received as u64).collect();
    seen.dedup();
    assert!(seen.len() >= 2, "the transfer was not seen advancing: {samples:?}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "received bytes went back: {seen:?}");
    for s in &in_flight {
        let ratio = s.ratio.expect("a ratio once the total is known");
        assert!((ratio - s.received / s.total).abs() < 1e-6, "{s:?}");
    }
    let total = in_flight[0].total;
    let donor_has = dir_bytes(&c.node(1).datadir) as f64;
    assert!(total > donor_has / 2.0 && total < donor_has * 2.0, "announced {total} bytes; the donor holds {donor_has}");
    assert!(
        unavailable_during_transfer.iter().any(|(code, body)| *code == 503 && body.contains("state transfer: ")),
        "the health check does not name the transfer: {unavailable_during_transfer:?}"
    );

    donor_sent.dedup();
    assert!(donor_sent.len() >= 2, "the donor's endpoints did not show it sending: {donor_sent:?}");
    assert!(donor_sent.windows(2).all(|w| w[0] < w[1]), "sent bytes went back: {donor_sent:?}");
    assert!(
        donor_health.iter().any(|(code, body)| *code == 503 && body.contains("donating a state transfer: ")),
        "the donor's health check does not name the transfer: {donor_health:?}"
    );

    for n in [1, 2] {
        let addr = c.node(n).health_addr().expect("a health listener");
        let (_, metrics) = tandem::cluster::endpoints::http_get(addr, "/metrics")?;
        assert!(!metrics.contains("tandem_sst_"), "node {n}: transfer series outlived the transfer");
        let file = c.node(n).datadir.join(".tandem_sst_progress");
        assert!(!file.exists(), "node {n}: the progress file was left behind");
    }
    let joiner = error_log(c.node(2));
    assert!(
        joiner.lines().any(|l| l.contains("WSREP_SST: [INFO] Received ") && l.contains("%) at ")),
        "no progress line in the joiner's log:\n{}",
        tail(&joiner)
    );
    assert!(error_log(c.node(1)).contains("([sst] rlimit)"), "the donor does not say it is capped");
    assert_identical(&c, &["mysql.user"])?;
    Ok(())
}
