//! Helpers for real-cluster tests: clusters of `mariadbd` with our provider
//! in a temp dir on loopback, SQL, and waiting for conditions.
//!
//! Tests wait with generous deadlines only to fail a hung test; they never
//! assert on how long something took, except where the acceptance itself is
//! a deadline a DBA relies on (for example "writable again within 10 s").

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
    std::env::var_os("TANDEM_PROVIDER").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/libtandem.so")
    })
}

/// Timeouts short enough that failure tests finish quickly, long enough for a
/// loaded 2-core machine.
pub fn spec(dir: &TempDir, nodes: usize) -> ClusterSpec {
    let mut spec = ClusterSpec::new(dir.path().join("c"), nodes, ProviderKind::Tandem);
    spec.provider_path = Some(provider_path());
    spec.sync_timeout = Duration::from_secs(240);
    spec.provider_options = vec![
        ("evs.suspect_timeout".into(), "PT3S".into()),
        ("evs.inactive_timeout".into(), "PT8S".into()),
    ];
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
