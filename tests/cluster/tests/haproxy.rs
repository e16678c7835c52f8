//! A real HAProxy (Debian's package) in front of a 3-node cluster, checking
//! each node with the provider's own health check (`option httpchk`) and
//! agent check: clients through HAProxy keep working while a node is
//! desynced, becomes an SST donor, or is killed, and HAProxy takes each one
//! out and puts it back. How long that takes is reported, never asserted.
//! A second listener sends all writes to one node, with the others as
//! backups: when that node is killed the writes move to the next one, and
//! nothing acknowledged through either listener is lost.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use tandem::cluster::state::Node;
use tandem_cluster_tests::*;

const TABLE: &str = "hap.acks";

/// HAProxy in the foreground, stopped by its PID when dropped.
struct Haproxy {
    child: Child,
    stats: PathBuf,
    /// The read pool: every node, weighted by the agent check.
    port: u16,
    /// The single writer, with the other nodes as backups.
    writer_port: u16,
}

const WRITER: &str = "writer";
const POOL: &str = "mariadb";

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_haproxy(dir: &Path, nodes: &[Node]) -> Result<Haproxy> {
    let [port, writer_port] = tandem_cluster_tests::spare_ports(nodes, 2)?[..] else { unreachable!("two ports asked") };
    let stats = dir.join("haproxy.sock");
    let mut config = format!(
        "global\n  stats socket {} mode 600 level admin\n\
         defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n  \
         retries 3\n  option redispatch\n  \
         option httpchk GET /health\n  http-check expect status 200\n  \
         default-server inter 500ms fall 2 rise 2\n",
        stats.display()
    );
    config += &writer_listener(writer_port, nodes)?;
    config += &format!("listen mariadb\n  bind 127.0.0.1:{port}\n  balance roundrobin\n");
    for node in nodes {
        let (health, agent) = (node.health_addr().context("no health port")?, node.agent_addr().context("no agent")?);
        config += &format!(
            "  server {} 127.0.0.1:{} check port {} agent-check agent-port {} agent-inter 500ms\n",
            node.name,
            node.sql_port,
            health.port(),
            agent.port()
        );
    }
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(&cfg, config)?;
    let log = std::fs::File::create(dir.join("haproxy.log"))?;
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(log.try_clone()?)
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .context("start haproxy (make deps installs it)")?;
    Ok(Haproxy { child, stats, port, writer_port })
}

/// One writer: the first node while its health check passes, else the
/// first backup that passes (HAProxy uses one backup at a time), so writes
/// never go to two nodes at once and certification conflicts between
/// clients cannot happen.
fn writer_listener(port: u16, nodes: &[Node]) -> Result<String> {
    let mut listen = format!("listen {WRITER}\n  bind 127.0.0.1:{port}\n");
    for (i, node) in nodes.iter().enumerate() {
        let health = node.health_addr().context("no health port")?;
        let backup = if i == 0 { "" } else { " backup" };
        listen += &format!("  server {} 127.0.0.1:{} check port {}{backup}\n", node.name, node.sql_port, health.port());
    }
    Ok(listen)
}

impl Haproxy {
    /// Each server of the listener `proxy`: its status as HAProxy's stats
    /// show it ("UP", "DOWN", "DRAIN", "UP 1/2", ...), its current weight
    /// and how many connections it was given.
    fn servers(&self, proxy: &str) -> Result<Vec<(String, String, u32, u64)>> {
        let mut s = UnixStream::connect(&self.stats)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"show stat\n")?;
        let mut csv = String::new();
        s.read_to_string(&mut csv)?;
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().context("empty stats")?.trim_start_matches("# ").split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).with_context(|| format!("no {name} column"));
        let (px, sv, status, weight, total) =
            (col("pxname")?, col("svname")?, col("status")?, col("weight")?, col("stot")?);
        let mut out = vec![];
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() > weight.max(total) && f[px] == proxy && f[sv].starts_with("node") {
                let number = |i: usize| f[i].parse().unwrap_or(0);
                out.push((f[sv].to_string(), f[status].to_string(), number(weight) as u32, number(total)));
            }
        }
        Ok(out)
    }

    /// Whether HAProxy sends new connections of the read pool to `name`.
    fn in_rotation(&self, name: &str) -> Result<bool> {
        let servers = self.servers(POOL)?;
        let (_, status, weight, _) =
            servers.iter().find(|(n, ..)| n == name).with_context(|| format!("{name} not in {servers:?}"))?;
        Ok(status == "UP" && *weight > 0)
    }

    /// Connections the writer listener gave each node so far.
    fn writer_connections(&self) -> Result<Vec<(String, u64)>> {
        Ok(self.servers(WRITER)?.into_iter().map(|(name, _, _, total)| (name, total)).collect())
    }

    /// Waits until `name` is in (or out of) rotation; the time it took.
    fn wait(&self, name: &str, wanted: bool, what: &str) -> Result<Duration> {
        wait_for(&format!("HAProxy: {name} {what}"), Duration::from_secs(120), || Ok(self.in_rotation(name)? == wanted))
    }
}

