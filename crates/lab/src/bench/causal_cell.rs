//! The causal-read cell: point selects with `wsrep_sync_wait=1` on node 2
//! while node 1 writes, on each replicated provider.
//!
//! A causal read waits for the group's "now" to be committed locally:
//! Galera delivers a marker of its own behind what the node has received
//! (it never leaves the node), Tandem asks the leader for its read index
//! (`crates/group/src/read.rs`). What a reader
//! pays for that shows in its latency while writes keep the appliers busy.
//! Tandem runs twice per round: with a quorum round per read index (its
//! default) and with reads on the leader's lease (`repl.causal_read_lease`,
//! switched on for that run only), so the report shows what the lease buys.

use super::plan::{Cell, Placement, Workload};
use super::results::{CellResult, Measurement};
use super::runner::{self, Bench};
use super::sysbench;
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::Duration;
use tandem::cluster::{Cluster, ProviderKind};

/// Client threads of the reader (node 2) and of the writer (node 1).
pub const READERS: u32 = 4;
pub const WRITERS: u32 = 4;

/// How the cell is labelled in results: the readers' side.
pub const CELL: Cell = Cell { workload: Workload::OltpPointSelect, threads: READERS, placement: Placement::Spread };

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CausalCell {
    pub skipped: Option<String>,
    /// The causal point selects on node 2.
    pub reads: Option<CellResult>,
    /// The writes on node 1 meanwhile.
    pub writes: Option<CellResult>,
    /// Tandem's runs with `repl.causal_read_lease=YES`: the reads, and the
    /// writes meanwhile.
    #[serde(default)]
    pub lease_reads: Option<CellResult>,
    #[serde(default)]
    pub lease_writes: Option<CellResult>,
}

impl CausalCell {
    pub fn failed(&self) -> usize {
        let runs = [&self.reads, &self.writes, &self.lease_reads, &self.lease_writes]
            .into_iter()
            .flatten()
            .flat_map(|c| &c.runs);
        runs.filter(|m| m.error.is_some()).count() + usize::from(self.skipped.is_some())
    }
}

/// What one run measures: a provider and, for Tandem, whether its causal
/// reads rest on the leader's lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub kind: ProviderKind,
    pub lease: bool,
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.lease {
            false => write!(f, "{}", self.kind),
            true => write!(f, "{} (lease reads)", self.kind),
        }
    }
}

/// Runs in order: per round every provider (Tandem twice, without and
/// with the lease), who goes first swapping.
pub fn runs(kinds: &[ProviderKind], rounds: u32) -> Vec<(Variant, u32)> {
    let variants: Vec<Variant> = kinds
        .iter()
        .flat_map(|&kind| {
            let lease = (kind == ProviderKind::Tandem).then_some(Variant { kind, lease: true });
            std::iter::once(Variant { kind, lease: false }).chain(lease)
        })
        .collect();
    alternating(&variants, rounds)
}

/// Every item once per round, who goes first swapping from round to round.
pub fn alternating<T: Clone>(items: &[T], rounds: u32) -> Vec<(T, u32)> {
    let mut out = Vec::new();
    for round in 0..rounds.max(1) {
        let mut order = items.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        out.extend(order.into_iter().map(|v| (v, round)));
    }
    out
}

pub fn run(bench: &Bench, clusters: &[(ProviderKind, Cluster)], rounds: u32, progress: &mut Progress) -> CausalCell {
    let replicated: Vec<&(ProviderKind, Cluster)> =
        clusters.iter().filter(|(k, c)| !k.one_node_only() && c.len() >= 2).collect();
    if replicated.is_empty() {
        return CausalCell {
            skipped: Some("needs a replicated cluster of 2 or more nodes".into()),
            ..Default::default()
        };
    }
    let kinds: Vec<ProviderKind> = replicated.iter().map(|c| c.0).collect();
    let reads = || Some(CellResult { cell: CELL, runs: Vec::new() });
    let writes = || {
        Some(CellResult {
            cell: Cell { workload: Workload::OltpWriteOnly, threads: WRITERS, placement: Placement::Node1 },
            runs: Vec::new(),
        })
    };
    let tandem = kinds.contains(&ProviderKind::Tandem);
    let mut out = CausalCell {
        skipped: None,
        reads: reads(),
        writes: writes(),
        lease_reads: reads().filter(|_| tandem),
        lease_writes: writes().filter(|_| tandem),
    };
    for (variant, round) in runs(&kinds, rounds) {
        let kind = variant.kind;
        let what = format!("{variant} causal reads on node 2, writes on node 1 (round {}/{rounds})", round + 1);
        progress.start(&what);
        let cluster = &replicated.iter().find(|c| c.0 == kind).expect("listed").1;
        let (reads, writes) = match measure(bench, variant, cluster, round) {
            Ok(pair) => pair,
            Err(e) => {
                let failed =
                    Measurement { target: Some(kind), round, error: Some(format!("{e:#}")), ..Measurement::default() };
                (failed.clone(), failed)
            }
        };
        progress.finish(&match &reads.error {
            None => format!("{what}: {:.0} reads/s, {:.0} writes/s", reads.tps, writes.tps),
            Some(e) => format!("{what}: FAILED: {e}"),
        });
        let (r, w) = match variant.lease {
            false => (&mut out.reads, &mut out.writes),
            true => (&mut out.lease_reads, &mut out.lease_writes),
        };
        r.as_mut().expect("set above").runs.push(reads);
        w.as_mut().expect("set above").runs.push(writes);
    }
    out
}

