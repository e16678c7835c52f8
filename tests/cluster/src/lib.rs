//! Helpers for real-cluster tests: clusters of `mariadbd` with our provider
//! in a temp dir on loopback, SQL, and waiting for conditions.
//!
//! Tests wait with generous deadlines only to fail a hung test; they never
//! assert on how long something took, except where the acceptance itself is
//! a deadline a DBA relies on (for example "writable again within 10 s").

pub mod bank;
pub mod ist;
pub mod la_faults;
pub mod la_matrix;
pub mod list_append;
pub mod netns;
pub mod restart;
pub mod rounds;
pub mod wan;

pub use ist::{ist_received, ist_status, ist_was_received, ist_went_on_from, IstStatus};

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tandem::cluster::state::Node;
use tandem::cluster::{Cluster, ClusterSpec, ProviderKind};
use tempfile::TempDir;

/// A cluster and the temp dir it lives in (removed after the processes stop).
pub struct TestCluster {
    pub cluster: Cluster,
    // Dropped after `cluster`: fields drop in declaration order.
    _dir: TempDir,
}

impl std::ops::Deref for TestCluster {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl std::ops::DerefMut for TestCluster {
    fn deref_mut(&mut self) -> &mut Cluster {
        &mut self.cluster
    }
}

pub fn provider_path() -> PathBuf {
    std::env::var_os("TANDEM_PROVIDER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/libtandem.so"))
}

/// The null provider (crates/null-provider, built by `make build`): the
/// floor the bench measures every provider against.
pub fn null_provider_path() -> PathBuf {
    std::env::var_os("TANDEM_NULL_PROVIDER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/libtandem_null.so"))
}

/// Timeouts short enough that failure tests finish quickly, long enough for a
/// loaded 2-core machine.
pub fn spec(dir: &TempDir, nodes: usize) -> ClusterSpec {
    let mut spec = ClusterSpec::new(dir.path().join("c"), nodes, ProviderKind::Tandem);
    spec.provider_path = Some(provider_path());
    spec.sync_timeout = Duration::from_secs(240);
    spec.provider_options =
        vec![("evs.suspect_timeout".into(), "PT3S".into()), ("evs.inactive_timeout".into(), "PT8S".into())];
    // Our own SST method: a joiner is Synced in about a second instead of
    // mariabackup's ten and more (its script sleeps 10 s). Tests about
    // mariabackup's transfer name it.
    spec.mysqld_options = vec![("wsrep_sst_method".into(), "tandem".into())];
    spec
}

pub fn up(nodes: usize) -> Result<TestCluster> {
    up_with(nodes, |_| {})
}

/// With `TANDEM_TEST_KEEP=1` the temp dir (data dirs, error logs, SST logs)
/// stays behind for a post-mortem; the processes are still stopped.
pub fn up_with(nodes: usize, adjust: impl FnOnce(&mut ClusterSpec)) -> Result<TestCluster> {
    let mut dir = tempfile::Builder::new().prefix("tandem-").tempdir_in("/tmp")?;
    if std::env::var_os("TANDEM_TEST_KEEP").is_some_and(|v| v == "1") {
        dir.disable_cleanup(true);
        eprintln!("TANDEM_TEST_KEEP: keeping {}", dir.path().display());
    }
    let mut spec = spec(&dir, nodes);
    adjust(&mut spec);
    let cluster = Cluster::up(spec)?;
    Ok(TestCluster { cluster, _dir: dir })
}

/// Polls `check` until it returns `Ok(true)`; errors while polling count as
/// "not yet".
pub fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> Result<bool>) -> Result<Duration> {
    let start = Instant::now();
    let mut last_err = None;
    loop {
        match check() {
            Ok(true) => return Ok(start.elapsed()),
            Ok(false) => {}
            Err(e) => last_err = Some(e),
        }
        if start.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what} (last error: {last_err:?})");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub const SQL_TIMEOUT: Duration = Duration::from_secs(120);

/// `count` ports for a helper beside a cluster (a proxy, a scraper, an
/// arbitrator): free now, and none that one of `nodes` may bind later.
pub fn spare_ports<'a>(nodes: impl IntoIterator<Item = &'a Node>, count: usize) -> Result<Vec<u16>> {
    let reserved: Vec<u16> = nodes.into_iter().flat_map(Node::reserved_ports).collect();
    tandem::cluster::ports::spare(count, &reserved)
}