/// Clients through HAProxy: a new connection per insert, as short-lived
/// application connections do; what was acknowledged is kept.
struct Writers {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeSet<(usize, i32)>>>,
    failed: Arc<Mutex<u64>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Writers {
    /// Clients numbered `ids` (the first column of their rows).
    fn start(port: u16, ids: std::ops::RangeInclusive<usize>) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let failed = Arc::new(Mutex::new(0));
        let threads = ids
            .map(|w| {
                let (stop, acked, failed) = (stop.clone(), acked.clone(), failed.clone());
                thread::spawn(move || {
                    let mut seq = 0;
                    while !stop.load(Ordering::Acquire) {
                        seq += 1;
                        if tcp_sql(port, &format!("INSERT INTO {TABLE} VALUES ({w}, {seq})")).is_ok() {
                            acked.lock().unwrap().insert((w, seq));
                        } else {
                            *failed.lock().unwrap() += 1;
                            thread::sleep(Duration::from_millis(50));
                        }
                    }
                })
            })
            .collect();
        Writers { stop, acked, failed, threads }
    }

    fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Waits until `more` further commits were acknowledged through HAProxy.
    fn wait_progress(&self, more: usize, while_what: &str) -> Result<()> {
        let from = self.acked();
        wait_for(&format!("{more} commits through HAProxy while {while_what}"), Duration::from_secs(60), || {
            Ok(self.acked() >= from + more)
        })
        .map(|_| ())
    }

    fn stop(mut self) -> (BTreeSet<(usize, i32)>, u64) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let acked = self.acked.lock().unwrap().clone();
        let failed = *self.failed.lock().unwrap();
        (acked, failed)
    }
}

