//! The flow-control cell: one node applies slowly while clients on node 1
//! write as fast as they can, on each replicated provider.
//!
//! The last node is made slow the way production nodes are: one applier
//! thread, and its copy of the table has no primary key, so each row event
//! is a full table scan there (the DDL runs with `wsrep_on=OFF` on that node
//! only). Both providers run with their default limits (`gcs.fc_limit=16`,
//! `gcs.fc_factor=1.0`). Measured: the writers' throughput, how far the slow
//! node fell behind (its lag in write-sets, sampled), how much of the time
//! the writers were paused, and the slow node's memory.

use super::runner::{self, Bench};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::{Duration, Instant};
use tandem::cluster::{Cluster, Node, ProviderKind};

/// Client sessions on node 1, each an autocommit UPDATE loop.
pub const WRITERS: u32 = 4;
/// Rows of the table: what a full scan on the slow node reads per row event.
const ROWS: u32 = 20_000;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FcRun {
    pub target: Option<ProviderKind>,
    pub round: u32,
    pub error: Option<String>,
    /// Updates committed on node 1 per second.
    pub writes_per_s: f64,
    /// The slow node's lag behind node 1 in write-sets: most, and at the end
    /// of the writes' first and second half (a lag that grows with time
    /// shows as a larger second figure).
    pub lag_max: i64,
    pub lag_mid: i64,
    pub lag_end: i64,
    /// `wsrep_flow_control_paused` on node 1: fraction of the time paused.
    pub paused_fraction: f64,
    /// `wsrep_flow_control_sent` on the slow node.
    pub pauses_sent: i64,
    /// The slow node's resident memory at the end of the writes, MiB.
    pub slow_rss_mib: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FcCell {
    pub skipped: Option<String>,
    pub runs: Vec<FcRun>,
}

impl FcCell {
    pub fn failed(&self) -> usize {
        self.runs.iter().filter(|r| r.error.is_some()).count() + usize::from(self.skipped.is_some())
    }
}

pub fn runs(kinds: &[ProviderKind], rounds: u32) -> Vec<(ProviderKind, u32)> {
    super::causal_cell::alternating(kinds, rounds)
}

pub fn run(bench: &Bench, clusters: &[(ProviderKind, Cluster)], rounds: u32, progress: &mut Progress) -> FcCell {
    let replicated: Vec<&(ProviderKind, Cluster)> =
        clusters.iter().filter(|(k, c)| !k.one_node_only() && c.len() >= 2).collect();
    if replicated.is_empty() {
        return FcCell { skipped: Some("needs a replicated cluster of 2 or more nodes".into()), runs: vec![] };
    }
    let kinds: Vec<ProviderKind> = replicated.iter().map(|c| c.0).collect();
    let mut out = FcCell::default();
    for (kind, round) in runs(&kinds, rounds) {
        let what = format!("{kind} flow control: a slow node, writes on node 1 (round {}/{rounds})", round + 1);
        progress.start(&what);
        let cluster = &replicated.iter().find(|c| c.0 == kind).expect("listed").1;
        let r = measure(bench, kind, cluster, round).unwrap_or_else(|e| FcRun {
            target: Some(kind),
            round,
            error: Some(format!("{e:#}")),
            ..FcRun::default()
        });
        progress.finish(&match &r.error {
            None => format!(
                "{what}: {:.0} writes/s, lag max {}, paused {:.0}%",
                r.writes_per_s,
                r.lag_max,
                r.paused_fraction * 100.0
            ),
            Some(e) => format!("{what}: FAILED: {e}"),
        });
        out.runs.push(r);
    }
    out
}

fn value(node: &Node, var: &str) -> Result<f64> {
    let text = node.status(var)?;
    text.trim().parse().with_context(|| format!("{}: {var} is {text:?}", node.name))
}

fn one(node: &Node, query: &str) -> Result<String> {
    let rows = node.sql(query)?;
    rows.into_iter().next().and_then(|r| r.into_iter().next()).context("no result")
}

fn measure(bench: &Bench, kind: ProviderKind, cluster: &Cluster, round: u32) -> Result<FcRun> {
    runner::wait_ready(kind, cluster, runner::READY_TIMEOUT)?;
    let (writer, slow) = (cluster.node(1), cluster.node(cluster.len()));
    writer.sql("DROP DATABASE IF EXISTS tandem_fc; CREATE DATABASE tandem_fc")?;
    writer.sql(&format!(
        "CREATE TABLE tandem_fc.t (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, pad CHAR(60) NOT NULL); \
         USE tandem_fc; INSERT INTO tandem_fc.t SELECT seq, 0, 'x' FROM seq_1_to_{ROWS}"
    ))?;
    runner::drain(kind, cluster)?;
    let threads = one(slow, "SELECT @@GLOBAL.wsrep_slave_threads")?;
    slow.sql("SET SESSION wsrep_on=OFF; ALTER TABLE tandem_fc.t DROP PRIMARY KEY; SET GLOBAL wsrep_slave_threads=1")?;
    one_applier_left(writer, slow)?;
    let result = measure_slow(bench, kind, writer, slow, round);
    // Put the cluster back whatever happened: the slow node catches up first.
    let drained = runner::drain(kind, cluster);
    slow.sql(&format!("SET GLOBAL wsrep_slave_threads={threads}"))?;
    writer.sql("DROP DATABASE tandem_fc")?;
    drained?;
    result
}

/// Surplus applier threads leave only once they have applied one more
/// write-set: writes elsewhere until the slow node has a single applier.
/// Two appliers there could deadlock (seen with Tandem): on a table without
/// a primary key one waits for a row lock the other took during its scan,
/// and the other waits to commit after the first.
pub fn one_applier_left(writer: &Node, slow: &Node) -> Result<()> {
    writer.sql("CREATE TABLE IF NOT EXISTS tandem_fc.tick (id INT PRIMARY KEY, n INT NOT NULL)")?;
    let tick = "INSERT INTO tandem_fc.tick VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1;".repeat(8);
    for _ in 0..100 {
        if value(slow, "wsrep_applier_thread_count")? <= 1.0 {
            return Ok(());
        }
        writer.sql(&tick)?;
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!(
        "{} still has {} applier threads after wsrep_slave_threads=1",
        slow.name,
        slow.status("wsrep_applier_thread_count")?
    )
}

fn measure_slow(bench: &Bench, kind: ProviderKind, writer: &Node, slow: &Node, round: u32) -> Result<FcRun> {
    for node in [writer, slow] {
        node.sql("FLUSH STATUS")?;
    }
    let seconds = bench.duration_s.max(5);
    let clients: Vec<_> = (0..WRITERS)
        .map(|w| {
            let writer = writer.clone();
            std::thread::spawn(move || -> Result<u64> {
                let loop_sql = format!(
                    "DELIMITER //\nBEGIN NOT ATOMIC DECLARE n INT DEFAULT 0; DECLARE stop DATETIME(6) DEFAULT \
                     NOW(6) + INTERVAL {seconds} SECOND; WHILE NOW(6) < stop DO UPDATE tandem_fc.t SET k = k + 1 \
                     WHERE id = 1 + (n * {WRITERS} + {w}) * 7 % {ROWS}; SET n = n + 1; END WHILE; SELECT n; END//"
                );
                let rows = writer.sql_with_timeout(&loop_sql, Duration::from_secs(u64::from(seconds) + 120))?;
                let n = rows.into_iter().flatten().next().context("no count")?;
                Ok(n.trim().parse()?)
            })
        })
        .collect();
    let start = Instant::now();
    let (mut lag_max, mut lag_mid, mut lag_end, mut mid_taken) = (0i64, 0i64, 0i64, false);
    while clients.iter().any(|c| !c.is_finished()) {
        // Node 1 first: the lag measured is never more than the real one.
        let ahead = value(writer, "wsrep_last_committed")? as i64;
        let behind = value(slow, "wsrep_last_committed")? as i64;
        let lag = ahead - behind;
        lag_max = lag_max.max(lag);
        lag_end = lag;
        if !mid_taken && start.elapsed() >= Duration::from_secs(u64::from(seconds) / 2) {
            (lag_mid, mid_taken) = (lag, true);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let slow_rss_mib = slow.pid.map_or(Ok((0, 0)), super::procfs::rss_split_kib).map(|(a, f)| (a + f) as f64 / 1024.0);
    let mut total = 0;
    for c in clients {
        match c.join() {
            Ok(n) => total += n?,
            Err(_) => bail!("a writer thread panicked"),
        }
    }
    Ok(FcRun {
        target: Some(kind),
        round,
        error: None,
        writes_per_s: total as f64 / elapsed,
        lag_max,
        lag_mid,
        lag_end,
        paused_fraction: value(writer, "wsrep_flow_control_paused")?,
        pauses_sent: value(slow, "wsrep_flow_control_sent")? as i64,
        slow_rss_mib: slow_rss_mib.unwrap_or(0.0),
    })
}

/// Median of the values (NaN for none).
pub(super) fn median(values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    super::results::median(&super::results::sorted(values.into_iter()))
}

/// The report's section.
pub fn render(out: &mut String, c: &FcCell, rounds: u32) {
    let _ = writeln!(out, "## Flow control: a slow node\n");
    if let Some(why) = &c.skipped {
        let _ = writeln!(out, "Not run: {why}.\n");
        return;
    }
    let _ = writeln!(
        out,
        "{WRITERS} sessions on node 1 run autocommit single-row UPDATEs for the run's duration. The last node\n\
         applies slowly: one applier thread, and its copy of the {ROWS}-row table has no primary key (a full\n\
         scan per row event). Default flow-control limits on both providers. Lag: node 1's last committed\n\
         seqno minus the slow node's, sampled every 200 ms (max; at half time; at the end). Paused:\n\
         `wsrep_flow_control_paused` on node 1. {rounds} round(s), median.\n"
    );
    let _ = writeln!(
        out,
        "| Provider | writes/s | lag max | lag at half time | lag at end | paused | pauses sent | slow node RSS MiB |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for kind in [ProviderKind::Galera, ProviderKind::Tandem] {
        let ok: Vec<&FcRun> = c.runs.iter().filter(|r| r.target == Some(kind) && r.error.is_none()).collect();
        if !c.runs.iter().any(|r| r.target == Some(kind)) {
            continue;
        }
        if ok.is_empty() {
            let _ = writeln!(out, "| {kind} | failed | | | | | | |");
            continue;
        }
        let med = |f: &dyn Fn(&FcRun) -> f64| median(ok.iter().map(|r| f(r)).collect());
        let _ = writeln!(
            out,
            "| {kind} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0}% | {:.0} | {:.0} |",
            med(&|r| r.writes_per_s),
            med(&|r| r.lag_max as f64),
            med(&|r| r.lag_mid as f64),
            med(&|r| r.lag_end as f64),
            med(&|r| r.paused_fraction * 100.0),
            med(&|r| r.pauses_sent as f64),
            med(&|r| r.slow_rss_mib),
        );
    }
    out.push('\n');
    failures(out, c.runs.iter().map(|r| (r.target, r.round, r.error.as_deref())));
}

/// One line per failed run of a cell: (provider, round, error if it failed).
pub(super) fn failures<'a>(out: &mut String, runs: impl Iterator<Item = (Option<ProviderKind>, u32, Option<&'a str>)>) {
    for (target, round, error) in runs {
        if let Some(error) = error {
            let target = target.map_or("?".into(), |k| k.to_string());
            let _ = writeln!(out, "* {target}, round {}: **failed**: {error}", round + 1);
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::*;

    #[test]
    fn the_report_shows_medians_per_provider_and_failures() {
        let r = |kind, round, w: f64, lag| FcRun {
            target: Some(kind),
            round,
            writes_per_s: w,
            lag_max: lag,
            lag_mid: lag / 2,
            lag_end: lag / 4,
            paused_fraction: 0.5,
            pauses_sent: 10,
            slow_rss_mib: 200.0,
            error: None,
        };
        let failed = FcRun { target: Some(Galera), round: 1, error: Some("timed out".into()), ..FcRun::default() };
        let c = FcCell {
            skipped: None,
            runs: vec![
                r(Tandem, 0, 300.0, 40),
                r(Tandem, 1, 500.0, 80),
                r(Tandem, 2, 400.0, 60),
                failed,
                r(Galera, 0, 350.0, 30),
            ],
        };
        assert_eq!(c.failed(), 1);
        let mut md = String::new();
        render(&mut md, &c, 3);
        assert!(md.contains("| tandem | 400 | 60 | 30 | 15 | 50% | 10 | 200 |"), "{md}");
        assert!(md.contains("| galera | 350 | 30 |"), "{md}");
        assert!(md.contains("* galera, round 2: **failed**: timed out"), "{md}");
    }
}