/// Runs SQL on a node given only its record (usable from other threads while
/// the cluster is being restarted). Returns the client's error text on failure.
pub fn sql(node: &Node, query: &str) -> Result<String, String> {
    let child = Command::new("mariadb")
        .args(["--no-defaults", "-uroot", "-N", "-B", "--connect-timeout=5"])
        .arg("-S")
        .arg(&node.socket)
        .arg("-e")
        .arg(query)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // A statement that hangs is a failure to report, not a test to hang.
    // The output is collected by another thread so a large result cannot
    // fill the pipe and stall the client.
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(SQL_TIMEOUT) {
        Ok(out) => out.map_err(|e| e.to_string())?,
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            return Err(format!("statement still running after {SQL_TIMEOUT:?} on {}: {query}", node.name));
        }
    };
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

pub fn status(node: &Node, var: &str) -> Result<String> {
    let out = sql(node, &format!("SHOW GLOBAL STATUS LIKE '{var}'")).map_err(anyhow::Error::msg)?;
    out.split('\t').nth(1).map(str::to_string).with_context(|| format!("no status {var} on {}", node.name))
}

/// `CHECKSUM TABLE` of each table, after a causal read so the node has applied
/// everything committed anywhere before the query.
pub fn checksums(node: &Node, tables: &[&str]) -> Result<String> {
    let q = format!("SET SESSION wsrep_sync_wait=15; CHECKSUM TABLE {}", tables.join(", "));
    sql(node, &q).map_err(anyhow::Error::msg)
}

/// Runs sysbench against one node; returns its output. Deadlock errors are
/// expected under multi-master conflicts and retried by sysbench itself.
pub fn sysbench(node: &Node, args: &[&str]) -> Result<String> {
    let out = Command::new("sysbench")
        .args(["--db-driver=mysql", "--mysql-user=root", "--mysql-db=sbtest"])
        .arg(format!("--mysql-socket={}", node.socket.display()))
        .args(args)
        .output()
        .context("running sysbench")?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("sysbench {args:?} failed on {}:\n{text}", node.name);
    }
    Ok(text)
}