/// Sets Tandem's `repl.causal_read_lease` on every node (the leader's
/// decides, and any node may lead).
fn set_read_lease(cluster: &Cluster, on: bool) -> Result<()> {
    let value = if on { "YES" } else { "NO" };
    for node in cluster.nodes() {
        node.sql(&format!("SET GLOBAL wsrep_provider_options='repl.causal_read_lease={value}'"))
            .with_context(|| format!("setting repl.causal_read_lease={value}"))?;
    }
    Ok(())
}

/// One round on one provider: the reader's and the writer's figures.
fn measure(bench: &Bench, variant: Variant, cluster: &Cluster, round: u32) -> Result<(Measurement, Measurement)> {
    let kind = variant.kind;
    runner::wait_ready(kind, cluster, runner::READY_TIMEOUT)?;
    let (writer_node, reader_node) = (cluster.node(1), cluster.node(2));
    if variant.lease {
        set_read_lease(cluster, true)?;
    }
    // sysbench cannot set a session variable: its connections take the
    // global value when they open.
    let result = reader_node
        .sql("SET GLOBAL wsrep_sync_wait=1")
        .and_then(|_| measure_under_sync_wait(bench, variant, writer_node, reader_node, round));
    reader_node.sql("SET GLOBAL wsrep_sync_wait=0").context("resetting wsrep_sync_wait on node 2")?;
    if variant.lease {
        set_read_lease(cluster, false)?;
    }
    let pair = result?;
    runner::drain(kind, cluster)?;
    Ok(pair)
}

fn measure_under_sync_wait(
    bench: &Bench,
    variant: Variant,
    writer_node: &tandem::cluster::Node,
    reader_node: &tandem::cluster::Node,
    round: u32,
) -> Result<(Measurement, Measurement)> {
    let kind = variant.kind;
    let seed = 900 + round;
    let lease = if variant.lease { "-lease" } else { "" };
    let log = |side: &str| bench.logs.join(format!("{kind}{lease}-causal-{side}-round{}.txt", round + 1));
    let (write_log, read_log) = (log("writes"), log("reads"));
    let writer_target = bench.target(writer_node.socket.as_path());
    let reader_target = bench.target(reader_node.socket.as_path());
    let writer =
        sysbench::run_args(&writer_target, Workload::OltpWriteOnly, WRITERS, bench.warmup_s, bench.duration_s, seed);
    let reader =
        sysbench::run_args(&reader_target, Workload::OltpPointSelect, READERS, bench.warmup_s, bench.duration_s, seed);
    let children = [bench.spawn(&writer, &write_log)?, bench.spawn(&reader, &read_log)?];
    let limit = Duration::from_secs(u64::from(bench.warmup_s + bench.duration_s) + 120);
    let mut statuses = Vec::new();
    for child in children {
        statuses.push(runner::wait_or_kill(child, limit)?);
    }
    let reports = runner::read_reports(&[write_log, read_log], &statuses)?;
    let [w, r] = [&reports[0], &reports[1]];
    if r.transactions == 0 {
        bail!("no causal read completed");
    }
    let as_measurement = |rep: &sysbench::Report| Measurement {
        target: Some(kind),
        round,
        tps: rep.tps,
        p95_ms: rep.p95_ms,
        transactions: rep.transactions,
        ignored_errors: rep.ignored_errors,
        ..Measurement::default()
    };
    Ok((as_measurement(r), as_measurement(w)))
}