fn tcp_sql(port: u16, query: &str) -> Result<()> {
    let out = Command::new("mariadb")
        .args(["--no-defaults", "-uroot", "-h127.0.0.1", "--connect-timeout=5", "-N", "-B"])
        .arg(format!("-P{port}"))
        .args(["-e", query])
        .output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Both times count from when the test made (or, for a donor, first saw) the
/// change: a few hundred milliseconds of them are the checks' interval.
fn report(event: &str, node: &str, out: Duration, back: Duration) {
    eprintln!("haproxy: {event} {node}: out of rotation {out:.1?} after the change, back in {back:.1?} after it ended");
}

/// The node that is donating, if any, while node `joiner` joins.
fn donor(c: &TestCluster, joiner: usize) -> Option<usize> {
    (1..=c.len()).filter(|&i| i != joiner).find(|&i| status(c.node(i), "wsrep_local_state").is_ok_and(|s| s == "2"))
}

/// How many more connections the writer listener gave `node` than before.
fn gained(before: &[(String, u64)], after: &[(String, u64)], node: &str) -> u64 {
    let of = |v: &[(String, u64)]| v.iter().find(|(n, _)| n == node).map_or(0, |(_, t)| *t);
    of(after).saturating_sub(of(before))
}

/// Node 1, the writer, killed: out of the pool and back after it restarts
/// and syncs; the writes move to the first backup, node 2, and only to it,
/// and come back to node 1 once it passes its check again.
fn kill_the_writer(c: &mut TestCluster, proxy: &Haproxy, pool: &Writers, single: &Writers) -> Result<()> {
    proxy.wait("node1", true, "up before the kill")?;
    let before = proxy.writer_connections()?;
    c.kill(1)?;
    let out = proxy.wait("node1", false, "out after kill -9")?;
    pool.wait_progress(20, "node1 is dead")?;
    single.wait_progress(20, "the writer node1 is dead")?;
    let after = proxy.writer_connections()?;
    eprintln!("haproxy: writer connections before the kill {before:?}, after {after:?}");
    ensure!(gained(&before, &after, "node2") >= 20, "the writes did not move to node2: {before:?} -> {after:?}");
    ensure!(gained(&before, &after, "node3") == 0, "writes went to a second backup: {before:?} -> {after:?}");
    c.start(1)?;
    c.wait_synced(1, Duration::from_secs(240))?;
    let back = proxy.wait("node1", true, "back after restart")?;
    report("kill -9", "node1", out, back);
    let restarted = proxy.writer_connections()?;
    wait_for("the writes back on node1", Duration::from_secs(60), || {
        Ok(gained(&restarted, &proxy.writer_connections()?, "node1") >= 1)
    })?;
    single.wait_progress(5, "node1 is the writer again")?;
    Ok(())
}

#[test]
fn haproxy_takes_nodes_out_and_back_while_clients_go_on() -> Result<()> {
    // mariabackup: the tandem method donates in a fraction of a second,
    // too short for HAProxy's checks to take the donor out.
    let mut c = up_with(3, |s| s.mysqld_options.push(("wsrep_sst_method".into(), "mariabackup".into())))?;
    let dir = tempfile::Builder::new().prefix("tandem-haproxy-").tempdir_in("/tmp")?;
    let proxy = start_haproxy(dir.path(), c.nodes())?;
    for node in c.nodes() {
        proxy.wait(&node.name, true, "up")?;
    }
    sql(c.node(1), &format!("CREATE DATABASE hap; CREATE TABLE {TABLE} (node INT, seq INT, PRIMARY KEY (node, seq))"))
        .map_err(anyhow::Error::msg)?;
    let writers = Writers::start(proxy.port, 1..=2);
    let single = Writers::start(proxy.writer_port, 3..=3);
    writers.wait_progress(20, "all nodes are up")?;
    single.wait_progress(5, "the writer is up")?;

    // Desynced by the operator: out, and back after the resync.
    sql(c.node(2), "SET GLOBAL wsrep_desync = ON").map_err(anyhow::Error::msg)?;
    let out = proxy.wait("node2", false, "out while desynced")?;
    writers.wait_progress(20, "node2 is desynced")?;
    sql(c.node(2), "SET GLOBAL wsrep_desync = OFF").map_err(anyhow::Error::msg)?;
    let back = proxy.wait("node2", true, "back after resync")?;
    report("desync", "node2", out, back);

    // A donor: node 3 rejoins with an empty data directory, so it needs a
    // full state transfer from node 1 or 2.
    c.stop(3)?;
    proxy.wait("node3", false, "out after a clean stop")?;
    std::fs::remove_dir_all(&c.node(3).datadir)?;
    std::fs::create_dir_all(&c.node(3).datadir)?;
    c.start(3)?;
    // The donor stays one for seconds (mariabackup streams the whole data
    // directory, and the cluster runs it: see below): long enough for the
    // test's 200 ms polls and HAProxy's 500 ms checks to see it.
    wait_for("a donor", Duration::from_secs(120), || Ok(donor(&c, 3).is_some()))?;
    let d = donor(&c, 3).context("the donation ended before the test could name the donor")?;
    let name = format!("node{d}");
    let out = proxy.wait(&name, false, "out while donating")?;
    writers.wait_progress(5, "a node donates")?;
    c.wait_synced(3, Duration::from_secs(240))?;
    let back = proxy.wait(&name, true, "back after donating")?;
    report("SST donor", &name, out, back);
    proxy.wait("node3", true, "back after its state transfer")?;
    writers.wait_progress(20, "node3 rejoined")?;

    kill_the_writer(&mut c, &proxy, &writers, &single)?;
    writers.wait_progress(20, "all nodes are back")?;

    let (mut acked, failed) = writers.stop();
    let (single_acked, single_failed) = single.stop();
    eprintln!("haproxy: {} commits acknowledged through HAProxy, {failed} attempts failed", acked.len());
    eprintln!("haproxy: {} through the writer, {single_failed} attempts failed", single_acked.len());
    acked.extend(single_acked);
    let reference = checksums(c.node(1), &[TABLE])?;
    for i in 1..=3 {
        let missing = missing_acked(c.node(i), TABLE, &acked)?;
        ensure!(missing.is_empty(), "node {i} lacks acknowledged commits {missing:?}");
        ensure!(checksums(c.node(i), &[TABLE])? == reference, "node {i} differs from node 1");
    }
    Ok(())
}
