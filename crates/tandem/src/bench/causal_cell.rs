//! The causal-read cell: point selects with `wsrep_sync_wait=1` on node 2
//! while node 1 writes, on each replicated provider.
//!
//! A causal read waits for the group's "now" to be committed locally:
//! Galera orders a marker through the group for each read, Tandem asks the
//! leader for its read index (`crates/group/src/read.rs`). What a reader
//! pays for that shows in its latency while writes keep the appliers busy.

use super::plan::{Cell, Placement, Workload};
use super::results::{CellResult, Measurement};
use super::runner::{self, Bench};
use super::sysbench;
use crate::cluster::{Cluster, ProviderKind};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::Duration;

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
}

impl CausalCell {
    pub fn failed(&self) -> usize {
        let runs = [&self.reads, &self.writes].into_iter().flatten().flat_map(|c| &c.runs);
        runs.filter(|m| m.error.is_some()).count() + usize::from(self.skipped.is_some())
    }
}

/// Runs in order: per round every provider, who goes first swapping.
pub fn runs(kinds: &[ProviderKind], rounds: u32) -> Vec<(ProviderKind, u32)> {
    let mut out = Vec::new();
    for round in 0..rounds.max(1) {
        let mut order = kinds.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        out.extend(order.into_iter().map(|k| (k, round)));
    }
    out
}

pub fn run(bench: &Bench, clusters: &[(ProviderKind, Cluster)], rounds: u32, progress: &mut Progress) -> CausalCell {
    let replicated: Vec<&(ProviderKind, Cluster)> =
        clusters.iter().filter(|(k, c)| *k != ProviderKind::Standalone && c.len() >= 2).collect();
    if replicated.is_empty() {
        return CausalCell {
            skipped: Some("needs a replicated cluster of 2 or more nodes".into()),
            ..Default::default()
        };
    }
    let kinds: Vec<ProviderKind> = replicated.iter().map(|c| c.0).collect();
    let mut out = CausalCell {
        skipped: None,
        reads: Some(CellResult { cell: CELL, runs: Vec::new() }),
        writes: Some(CellResult {
            cell: Cell { workload: Workload::OltpWriteOnly, threads: WRITERS, placement: Placement::Node1 },
            runs: Vec::new(),
        }),
    };
    for (kind, round) in runs(&kinds, rounds) {
        let what = format!("{kind} causal reads on node 2, writes on node 1 (round {}/{rounds})", round + 1);
        progress.start(&what);
        let cluster = &replicated.iter().find(|c| c.0 == kind).expect("listed").1;
        let (reads, writes) = match measure(bench, kind, cluster, round) {
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
        out.reads.as_mut().expect("set above").runs.push(reads);
        out.writes.as_mut().expect("set above").runs.push(writes);
    }
    out
}

/// One round on one provider: the reader's and the writer's figures.
fn measure(bench: &Bench, kind: ProviderKind, cluster: &Cluster, round: u32) -> Result<(Measurement, Measurement)> {
    runner::wait_ready(kind, cluster, runner::READY_TIMEOUT)?;
    let (writer_node, reader_node) = (cluster.node(1), cluster.node(2));
    // sysbench cannot set a session variable: its connections take the
    // global value when they open.
    reader_node.sql("SET GLOBAL wsrep_sync_wait=1")?;
    let result = measure_under_sync_wait(bench, kind, writer_node, reader_node, round);
    reader_node.sql("SET GLOBAL wsrep_sync_wait=0").context("resetting wsrep_sync_wait on node 2")?;
    let pair = result?;
    runner::drain(kind, cluster)?;
    Ok(pair)
}

fn measure_under_sync_wait(
    bench: &Bench,
    kind: ProviderKind,
    writer_node: &crate::cluster::Node,
    reader_node: &crate::cluster::Node,
    round: u32,
) -> Result<(Measurement, Measurement)> {
    let seed = 900 + round;
    let log = |side: &str| bench.logs.join(format!("{kind}-causal-{side}-round{}.txt", round + 1));
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
         writes on node 1; {rounds} round(s), median round. Galera orders a marker through the group per read;\n\
         Tandem asks the leader for its read index and orders nothing.\n"
    );
    let _ = writeln!(out, "| Provider | causal reads/s | read p95 ms | writes/s meanwhile | write p95 ms |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for kind in [ProviderKind::Galera, ProviderKind::Tandem] {
        let get = |c: &Option<CellResult>| c.as_ref().and_then(|c| c.of(kind));
        let ran = c.reads.as_ref().is_some_and(|r| r.ran(kind));
        let (r, w) = (get(&c.reads), get(&c.writes));
        if !ran {
            continue;
        }
        let tps =
            |m: &Option<super::results::Combined>| m.as_ref().map_or("failed".into(), |m| format!("{:.0}", m.tps));
        let p95 = |m: &Option<super::results::Combined>| {
            m.as_ref().and_then(|m| m.p95_ms).map_or("–".into(), |v| format!("{v:.2}"))
        };
        let _ = writeln!(out, "| {kind} | {} | {} | {} | {} |", tps(&r), p95(&r), tps(&w), p95(&w));
    }
    out.push('\n');
    let failures: Vec<String> = c
        .reads
        .iter()
        .flat_map(|c| &c.runs)
        .filter_map(|m| Some(format!("* {}, round {}: **failed**: {}", m.target?, m.round + 1, m.error.as_ref()?)))
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
        assert_eq!(
            runs(&[Tandem, Galera], 3),
            [(Tandem, 0), (Galera, 0), (Galera, 1), (Tandem, 1), (Tandem, 2), (Galera, 2)]
        );
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
        let c = CausalCell {
            skipped: None,
            reads: cell(CELL, vec![m(Tandem, 5000.0, 1.25), failed.clone()]),
            writes: cell(CELL, vec![m(Tandem, 900.0, 6.5), failed]),
        };
        assert_eq!(c.failed(), 2);
        let mut md = String::new();
        render(&mut md, &c, 1);
        assert!(md.contains("| tandem | 5000 | 1.25 | 900 | 6.50 |"), "{md}");
        assert!(md.contains("| galera | failed | – | failed | – |"), "{md}");
        assert!(md.contains("* galera, round 1: **failed**: no causal read completed"), "{md}");
    }
}