/// The report's section.
pub fn render(out: &mut String, c: &CausalCell, rounds: u32) {
    let _ = writeln!(out, "## Causal reads\n");
    if let Some(why) = &c.skipped {
        let _ = writeln!(out, "Not run: {why}.\n");
        return;
    }
    let _ = writeln!(
        out,
        "`oltp_point_select` with {READERS} threads on node 2 with `wsrep_sync_wait=1` (every read waits until\n\
         what the group ordered before it is committed on node 2), while `oltp_write_only` with {WRITERS} threads\n\
         writes on node 1; {rounds} round(s), median round. Galera delivers a marker behind what the node has\n\
         received (it never leaves the node); Tandem asks the leader for its read index and orders nothing."
    );
    if c.lease_reads.is_some() {
        let _ = writeln!(
            out,
            "*tandem, lease reads*: the same with `repl.causal_read_lease=YES` on every node (the leader answers\n\
             without a heartbeat round while a quorum acknowledged it within two heartbeats; it assumes clocks\n\
             that run at about the same rate, see docs/differences.md)."
        );
    }
    out.push('\n');
    let _ = writeln!(out, "| Provider | causal reads/s | read p95 ms | writes/s meanwhile | write p95 ms |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let rows = [
        ("galera", ProviderKind::Galera, &c.reads, &c.writes),
        ("tandem", ProviderKind::Tandem, &c.reads, &c.writes),
        ("tandem, lease reads", ProviderKind::Tandem, &c.lease_reads, &c.lease_writes),
    ];
    for (label, kind, reads, writes) in rows {
        let get = |c: &Option<CellResult>| c.as_ref().and_then(|c| c.of(kind));
        let ran = reads.as_ref().is_some_and(|r| r.ran(kind));
        let (r, w) = (get(reads), get(writes));
        if !ran {
            continue;
        }
        let tps =
            |m: &Option<super::results::Combined>| m.as_ref().map_or("failed".into(), |m| format!("{:.0}", m.tps));
        let p95 = |m: &Option<super::results::Combined>| {
            m.as_ref().and_then(|m| m.p95_ms).map_or("–".into(), |v| format!("{v:.2}"))
        };
        let _ = writeln!(out, "| {label} | {} | {} | {} | {} |", tps(&r), p95(&r), tps(&w), p95(&w));
    }
    out.push('\n');
    let failures: Vec<String> = c
        .reads
        .iter()
        .flat_map(|c| &c.runs)
        .map(|m| (m, ""))
        .chain(c.lease_reads.iter().flat_map(|c| &c.runs).map(|m| (m, ", lease reads")))
        .filter_map(|(m, how)| {
            Some(format!("* {}{how}, round {}: **failed**: {}", m.target?, m.round + 1, m.error.as_ref()?))
        })
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "{}\n", failures.join("\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::*;

    #[test]
    fn providers_swap_who_goes_first_every_round() {
        let (t, tl, g) = (
            Variant { kind: Tandem, lease: false },
            Variant { kind: Tandem, lease: true },
            Variant { kind: Galera, lease: false },
        );
        assert_eq!(
            runs(&[Tandem, Galera], 3),
            [(t, 0), (tl, 0), (g, 0), (g, 1), (tl, 1), (t, 1), (t, 2), (tl, 2), (g, 2)]
        );
        assert_eq!(runs(&[Galera], 2), [(g, 0), (g, 1)], "Galera has no lease variant");
    }

    #[test]
    fn the_report_shows_readers_and_writers_and_failures() {
        let m =
            |kind, tps, p95: f64| Measurement { target: Some(kind), tps, p95_ms: Some(p95), ..Measurement::default() };
        let failed = Measurement {
            target: Some(Galera),
            error: Some("no causal read completed".into()),
            ..Measurement::default()
        };
        let cell = |cell, runs| Some(CellResult { cell, runs });
        let lease_failed =
            Measurement { target: Some(Tandem), error: Some("timed out".into()), ..Measurement::default() };
        let c = CausalCell {
            skipped: None,
            reads: cell(CELL, vec![m(Tandem, 5000.0, 1.25), failed.clone()]),
            writes: cell(CELL, vec![m(Tandem, 900.0, 6.5), failed]),
            lease_reads: cell(CELL, vec![m(Tandem, 9000.0, 0.75), lease_failed.clone()]),
            lease_writes: cell(CELL, vec![m(Tandem, 950.0, 6.25), lease_failed]),
        };
        assert_eq!(c.failed(), 4);
        let mut md = String::new();
        render(&mut md, &c, 1);
        assert!(md.contains("| tandem | 5000 | 1.25 | 900 | 6.50 |"), "{md}");
        assert!(md.contains("| tandem, lease reads | 9000 | 0.75 | 950 | 6.25 |"), "{md}");
        assert!(md.contains("* tandem, lease reads, round 1: **failed**: timed out"), "{md}");
        assert!(md.contains("`repl.causal_read_lease=YES`"), "{md}");
        // Results from before the lease variant render without it.
        let older = CausalCell { lease_reads: None, lease_writes: None, ..c };
        let mut md = String::new();
        render(&mut md, &older, 1);
        assert!(!md.contains("lease"), "{md}");
        assert!(md.contains("| tandem | 5000 | 1.25 | 900 | 6.50 |"), "{md}");
        assert!(md.contains("| galera | failed | – | failed | – |"), "{md}");
        assert!(md.contains("* galera, round 1: **failed**: no causal read completed"), "{md}");
    }
}
