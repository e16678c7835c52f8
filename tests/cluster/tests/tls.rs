//! TLS on the group channel of real clusters (`tandem cluster up --tls`):
//! - what crosses the group ports carries none of the rows written, and the
//!   same capture of a plaintext cluster does (so the check can fail);
//! - a TLS cluster resolves conflicts, survives a kill -9 with every
//!   acknowledged commit kept, and rotates its certificates with
//!   `socket.ssl_reload` while writes go on;
//! - `socket.ssl=YES` with a missing file stops startup naming the file;
//! - bad input on a TLS group port (random bytes, a truncated handshake, a
//!   huge length prefix in plaintext and inside TLS, a slow-loris peer, a
//!   plaintext peer, a certificate from another CA) is refused with a clear,
//!   rate-limited line, and 1,000 such attempts leave the node's thread
//!   count and memory where they were.

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
    // mariabackup's transfer, to check that a --tls cluster encrypts it too
    // (sst_tandem.rs checks the tandem method's).
    let c = up_with(3, |spec| {
        spec.tls = tls;
        spec.mysqld_options.push(("wsrep_sst_method".into(), "mariabackup".into()));
    })?;
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
        let n = sql(c.node(i), "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM wire.t")
            .map_err(anyhow::Error::msg)?;
        ensure!(n == "60", "node {i} holds every row: {n}");
    }
    let seen = capture.stop()?;
    // What `tandem cluster status` shows as LINKS: how each link is carried.
    // Every member keeps a link to every other (a full mesh, as Galera's).
    let (yes, no) = if tls { ("TLS", "plaintext") } else { ("plaintext", "TLS") };
    let mut carried = 0;
    for i in 1..=3 {
        let links = status(c.node(i), "wsrep_group_links")?;
        ensure!(links.contains(yes) && !links.contains(no), "node {i}'s links: {links}");
        carried += links.matches(yes).count();
    }
    ensure!(carried == 6, "each node's two links are up and {yes}");
    ensure!(seen.len() > 10_000, "the capture saw the replication traffic ({} bytes)", seen.len());
    if tls {
        let dir = c.state().dir.clone();
        for i in 1..=3 {
            let log = error_log(c.node(i));
            ensure!(log.contains("The group channel is encrypted with TLS"), "node {i} says it encrypts");
            if i > 1 {
                // Nodes 2 and 3 joined by SST: mariabackup's stream went
                // through socat with OpenSSL and the node's certificate.
                let cert = certs::cert_file(&dir, &c.node(i).name).display().to_string();
                ensure!(
                    log.contains(&format!("with cert='{cert}'")),
                    "node {i}'s state transfer was encrypted:\n{}",
                    tail(&log)
                );
            }
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
    sql(
        c.node(1),
        "CREATE DATABASE race; CREATE TABLE race.t (id INT PRIMARY KEY, v INT); INSERT INTO race.t VALUES (1, 0)",
    )
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
    let start =
        Start { provider_options: vec![("socket.ssl_key".into(), missing.display().to_string())], ..Start::default() };
    c.start_with(2, &start)?;
    wait_for("node 2 to refuse to start", Duration::from_secs(120), || Ok(!c.is_running(2)))?;
    let log = error_log(c.node(2))[from..].to_string();
    ensure!(log.contains("socket.ssl_key") && log.contains("no-such-key.pem"), "the file is named:\n{log}");
    ensure!(status(c.node(1), "wsrep_cluster_size")? == "1", "the rest goes on");
    sql(c.node(1), "CREATE DATABASE fine").map_err(anyhow::Error::msg)?;
    Ok(())
}

/// One kind of bad visitor of a TLS group port.
#[derive(Clone, Copy, Debug)]
enum Attempt {
    RandomBytes,
    TruncatedHandshake,
    /// Our preamble, then a frame length of 4 GiB, in plaintext.
    HugeLengthPlain,
    /// The same inside TLS, with a certificate of the cluster's own CA.
    HugeLengthInsideTls,
    /// Connects and says nothing.
    SlowLoris,
    /// A TLS client whose certificate another CA signed.
    ForeignCa,
}

const ATTEMPTS: [Attempt; 6] = [
    Attempt::RandomBytes,
    Attempt::TruncatedHandshake,
    Attempt::HugeLengthPlain,
    Attempt::HugeLengthInsideTls,
    Attempt::SlowLoris,
    Attempt::ForeignCa,
];

struct Visitor {
    addr: String,
    ours: std::sync::Arc<tandem_group::Tls>,
    foreign: std::sync::Arc<tandem_group::Tls>,
}

impl Visitor {
    async fn visit(&self, attempt: Attempt) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(tcp) = tokio::net::TcpStream::connect(&self.addr).await else { return };
        let mut huge = b"TNDM".to_vec();
        huge.extend_from_slice(&tandem_group::wire::PROTOCOL_VERSION.to_be_bytes());
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        let mut sink = Vec::new();
        match attempt {
            Attempt::RandomBytes => {
                let mut tcp = tcp;
                let junk: Vec<u8> = (0..2048).map(|_| rand::random::<u8>()).collect();
                let _ = tcp.write_all(&junk).await;
                let _ = tcp.read_to_end(&mut sink).await;
            }
            Attempt::TruncatedHandshake => {
                let mut tcp = tcp;
                let _ = tcp.write_all(b"TNDM\0").await;
            }
            Attempt::HugeLengthPlain => {
                let mut tcp = tcp;
                let _ = tcp.write_all(&huge).await;
                let _ = tcp.read_to_end(&mut sink).await;
            }
            Attempt::HugeLengthInsideTls => {
                if let Ok(mut s) = self.ours.connect(tcp, &self.addr).await {
                    let _ = s.write_all(&huge).await;
                    let _ = s.flush().await;
                    let _ = s.read_to_end(&mut sink).await;
                }
            }
            Attempt::SlowLoris => {
                let mut tcp = tcp;
                let _ = tcp.read_to_end(&mut sink).await; // until the node closes it
            }
            Attempt::ForeignCa => {
                if let Ok(mut s) = self.foreign.connect(tcp, &self.addr).await {
                    let _ = s.read_to_end(&mut sink).await;
                }
            }
        }
    }
}

