//! One target (a running cluster) under sysbench: load the tables, measure a
//! cell, wait for the appliers to catch up.

use super::plan::{clients, Cell};
use super::procfs;
use super::results::Measurement;
use super::sysbench::{self, Report};
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tandem::cluster::{process, Cluster, Node, ProviderKind};

/// Beyond the asked run time, what a sysbench process may take to connect
/// and to finish its last transactions before it is killed.
const RUN_SLACK: Duration = Duration::from_secs(120);
/// Loading 8 x 100k rows takes about a minute here; a hung cluster must not hang the bench.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(1800);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a run waits for every node to be ready (Synced) before it starts.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug)]
pub struct DataSet {
    pub tables: u32,
    pub table_size: u32,
}

pub struct Bench<'a> {
    pub sysbench: &'a Path,
    pub data: DataSet,
    pub warmup_s: u32,
    pub duration_s: u32,
    /// sysbench outputs go here, one file per client process.
    pub logs: &'a Path,
}

impl Bench<'_> {
    /// Creates the sysbench tables through node 1 and waits until every node has them.
    pub fn load(&self, kind: ProviderKind, cluster: &Cluster) -> Result<()> {
        let node = cluster.node(1);
        node.sql("CREATE DATABASE IF NOT EXISTS sbtest")?;
        let target = self.target(node.socket.as_path());
        let args = sysbench::prepare_args(&target, self.data.tables.clamp(1, 4));
        let log = self.logs.join(format!("{kind}-prepare.txt"));
        let child = self.spawn(&args, &log)?;
        let status = wait_or_kill(child, PREPARE_TIMEOUT)?;
        if !status.success() {
            bail!("sysbench prepare on {kind} failed ({status}):\n{}", process::tail(&log, 20));
        }
        drain(kind, cluster)?;
        Ok(())
    }

    /// Runs one cell on one target and measures it. A failed run is recorded
    /// (with its reason) rather than ending the whole benchmark.
    ///
    /// A failed run is run once more after every node is ready again: on this
    /// kind of VM a stall of the whole machine (every server of *both*
    /// clusters went 4-5 s without CPU at the same moment, Galera's
    /// "last inactive check more than PT1.5S ago (PT4.4S)") takes the nodes
    /// out of the primary component whatever the provider. The report names
    /// every retried run with the first attempt's error, so nothing is hidden.
    pub fn measure(&self, kind: ProviderKind, cluster: &Cluster, cell: &Cell, round: u32, seed: u32) -> Measurement {
        let first = match self.try_measure(kind, cluster, cell, round, seed) {
            Ok(m) => return m,
            Err(e) => format!("{e:#}"),
        };
        match self.try_measure(kind, cluster, cell, round, seed) {
            Ok(m) => Measurement { retried_after: Some(first), ..m },
            Err(e) => Measurement {
                target: Some(kind),
                round,
                error: Some(format!("{e:#}; first attempt: {first}")),
                ..Measurement::default()
            },
        }
    }

    fn try_measure(
        &self,
        kind: ProviderKind,
        cluster: &Cluster,
        cell: &Cell,
        round: u32,
        seed: u32,
    ) -> Result<Measurement> {
        wait_ready(kind, cluster, READY_TIMEOUT)?;
        let cert_before = cert_failures(kind, cluster)?;
        let cpu_before = cpu_ticks(cluster)?;
        let mut children = Vec::new();
        let mut logs = Vec::new();
        for (node, threads) in clients(cell.threads, cell.placement, cluster.len()) {
            let target = self.target(cluster.node(node).socket.as_path());
            // Distinct seeds per client process: equal ones would make every
            // node write the same rows in the same order, all conflicts.
            let node_seed = seed * 100 + node as u32;
            let args = sysbench::run_args(&target, cell.workload, threads, self.warmup_s, self.duration_s, node_seed);
            let log = self.logs.join(format!(
                "{kind}-{}-{}thr-{:?}-round{}-node{node}.txt",
                cell.workload.script(),
                cell.threads,
                cell.placement,
                round + 1
            ));
            children.push(self.spawn(&args, &log)?);
            logs.push(log);
        }
        let limit = Duration::from_secs(u64::from(self.warmup_s + self.duration_s)) + RUN_SLACK;
        let mut statuses = Vec::new();
        for child in children {
            statuses.push(wait_or_kill(child, limit)?);
        }
        let drain_s = drain(kind, cluster)?;
        let cpu_s = (cpu_ticks(cluster)? - cpu_before) as f64 / procfs::ticks_per_second() as f64;
        let cert_after = cert_failures(kind, cluster)?;
        let reports = read_reports(&logs, &statuses)?;
        let combined = sysbench::combine(&reports);
        Ok(Measurement {
            target: Some(kind),
            round,
            tps: combined.tps,
            p95_ms: combined.p95_ms,
            transactions: combined.transactions,
            ignored_errors: combined.ignored_errors,
            cert_failures: cert_before.zip(cert_after).map(|(b, a)| a.saturating_sub(b)),
            cpu_s,
            drain_s,
            error: None,
            retried_after: None,
        })
    }

    pub fn target<'s>(&self, socket: &'s Path) -> sysbench::Target<'s> {
        sysbench::Target { socket, tables: self.data.tables, table_size: self.data.table_size }
    }

    pub fn spawn(&self, args: &[String], log: &Path) -> Result<Child> {
        let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        Command::new(self.sysbench)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("running {}", self.sysbench.display()))
    }
}

