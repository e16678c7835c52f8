//! What a benchmark run measures and in which order.
//!
//! A cell is one (workload, client threads, placement); each cell is run on
//! every target, in several rounds. Galera and Tandem swap places every round
//! and every cell so that drift on the machine (page cache, thermal, a
//! neighbour's load) hits both the same; the rounds let one stalled run be
//! outvoted (the report takes each target's median round).

use serde::{Deserialize, Serialize};
use tandem::cluster::ProviderKind;

/// The sysbench 1.0 OLTP scripts the issue asks for, by their script name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    #[value(name = "oltp_write_only")]
    OltpWriteOnly,
    #[value(name = "oltp_read_write")]
    OltpReadWrite,
    #[value(name = "oltp_update_index")]
    OltpUpdateIndex,
    #[value(name = "oltp_point_select")]
    OltpPointSelect,
}

impl Workload {
    pub const ALL: [Workload; 4] =
        [Workload::OltpWriteOnly, Workload::OltpReadWrite, Workload::OltpUpdateIndex, Workload::OltpPointSelect];

    /// sysbench's script name.
    pub fn script(self) -> &'static str {
        match self {
            Workload::OltpWriteOnly => "oltp_write_only",
            Workload::OltpReadWrite => "oltp_read_write",
            Workload::OltpUpdateIndex => "oltp_update_index",
            Workload::OltpPointSelect => "oltp_point_select",
        }
    }
}

/// Where the clients connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Every client on node 1 (the others only apply).
    Node1,
    /// Clients split as evenly as possible over all nodes (multi-master).
    Spread,
}

impl Placement {
    pub fn label(self) -> &'static str {
        match self {
            Placement::Node1 => "node 1",
            Placement::Spread => "spread",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub workload: Workload,
    pub threads: u32,
    pub placement: Placement,
}

impl Cell {
    pub fn label(&self) -> String {
        format!("{} {} thr {}", self.workload.script(), self.threads, self.placement.label())
    }
}

/// One sysbench measurement: a cell on one target, in one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub cell: usize,
    pub round: u32,
    pub target: ProviderKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Matrix {
    pub workloads: Vec<Workload>,
    pub threads: Vec<u32>,
    pub placements: Vec<Placement>,
    pub targets: Vec<ProviderKind>,
    pub nodes: usize,
    /// Runs of every cell on every target (a file from before rounds had one).
    #[serde(default = "one_round")]
    pub rounds: u32,
}

fn one_round() -> u32 {
    1
}

impl Matrix {
    /// Workload-major, then placement, then threads: one table per workload
    /// reads top to bottom in the order it was measured.
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for &workload in &self.workloads {
            for &placement in &self.placements() {
                for &threads in &self.threads {
                    cells.push(Cell { workload, threads, placement });
                }
            }
        }
        cells
    }

    /// On a one-node cluster "spread" is "node 1" again: measured once.
    pub fn placements(&self) -> Vec<Placement> {
        let mut placements = self.placements.clone();
        if self.nodes == 1 {
            placements.retain(|&p| p == Placement::Node1);
        }
        placements
    }

    /// Every run in the order it is measured: a cell's rounds back to back,
    /// so that a cell's Galera and Tandem figures are seconds apart.
    pub fn runs(&self) -> Vec<Run> {
        let mut runs = Vec::new();
        let cells = self.cells();
        for (k, cell) in cells.iter().enumerate() {
            for round in 0..self.rounds.max(1) {
                for target in self.order_for(k + round as usize, cell) {
                    runs.push(Run { cell: k, round, target });
                }
            }
        }
        runs
    }

    /// Replicated targets alternate which goes first (ABAB... over cells,
    /// ABBA... within a cell's rounds). The standalone server has a single
    /// node, so it only runs the "node 1" cells, last in each round. So does
    /// the null provider, but only in a matrix of 1-node clusters (the
    /// 1-node cell): against a cluster of several nodes its figures, the
    /// cost of one server's wsrep work, compare with nothing.
    fn order_for(&self, k: usize, cell: &Cell) -> Vec<ProviderKind> {
        let mut order: Vec<ProviderKind> = self.targets.iter().copied().filter(|&t| !t.one_node_only()).collect();
        if k % 2 == 1 {
            order.reverse();
        }
        if cell.placement == Placement::Node1 {
            let alone = |t: ProviderKind| t == ProviderKind::Standalone || (t == ProviderKind::Null && self.nodes == 1);
            order.extend(self.targets.iter().copied().filter(|&t| alone(t)));
        }
        order
    }
}

