//! The 1-node cell: each replicated cluster shrunk to node 1 alone (the other
//! nodes stopped gracefully, so they leave the membership and node 1 keeps
//! the primary component by itself), against the standalone server. What a
//! provider costs with nobody to replicate to.

use super::plan::{Cell, Matrix, Placement, Workload};
use super::results::{CellResult, Measurement, SingleNode};
use super::runner::{self, Bench};
use crate::progress::Progress;
use anyhow::{bail, Result};
use std::time::{Duration, Instant};
use tandem::cluster::{Cluster, ProviderKind};

/// Client threads of the cell's runs, all on node 1.
pub const THREADS: [u32; 2] = [1, 16];
const SHRINK_TIMEOUT: Duration = Duration::from_secs(120);

/// The cell's runs in order (a `Matrix` of one workload on one node, so
/// rounds and who-goes-first work as in the main matrix).
pub fn matrix(targets: &[ProviderKind], rounds: u32) -> Matrix {
    Matrix {
        workloads: vec![Workload::OltpWriteOnly],
        threads: THREADS.to_vec(),
        placements: vec![Placement::Node1],
        targets: targets.to_vec(),
        nodes: 1,
        rounds,
    }
}

pub fn run(
    bench: &Bench,
    clusters: &mut [(ProviderKind, Cluster)],
    rounds: u32,
    progress: &mut Progress,
) -> SingleNode {
    let targets: Vec<ProviderKind> = clusters.iter().map(|c| c.0).collect();
    let m = matrix(&targets, rounds);
    let cells: Vec<Cell> = m.cells();
    let mut out =
        SingleNode { skipped: None, cells: cells.iter().map(|&cell| CellResult { cell, runs: Vec::new() }).collect() };
    // Targets whose cluster could not be shrunk, and why.
    let mut broken: Vec<(ProviderKind, String)> = Vec::new();
    for (kind, cluster) in clusters.iter_mut() {
        if kind.one_node_only() {
            continue;
        }
        progress.start(&format!("{kind}: stopping every node but node 1"));
        let took = Instant::now();
        match shrink(*kind, cluster) {
            Ok(()) => progress.note(&format!("{kind}: node 1 alone after {:.0} s", took.elapsed().as_secs_f64())),
            Err(e) => broken.push((*kind, format!("{e:#}"))),
        }
    }
    for run in m.runs() {
        let cell = &cells[run.cell];
        let what = match rounds {
            1 => format!("{} 1-node {}", run.target, cell.label()),
            n => format!("{} 1-node {} (round {}/{n})", run.target, cell.label(), run.round + 1),
        };
        progress.start(&what);
        let measured = if let Some((_, why)) = broken.iter().find(|b| b.0 == run.target) {
            Measurement {
                target: Some(run.target),
                round: run.round,
                error: Some(format!("the cluster could not be shrunk to node 1: {why}")),
                ..Measurement::default()
            }
        } else {
            let cluster = &clusters.iter().find(|c| c.0 == run.target).expect("started").1;
            let seed = 500 + (run.cell as u32 + 1) * 10 + run.round;
            bench.measure(run.target, cluster, cell, run.round, seed)
        };
        let outcome = match &measured.error {
            None => format!("{what}: {:.0} tps", measured.tps),
            Some(e) => format!("{what}: FAILED: {e}"),
        };
        progress.finish(&outcome);
        out.cells[run.cell].runs.push(measured);
    }
    out
}

/// Stops nodes N..2 gracefully and waits until node 1 is a Synced cluster of one.
fn shrink(kind: ProviderKind, cluster: &mut Cluster) -> Result<()> {
    for i in (2..=cluster.len()).rev() {
        cluster.stop(i)?;
    }
    let node = cluster.node(1);
    let start = Instant::now();
    loop {
        let size = node.status("wsrep_cluster_size").ok();
        let state = node.probe_state();
        if size.as_deref() == Some("1") && state.as_deref() == Some("Synced") {
            break;
        }
        if start.elapsed() > SHRINK_TIMEOUT {
            bail!(
                "{kind} node 1: wsrep_cluster_size {}, state {} {} s after the others stopped",
                size.as_deref().unwrap_or("(no answer)"),
                state.as_deref().unwrap_or("(no answer)"),
                SHRINK_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    runner::drain(kind, cluster)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::*;

    #[test]
    fn the_cell_is_write_only_on_node_1_with_every_target() {
        let m = matrix(&[Tandem, Galera, Standalone, Null], 3);
        let cells = m.cells();
        assert_eq!(cells.len(), 2);
        assert!(cells.iter().all(|c| c.workload == Workload::OltpWriteOnly && c.placement == Placement::Node1));
        assert_eq!(cells.iter().map(|c| c.threads).collect::<Vec<_>>(), THREADS);
        // 2 cells x 3 rounds x 4 targets, the standalone server and the null provider included.
        let runs = m.runs();
        assert_eq!(runs.len(), 24);
        assert_eq!(runs.iter().filter(|r| r.target == Standalone).count(), 6);
        assert_eq!(runs.iter().filter(|r| r.target == Null).count(), 6);
        let first: Vec<ProviderKind> = runs.iter().take(4).map(|r| r.target).collect();
        assert_eq!(first, [Tandem, Galera, Standalone, Null], "the 1-node targets last, in the order given");
    }
}