/// (threads, resident KiB) of a process.
fn threads_and_rss(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = status.lines().find(|l| l.starts_with(name)).with_context(|| format!("{name} in status"))?;
        Ok(line.split_whitespace().nth(1).context("a value")?.parse()?)
    };
    Ok((field("Threads:")?, field("VmRSS:")?))
}

#[test]
fn bad_input_on_a_tls_group_port_is_refused_and_a_thousand_attempts_leak_nothing() -> anyhow::Result<()> {
    let c = up_with(3, |spec| spec.tls = true)?;
    let n1 = c.node(1).clone();
    let pid = n1.pid.context("node 1 runs")?;
    let dir = c.state().dir.clone();
    let ours = tandem_group::TlsFiles {
        cert: certs::cert_file(&dir, &c.node(2).name),
        key: certs::key_file(&dir, &c.node(2).name),
        ca: certs::ca_file(&dir),
    };
    let elsewhere = tempfile::tempdir()?;
    certs::generate(elsewhere.path(), &["intruder".to_string()])?;
    let foreign = tandem_group::TlsFiles {
        cert: certs::cert_file(elsewhere.path(), "intruder"),
        key: certs::key_file(elsewhere.path(), "intruder"),
        ca: certs::ca_file(elsewhere.path()),
    };
    let visitor = std::sync::Arc::new(Visitor {
        addr: format!("127.0.0.1:{}", n1.base_port),
        ours: std::sync::Arc::new(tandem_group::Tls::load(&ours)?),
        foreign: std::sync::Arc::new(tandem_group::Tls::load(&foreign)?),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    // `rounds` attempts, cycling through the kinds, 200 at a time (a slow-loris
    // visitor holds its batch for the 5 s handshake limit).
    let attack = |rounds: usize| {
        runtime.block_on(async {
            let mut tasks = Vec::new();
            for k in 0..rounds {
                let visitor = visitor.clone();
                tasks.push(tokio::spawn(async move { visitor.visit(ATTEMPTS[k % ATTEMPTS.len()]).await }));
                if tasks.len() == 200 {
                    for t in tasks.drain(..) {
                        let _ = t.await;
                    }
                }
            }
            for t in tasks {
                let _ = t.await;
            }
        })
    };

    // Each kind once, to see its line; then a warm-up, so that pools and
    // caches that grow once are grown before the measurement.
    let log_from = error_log(&n1).len();
    attack(ATTEMPTS.len());
    std::thread::sleep(Duration::from_secs(2));
    let lines = error_log(&n1)[log_from..].to_string();
    // Random bytes, a truncated handshake and a plaintext length prefix are
    // all plaintext to a TLS port: one line for the three (rate-limited).
    for expected in [
        "did not start a TLS handshake, and this member requires TLS",
        "did not complete its handshake",
        "failed: received fatal alert",
        "exceeds the size limit",
    ] {
        ensure!(lines.contains(expected), "a clear line with '{expected}':\n{}", tail(&lines));
    }
    attack(200);
    std::thread::sleep(Duration::from_secs(6));
    let before = threads_and_rss(pid)?;

    let log_from = error_log(&n1).len();
    attack(1000);
    // The slowest visitors are closed after the 5 s handshake limit.
    std::thread::sleep(Duration::from_secs(8));
    let after = threads_and_rss(pid)?;
    eprintln!("node 1 before 1,000 refused attempts: {before:?} (threads, RSS KiB); after: {after:?}");
    ensure!(after.0 <= before.0, "no thread left behind: {} then {}", before.0, after.0);
    ensure!(
        after.1 <= before.1 + 16 * 1024,
        "memory stays put (a leak of 16 KiB per attempt would show): {} KiB then {} KiB",
        before.1,
        after.1
    );
    // Refusals are rate-limited: a scan does not flood the error log.
    let flood = error_log(&n1)[log_from..].lines().filter(|l| l.contains("[ERROR]")).count();
    ensure!(flood < 60, "{flood} error lines for 1,000 attempts");

    for i in 1..=3 {
        ensure!(status(c.node(i), "wsrep_local_state_comment")? == "Synced", "node {i} stays Synced");
    }
    sql(&n1, "CREATE DATABASE after_attack; CREATE TABLE after_attack.t (id INT PRIMARY KEY); INSERT INTO after_attack.t VALUES (1)")
        .map_err(anyhow::Error::msg)?;
    let v = sql(c.node(3), "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*) FROM after_attack.t")
        .map_err(anyhow::Error::msg)?;
    ensure!(v == "1", "node 3 has the row: {v}");
    Ok(())
}
