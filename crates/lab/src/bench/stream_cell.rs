//! The streaming cell: one large transaction with streaming replication on
//! node 1 while the last node takes ordinary writes, on each replicated
//! provider.
//!
//! What streaming replication is for: a transaction too large to replicate
//! as one write-set goes out in fragments (here 1 MiB each) as it executes.
//! Measured: how long its statement and its COMMIT take, what the ordinary
//! writers get meanwhile, and each node's peak resident memory during the
//! cell (the kernel's high-water mark, reset just before): memory that grows
//! with the transaction rather than the fragment shows there.

use super::fc_cell::median;
use super::runner::{self, Bench};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::{Duration, Instant};
use tandem::cluster::{Cluster, Node, ProviderKind};

/// Sessions of ordinary autocommit writes on the last node.
pub const WRITERS: u32 = 4;
/// Bytes per fragment (`wsrep_trx_fragment_unit=bytes`).
pub const FRAGMENT_BYTES: u64 = 1 << 20;
/// Bytes of one row's payload: rows = the transaction's size / this.
const ROW_BYTES: u64 = 1000;
/// Rows the ordinary writers update.
const SMALL_ROWS: u32 = 1000;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StreamRun {
    pub target: Option<ProviderKind>,
    pub round: u32,
    pub error: Option<String>,
    /// The large transaction's INSERT (its fragments go out meanwhile), s.
    pub insert_s: f64,
    /// Its COMMIT, s.
    pub commit_s: f64,
    /// Ordinary autocommit updates on the last node per second, while the
    /// large transaction ran.
    pub writes_per_s: f64,
    /// Per node, in node order: resident memory when the cell started and
    /// its peak during the cell, MiB.
    pub rss_before_mib: Vec<f64>,
    pub rss_peak_mib: Vec<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StreamCell {
    pub skipped: Option<String>,
    /// The large transaction's size, MiB of row payload.
    pub size_mib: u64,
    pub runs: Vec<StreamRun>,
}

impl StreamCell {
    pub fn failed(&self) -> usize {
        self.runs.iter().filter(|r| r.error.is_some()).count() + usize::from(self.skipped.is_some())
    }
}

pub fn runs(kinds: &[ProviderKind], rounds: u32) -> Vec<(ProviderKind, u32)> {
    super::causal_cell::alternating(kinds, rounds)
}

pub fn run(
    bench: &Bench,
    clusters: &[(ProviderKind, Cluster)],
    size_mib: u64,
    rounds: u32,
    progress: &mut Progress,
) -> StreamCell {
    let replicated: Vec<&(ProviderKind, Cluster)> =
        clusters.iter().filter(|(k, c)| !k.one_node_only() && c.len() >= 2).collect();
    if replicated.is_empty() {
        return StreamCell {
            skipped: Some("needs a replicated cluster of 2 or more nodes".into()),
            size_mib,
            runs: vec![],
        };
    }
    let kinds: Vec<ProviderKind> = replicated.iter().map(|c| c.0).collect();
    let mut out = StreamCell { skipped: None, size_mib, runs: vec![] };
    for (kind, round) in runs(&kinds, rounds) {
        let what = format!("{kind} streaming: one {size_mib} MiB transaction on node 1 (round {}/{rounds})", round + 1);
        progress.start(&what);
        let cluster = &replicated.iter().find(|c| c.0 == kind).expect("listed").1;
        let r = measure(bench, kind, cluster, size_mib, round).unwrap_or_else(|e| StreamRun {
            target: Some(kind),
            round,
            error: Some(format!("{e:#}")),
            ..StreamRun::default()
        });
        progress.finish(&match &r.error {
            None => format!("{what}: insert {:.1} s, commit {:.2} s", r.insert_s, r.commit_s),
            Some(e) => format!("{what}: FAILED: {e}"),
        });
        out.runs.push(r);
    }
    out
}

fn measure(_bench: &Bench, kind: ProviderKind, cluster: &Cluster, size_mib: u64, round: u32) -> Result<StreamRun> {
    runner::wait_ready(kind, cluster, runner::READY_TIMEOUT)?;
    let (origin, writer) = (cluster.node(1), cluster.node(cluster.len()));
    origin.sql(&format!(
        "DROP DATABASE IF EXISTS tandem_sr; CREATE DATABASE tandem_sr; \
         CREATE TABLE tandem_sr.big (id INT NOT NULL PRIMARY KEY, pad VARCHAR({ROW_BYTES}) NOT NULL); \
         CREATE TABLE tandem_sr.small (id INT NOT NULL PRIMARY KEY, k INT NOT NULL); \
         CREATE TABLE tandem_sr.stop (id INT NOT NULL PRIMARY KEY); \
         USE tandem_sr; INSERT INTO tandem_sr.small SELECT seq, 0 FROM seq_1_to_{SMALL_ROWS}"
    ))?;
    runner::drain(kind, cluster)?;
    let result = measure_stream(kind, cluster, origin, writer, size_mib, round);
    let drained = runner::drain(kind, cluster);
    origin.sql("DROP DATABASE tandem_sr")?;
    drained?;
    result
}

fn measure_stream(
    kind: ProviderKind,
    cluster: &Cluster,
    origin: &Node,
    writer: &Node,
    size_mib: u64,
    round: u32,
) -> Result<StreamRun> {
    let mut rss_before_mib = Vec::new();
    for node in cluster.nodes() {
        let pid = node.pid.with_context(|| format!("{}: no PID", node.name))?;
        super::procfs::reset_peak_rss(pid)?;
        let (anon, file) = super::procfs::rss_split_kib(pid)?;
        rss_before_mib.push((anon + file) as f64 / 1024.0);
    }
    let rows = size_mib * (1 << 20) / ROW_BYTES;
    let clients = start_writers(writer);
    let started = Instant::now();
    let big = origin.sql_with_timeout(
        &format!(
            "USE tandem_sr; SET SESSION wsrep_trx_fragment_unit='bytes'; \
             SET SESSION wsrep_trx_fragment_size={FRAGMENT_BYTES}; \
             SET @t0 = NOW(6); BEGIN; \
             INSERT INTO tandem_sr.big SELECT seq, REPEAT(CHAR(65 + seq % 26), {ROW_BYTES}) FROM seq_1_to_{rows}; \
             SET @t1 = NOW(6); COMMIT; \
             SELECT TIMESTAMPDIFF(MICROSECOND, @t0, @t1), TIMESTAMPDIFF(MICROSECOND, @t1, NOW(6))"
        ),
        Duration::from_secs(1800),
    );
    let elapsed = started.elapsed().as_secs_f64();
    // The writers stop once the stop row reaches the last node.
    let stopped = origin.sql("INSERT INTO tandem_sr.stop VALUES (1)");
    let mut writes = 0u64;
    for c in clients {
        match c.join() {
            Ok(n) => writes += n?,
            Err(_) => bail!("a writer thread panicked"),
        }
    }
    stopped?;
    let times = big?.into_iter().next().context("no timings from the large transaction")?;
    let micros = |i: usize| -> Result<f64> {
        let v = times.get(i).context("missing timing")?;
        Ok(v.trim().parse::<f64>().with_context(|| format!("timing {v:?}"))? / 1e6)
    };
    runner::drain(kind, cluster)?;
    let mut rss_peak_mib = Vec::new();
    for node in cluster.nodes() {
        let count = node.sql("SELECT COUNT(*) FROM tandem_sr.big")?;
        let count = count.into_iter().flatten().next().context("no count")?;
        if count.trim() != rows.to_string() {
            bail!("{} holds {count} rows of the large transaction, not {rows}", node.name);
        }
        let pid = node.pid.with_context(|| format!("{}: no PID", node.name))?;
        rss_peak_mib.push(super::procfs::peak_rss_kib(pid)? as f64 / 1024.0);
    }
    Ok(StreamRun {
        target: Some(kind),
        round,
        error: None,
        insert_s: micros(0)?,
        commit_s: micros(1)?,
        writes_per_s: writes as f64 / elapsed,
        rss_before_mib,
        rss_peak_mib,
    })
}

/// Autocommit single-row updates in a loop on `node`, each session until
/// the stop row is there; each returns how many it committed.
fn start_writers(node: &Node) -> Vec<std::thread::JoinHandle<Result<u64>>> {
    (0..WRITERS)
        .map(|w| {
            let node = node.clone();
            std::thread::spawn(move || -> Result<u64> {
                let loop_sql = format!(
                    "DELIMITER //\nBEGIN NOT ATOMIC DECLARE n INT DEFAULT 0; \
                     WHILE NOT EXISTS (SELECT 1 FROM tandem_sr.stop) DO UPDATE tandem_sr.small SET k = k + 1 \
                     WHERE id = 1 + (n * {WRITERS} + {w}) * 7 % {SMALL_ROWS}; SET n = n + 1; END WHILE; \
                     SELECT n; END//"
                );
                let rows = node.sql_with_timeout(&loop_sql, Duration::from_secs(1900))?;
                let n = rows.into_iter().flatten().next().context("no count")?;
                Ok(n.trim().parse()?)
            })
        })
        .collect()
}

/// The report's section.
pub fn render(out: &mut String, c: &StreamCell, rounds: u32) {
    let _ = writeln!(out, "## Streaming replication: one large transaction\n");
    if let Some(why) = &c.skipped {
        let _ = writeln!(out, "Not run: {why}.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Node 1 inserts {} MiB of rows in one transaction with `wsrep_trx_fragment_unit=bytes`,\n\
         `wsrep_trx_fragment_size={FRAGMENT_BYTES}`, then commits it, while {WRITERS} sessions on the last node run\n\
         autocommit single-row UPDATEs. Peak RSS: each node's VmHWM, reset (`/proc/PID/clear_refs`) when the\n\
         cell starts; growth is the peak minus the RSS at that moment. {rounds} round(s), median.\n",
        c.size_mib
    );
    let nodes = c.runs.iter().map(|r| r.rss_peak_mib.len()).max().unwrap_or(0);
    let mut header = "| Provider | INSERT s | COMMIT s | other writes/s |".to_string();
    let mut rule = "|---|---:|---:|---:|".to_string();
    for n in 1..=nodes {
        let _ = write!(header, " node {n} peak RSS MiB (growth) |");
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for kind in [ProviderKind::Galera, ProviderKind::Tandem] {
        let ok: Vec<&StreamRun> = c.runs.iter().filter(|r| r.target == Some(kind) && r.error.is_none()).collect();
        if !c.runs.iter().any(|r| r.target == Some(kind)) {
            continue;
        }
        if ok.is_empty() {
            let _ = writeln!(out, "| {kind} | failed | | |{}", " |".repeat(nodes));
            continue;
        }
        let med = |f: &dyn Fn(&StreamRun) -> Option<f64>| median(ok.iter().filter_map(|r| f(r)).collect());
        let mut row = format!(
            "| {kind} | {:.1} | {:.2} | {:.0} |",
            med(&|r| Some(r.insert_s)),
            med(&|r| Some(r.commit_s)),
            med(&|r| Some(r.writes_per_s))
        );
        for n in 0..nodes {
            let peak = med(&|r| r.rss_peak_mib.get(n).copied());
            let growth = med(&|r| Some(r.rss_peak_mib.get(n)? - r.rss_before_mib.get(n)?));
            let _ = write!(row, " {peak:.0} ({growth:+.0}) |");
        }
        let _ = writeln!(out, "{row}");
    }
    out.push('\n');
    super::fc_cell::failures(out, c.runs.iter().map(|r| (r.target, r.round, r.error.as_deref())));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::*;

    #[test]
    fn the_report_shows_times_memory_per_node_and_failures() {
        let r = |kind, round, commit: f64, peak: f64| StreamRun {
            target: Some(kind),
            round,
            error: None,
            insert_s: 30.0,
            commit_s: commit,
            writes_per_s: 250.0,
            rss_before_mib: vec![400.0, 410.0],
            rss_peak_mib: vec![peak, 450.0],
        };
        let failed =
            StreamRun { target: Some(Galera), round: 1, error: Some("timed out".into()), ..StreamRun::default() };
        let c = StreamCell {
            skipped: None,
            size_mib: 100,
            runs: vec![r(Tandem, 0, 0.5, 500.0), r(Tandem, 1, 1.5, 700.0), r(Tandem, 2, 1.0, 600.0), failed],
        };
        assert_eq!(c.failed(), 1);
        let mut md = String::new();
        render(&mut md, &c, 3);
        assert!(md.contains("| tandem | 30.0 | 1.00 | 250 | 600 (+200) | 450 (+40) |"), "{md}");
        assert!(md.contains("| galera | failed |"), "{md}");
        assert!(md.contains("* galera, round 2: **failed**: timed out"), "{md}");
        assert!(md.contains("one 100 MiB") || md.contains("inserts 100 MiB"), "{md}");
    }
}