pub fn read_reports(logs: &[PathBuf], statuses: &[std::process::ExitStatus]) -> Result<Vec<Report>> {
    logs.iter()
        .zip(statuses)
        .map(|(log, status)| {
            let text = std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
            let report = sysbench::parse(&text).with_context(|| format!("{}", log.display()))?;
            if !status.success() {
                bail!("sysbench exited with {status} ({})", log.display());
            }
            Ok(report)
        })
        .collect()
}

pub fn wait_or_kill(mut child: Child, limit: Duration) -> Result<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("sysbench still running after {} s: killed", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The nodes that are meant to run: all of them, except those the bench
/// stopped on purpose (their recorded pid is cleared). A node that died on
/// its own keeps its pid, so it still fails whatever needs it.
pub fn members(cluster: &Cluster) -> impl Iterator<Item = &Node> {
    cluster.nodes().iter().filter(|n| n.pid.is_some())
}

fn cpu_ticks(cluster: &Cluster) -> Result<u64> {
    let mut total = 0;
    for node in members(cluster) {
        let pid = node.pid.ok_or_else(|| anyhow!("{} is not running", node.name))?;
        total += procfs::cpu_ticks(pid)?;
    }
    Ok(total)
}

/// Memory of each node's server, MiB.
pub struct Memory {
    /// VmHWM.
    pub peak: Vec<f64>,
    /// RssAnon and RssFile now.
    pub anon: Vec<f64>,
    pub file: Vec<f64>,
}

pub fn memory(cluster: &Cluster) -> Result<Memory> {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut m = Memory { peak: vec![], anon: vec![], file: vec![] };
    for node in cluster.nodes() {
        let pid = node.pid.ok_or_else(|| anyhow!("{} is not running", node.name))?;
        let (anon, file) = procfs::rss_split_kib(pid)?;
        m.peak.push(mib(procfs::peak_rss_kib(pid)?));
        m.anon.push(mib(anon));
        m.file.push(mib(file));
    }
    Ok(m)
}

/// None for a target of one node: no peer to conflict with, and the null
/// provider certifies nothing.
fn cert_failures(kind: ProviderKind, cluster: &Cluster) -> Result<Option<u64>> {
    if kind.one_node_only() {
        return Ok(None);
    }
    let mut total = 0;
    for node in members(cluster) {
        total += number(&node.status("wsrep_local_cert_failures")?)?;
    }
    Ok(Some(total))
}

/// Waits until every node takes queries: Synced, or answering when standalone.
pub fn wait_ready(kind: ProviderKind, cluster: &Cluster, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        let waiting: Vec<&str> = members(cluster)
            .filter(|n| match kind {
                ProviderKind::Standalone => n.probe_ready().is_none(),
                _ => n.probe_state().as_deref() != Some("Synced"),
            })
            .map(|n| n.name.as_str())
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            bail!("{} not ready (Synced) after {} s", waiting.join(", "), timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until every node has committed the same last seqno with nothing
/// queued; returns how long that took. Without this, one target's backlog
/// would run during the next target's measurement.
pub fn drain(kind: ProviderKind, cluster: &Cluster) -> Result<f64> {
    let start = Instant::now();
    if kind.one_node_only() {
        return Ok(0.0);
    }
    loop {
        if caught_up(cluster)? {
            return Ok(start.elapsed().as_secs_f64());
        }
        if start.elapsed() > DRAIN_TIMEOUT {
            bail!("{kind}: nodes still applying {} s after the clients stopped", DRAIN_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn caught_up(cluster: &Cluster) -> Result<bool> {
    let mut committed = Vec::new();
    for node in members(cluster) {
        let status = node.statuses("wsrep_%")?;
        let get = |k: &str| -> Result<u64> {
            number(status.get(k).map(String::as_str).unwrap_or("missing"))
                .with_context(|| format!("{}: {k}", node.name))
        };
        if get("wsrep_local_recv_queue")? > 0 {
            return Ok(false);
        }
        committed.push(get("wsrep_last_committed")?);
    }
    Ok(committed.windows(2).all(|w| w[0] == w[1]))
}

pub fn number(text: &str) -> Result<u64> {
    text.trim().parse().map_err(|_| anyhow!("not a number: {text:?}"))
}