/// Client threads per node for a placement: all on node 1, or as even as
/// possible with the remainder on the first nodes. Nodes with none are left out,
/// so the result is (node index from 1, threads) pairs.
pub fn clients(threads: u32, placement: Placement, nodes: usize) -> Vec<(usize, u32)> {
    let nodes = match placement {
        Placement::Node1 => 1,
        Placement::Spread => nodes.max(1),
    };
    let n = nodes as u32;
    (0..nodes).map(|i| (i + 1, threads / n + u32::from((i as u32) < threads % n))).filter(|&(_, t)| t > 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::*;

    fn matrix(nodes: usize) -> Matrix {
        Matrix {
            workloads: vec![Workload::OltpWriteOnly, Workload::OltpPointSelect],
            threads: vec![1, 16],
            placements: vec![Placement::Node1, Placement::Spread],
            targets: vec![Tandem, Galera, Standalone],
            nodes,
            rounds: 1,
        }
    }

    #[test]
    fn cells_are_workload_major() {
        let cells = matrix(3).cells();
        assert_eq!(cells.len(), 8);
        assert_eq!(cells[0].workload, Workload::OltpWriteOnly);
        assert_eq!(cells[1].threads, 16);
        assert_eq!(cells[2].placement, Placement::Spread);
        assert_eq!(cells[4].workload, Workload::OltpPointSelect);
    }

    #[test]
    fn replicated_targets_swap_order_every_cell() {
        let runs = matrix(3).runs();
        let firsts: Vec<ProviderKind> = (0..8).map(|k| runs.iter().find(|r| r.cell == k).unwrap().target).collect();
        assert_eq!(firsts, [Tandem, Galera, Tandem, Galera, Tandem, Galera, Tandem, Galera]);
    }

    #[test]
    fn rounds_of_a_cell_run_back_to_back_swapping_who_goes_first() {
        let m = Matrix { rounds: 3, ..matrix(3) };
        let runs = m.runs();
        // 8 cells x 3 rounds x 2 replicated targets + 4 node-1 cells x 3 rounds standalone
        assert_eq!(runs.len(), 8 * 3 * 2 + 4 * 3);
        let cell0: Vec<(u32, ProviderKind)> =
            runs.iter().take_while(|r| r.cell == 0).map(|r| (r.round, r.target)).collect();
        assert_eq!(
            cell0,
            [
                (0, Tandem),
                (0, Galera),
                (0, Standalone),
                (1, Galera),
                (1, Tandem),
                (1, Standalone),
                (2, Tandem),
                (2, Galera),
                (2, Standalone)
            ]
        );
        // The next cell starts with the other provider.
        let next = runs.iter().find(|r| r.cell == 1).unwrap();
        assert_eq!((next.round, next.target), (0, Galera));
    }

    #[test]
    fn old_results_without_rounds_read_as_one_round() {
        let mut value = serde_json::to_value(matrix(3)).unwrap();
        value.as_object_mut().unwrap().remove("rounds");
        let back: Matrix = serde_json::from_value(value).unwrap();
        assert_eq!(back.rounds, 1);
    }

    #[test]
    fn standalone_runs_only_node1_cells() {
        let m = matrix(3);
        let cells = m.cells();
        let runs = m.runs();
        let standalone: Vec<_> = runs.iter().filter(|r| r.target == Standalone).collect();
        assert_eq!(standalone.len(), 4);
        assert!(standalone.iter().all(|r| cells[r.cell].placement == Placement::Node1));
        // 8 cells x 2 replicated targets + 4 standalone
        assert_eq!(runs.len(), 20);
    }

    #[test]
    fn the_null_provider_runs_only_where_every_target_has_one_node() {
        let targets = vec![Tandem, Galera, Standalone, Null];
        let three = Matrix { targets: targets.clone(), ..matrix(3) };
        assert!(three.runs().iter().all(|r| r.target != Null), "its one server against three says nothing");
        assert_eq!(three.runs().len(), matrix(3).runs().len());
        let one = Matrix { targets, ..matrix(1) };
        let runs = one.runs();
        assert_eq!(runs.iter().filter(|r| r.target == Null).count(), 4, "every cell of a 1-node matrix");
        assert_eq!(runs.iter().filter(|r| r.target == Standalone).count(), 4);
    }

    #[test]
    fn one_node_has_no_spread() {
        let m = matrix(1);
        assert!(m.cells().iter().all(|c| c.placement == Placement::Node1));
        assert_eq!(m.runs().len(), 4 * 3);
    }

    #[test]
    fn clients_split_evenly() {
        assert_eq!(clients(64, Placement::Node1, 3), [(1, 64)]);
        assert_eq!(clients(64, Placement::Spread, 3), [(1, 22), (2, 21), (3, 21)]);
        assert_eq!(clients(4, Placement::Spread, 3), [(1, 2), (2, 1), (3, 1)]);
        assert_eq!(clients(1, Placement::Spread, 3), [(1, 1)]);
        let total: u32 = clients(16, Placement::Spread, 3).iter().map(|c| c.1).sum();
        assert_eq!(total, 16);
    }
}