/// Seconds for long-running workloads: the acceptance's 60 s by default,
/// `TANDEM_TEST_SECONDS` to shorten during development.
pub fn workload_seconds() -> u64 {
    std::env::var("TANDEM_TEST_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60)
}

pub fn error_log(node: &Node) -> String {
    std::fs::read_to_string(&node.error_log).unwrap_or_default()
}

/// A file that a full state transfer would replace (a joiner's data directory
/// becomes the donor's): if it survives a restart with this node's name in
/// it, the node caught up by IST. A donor that has a marker of its own sends
/// it, with the donor's name.
pub const NO_SST_MARKER: &str = "tandem-no-sst.marker";

fn no_sst_marker_text(node: &Node) -> String {
    format!("written by a test on {} while it was down\n", node.name)
}

pub fn put_no_sst_marker(node: &Node) -> Result<()> {
    let path = node.datadir.join(NO_SST_MARKER);
    std::fs::write(&path, no_sst_marker_text(node)).with_context(|| format!("writing {}", path.display()))
}

pub fn has_no_sst_marker(node: &Node) -> bool {
    std::fs::read_to_string(node.datadir.join(NO_SST_MARKER)).is_ok_and(|text| text == no_sst_marker_text(node))
}

/// Suffix of every file of the provider's durable state (the gcache: log
/// segments, identity, vote, checkpoints), plain files in the data directory.
pub const GCACHE_SUFFIX: &str = ".galera.cache";

/// Names of the data directory's files that belong to the durable state, sorted.
pub fn gcache_files(node: &Node) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&node.datadir).with_context(|| format!("reading {}", node.datadir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(GCACHE_SUFFIX) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// The log's segment files (`log.<first index>.seg.galera.cache`), in index order.
pub fn segments(node: &Node) -> Result<Vec<PathBuf>> {
    let segment = |n: &String| n.starts_with("log.") && n.ends_with(&format!(".seg{GCACHE_SUFFIX}"));
    // Zero-padded indexes: name order is index order.
    Ok(gcache_files(node)?.iter().filter(|n| segment(n)).map(|n| node.datadir.join(n)).collect())
}

/// The InnoDB position the CLI recovered (`mariadbd --wsrep-recover`) before
/// the node's latest start and passed as `--wsrep_start_position`.
pub fn recovered_seqno(node: &Node) -> Result<i64> {
    const MARK: &str = "WSREP: Recovered position: ";
    let path = node.dir.join("recover.log");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains(MARK))
        .with_context(|| format!("no recovered position in {}", path.display()))?;
    let seqno = line.rsplit(':').next().unwrap_or_default().trim();
    seqno.parse().with_context(|| format!("recovered position in {line:?}"))
}

pub fn status_i64(node: &Node, var: &str) -> Result<i64> {
    let text = status(node, var)?;
    text.parse().with_context(|| format!("{var} on {} is {text:?}", node.name))
}

/// `SET GLOBAL wsrep_provider_options='option'` on `node`.
pub fn set_provider_option(node: &Node, option: &str) -> Result<()> {
    sql(node, &format!("SET GLOBAL wsrep_provider_options='{option}'")).map(drop).map_err(anyhow::Error::msg)
}

/// Inserts rows `first..first+count` of `writer` into `table` (columns
/// `writer INT, seq INT, pad VARCHAR`), one autocommit statement, so one
/// write-set, per row, sent in batches of many statements per client call.
/// `pad` bytes of filler per row make the write-sets as large as needed.
pub fn insert_rows(node: &Node, table: &str, writer: u32, first: u64, count: u64, pad: usize) -> Result<()> {
    const BATCH: u64 = 1000;
    let mut seq = first;
    let end = first + count;
    while seq < end {
        let upto = (seq + BATCH).min(end);
        let mut q = String::with_capacity(((upto - seq) as usize) * 80);
        for s in seq..upto {
            q.push_str(&format!("INSERT INTO {table} VALUES ({writer},{s},REPEAT('x',{pad}));"));
        }
        sql(node, &q).map_err(|e| anyhow::anyhow!("inserting into {table} on {}: {e}", node.name))?;
        seq = upto;
    }
    Ok(())
}

/// `insert_rows` on several nodes at once, one writer per node (its number
/// is the node's): the shape of "the others go on writing while one is away".
pub fn insert_rows_on(c: &Cluster, nodes: &[usize], table: &str, first: u64, count: u64, pad: usize) -> Result<()> {
    let writers: Vec<_> = nodes
        .iter()
        .map(|&i| {
            let (node, table) = (c.node(i).clone(), table.to_string());
            std::thread::spawn(move || insert_rows(&node, &table, i as u32, first, count, pad))
        })
        .collect();
    for w in writers {
        w.join().expect("writer thread")?;
    }
    Ok(())
}

/// The table `insert_rows` writes to.
pub fn create_rows_table(node: &Node, table: &str) -> Result<()> {
    let db = table.split('.').next().unwrap_or(table);
    sql(
        node,
        &format!(
            "CREATE DATABASE IF NOT EXISTS {db}; \
             CREATE TABLE {table} (writer INT, seq INT, pad VARCHAR(8000), PRIMARY KEY (writer, seq))"
        ),
    )
    .map(drop)
    .map_err(anyhow::Error::msg)
}

/// Asserts that every node's `CHECKSUM TABLE` equals node 1's.
pub fn assert_identical(c: &Cluster, tables: &[&str]) -> Result<()> {
    let reference = checksums(c.node(1), tables)?;
    for i in 2..=c.len() {
        let other = checksums(c.node(i), tables)?;
        anyhow::ensure!(other == reference, "node {i} differs from node 1:\n{other}\nvs\n{reference}");
    }
    Ok(())
}

/// The options of wsrep GTIDs: a binary log with what each node applies,
/// every transaction in `wsrep_gtid_domain_id` = `domain`, and the server's
/// own `gtid_domain_id` another (0), so that a GTID in the wrong one shows.
pub fn gtid_mode_options(domain: u32) -> Vec<(String, String)> {
    [
        ("log_bin", "binlog".to_string()),
        ("log_slave_updates", "ON".into()),
        ("wsrep_gtid_mode", "ON".into()),
        ("wsrep_gtid_domain_id", domain.to_string()),
        ("gtid_domain_id", "0".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Every node's `gtid_binlog_pos`, once they are all the same (the last
/// writes may still be being applied elsewhere when this is called).
pub fn settled_gtids(c: &Cluster, when: &str) -> Result<String> {
    let read = || -> Result<Vec<String>> {
        (1..=c.len())
            .map(|i| sql(c.node(i), "SELECT @@gtid_binlog_pos").map(|p| p.trim().to_string()))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)
    };
    let same = wait_for(&format!("the same GTIDs on every node {when}"), Duration::from_secs(60), || {
        let positions = read()?;
        Ok(positions.iter().all(|p| p == &positions[0]))
    });
    if let Err(e) = same {
        bail!("{e}: {:?}", read()?);
    }
    Ok(read()?.swap_remove(0))
}

/// Whether every GTID of a `gtid_binlog_pos` is in `domain`.
pub fn all_in_domain(position: &str, domain: u32) -> bool {
    let domain = domain.to_string();
    !position.is_empty() && position.split(',').all(|g| g.split('-').next() == Some(domain.as_str()))
}

/// The sequence number of `domain`'s GTID in a `gtid_binlog_pos`.
pub fn domain_seqno(position: &str, domain: u32) -> Option<u64> {
    let prefix = format!("{domain}-");
    position.split(',').find(|g| g.starts_with(&prefix))?.rsplit('-').next()?.parse().ok()
}

/// One writer per node, each inserting `(node, seq)` rows into `table`, one
/// commit at a time, and remembering which commits the server acknowledged:
/// what a crash test then looks for on every node. A failed commit (the node
/// is down or not primary) is retried after a pause, with the next `seq`.
pub struct AckedWriters {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    acked: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<(usize, i32)>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl AckedWriters {
    /// `table` must have columns `(node INT, seq INT)`.
    pub fn start(c: &Cluster, table: &str) -> AckedWriters {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let acked = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
        let threads = (1..=c.len())
            .map(|i| {
                let (node, stop, acked, table) = (c.node(i).clone(), stop.clone(), acked.clone(), table.to_string());
                std::thread::spawn(move || {
                    let mut seq = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        seq += 1;
                        if sql(&node, &format!("INSERT INTO {table} VALUES ({i}, {seq})")).is_ok() {
                            acked.lock().unwrap().insert((i, seq));
                        } else {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                })
            })
            .collect();
        AckedWriters { stop, acked, threads }
    }

    /// Stops the writers; returns every acknowledged commit.
    pub fn stop(self) -> std::collections::BTreeSet<(usize, i32)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("writer thread");
        }
        let acked = self.acked.lock().unwrap().clone();
        acked
    }
}

/// The acknowledged commits that `node`'s `table` lacks (read after a causal
/// wait, so a node still applying is not reported).
pub fn missing_acked(
    node: &Node,
    table: &str,
    acked: &std::collections::BTreeSet<(usize, i32)>,
) -> Result<Vec<(usize, i32)>> {
    let rows = sql(node, &format!("SET SESSION wsrep_sync_wait=15; SELECT node, seq FROM {table}"))
        .map_err(anyhow::Error::msg)?;
    let present: std::collections::BTreeSet<(usize, i32)> = rows
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(a, b)| Ok((a.parse()?, b.parse()?)))
        .collect::<Result<_>>()?;
    Ok(acked.difference(&present).copied().collect())
}

/// The last 20 lines of a log, for an assertion's message.
/// The kind of a mysql client's error, "ERROR 1213 (40001)", without the
/// line, the message or what the client printed before it: what the
/// tests count errors by.
pub fn error_kind(text: &str) -> String {
    let from = text.find("ERROR ").map_or(text, |at| &text[at..]);
    from.split(" at line").next().unwrap_or(from).split(':').next().unwrap_or(from).chars().take(40).collect()
}

pub fn tail(s: &str) -> String {
    s.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_drop_the_line() {
        assert_eq!(error_kind("ERROR 1047 (08S01) at line 1: WSREP has not yet prepared node"), "ERROR 1047 (08S01)");
        assert_eq!(
            error_kind("--------------\nCOMMIT\n--------------\n\nERROR 1213 (40001) at line 1: Deadlock"),
            "ERROR 1213 (40001)"
        );
        assert_eq!(error_kind("ERROR 2013 (HY000): Lost connection to server"), "ERROR 2013 (HY000)");
    }
}
