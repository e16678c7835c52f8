//! Issue 10's latency and throughput goals and issue 46's cost goal, read
//! off this run's cells.
//!
//! The goals are ratios to measure against, never test assertions: this only
//! says, per goal, what the run measured and whether that meets it, so a
//! reader of docs/benchmarks.md sees where Tandem stands without doing the
//! arithmetic over the tables.

use std::fmt::Write;

use crate::bench::results::{CellResult, Results};
use tandem::cluster::ProviderKind::{Galera, Null, Standalone, Tandem};

/// One goal and what the run measured for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    pub goal: &'static str,
    /// The figure, in words (`–` when no cell of this run measures it).
    pub measured: String,
    /// None when not measured.
    pub met: Option<bool>,
}

pub fn goals(r: &Results) -> Vec<Goal> {
    vec![single_node(r), single_client(r), p95_everywhere(r), many_threads(r), own_cost(r)]
}

pub fn render(out: &mut String, r: &Results) {
    let _ = writeln!(out, "## Goals (issues 10 and 46), as this run measured them\n");
    let _ = writeln!(out, "| Goal | Measured | Met |\n|---|---|---|");
    for g in goals(r) {
        let met = match g.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        let _ = writeln!(out, "| {} | {} | {met} |", g.goal, g.measured);
    }
    let _ = writeln!(
        out,
        "\np50 is not measured (sysbench reports one percentile, p95); a 3-node goal needs a run of 3 or \
         more nodes, the 1-node goal the 1-node cell.\n"
    );
}

fn not_measured(goal: &'static str) -> Goal {
    Goal { goal, measured: "–".into(), met: None }
}

/// The worst ratio over `cells` and the cell it came from.
fn worst<'c>(
    cells: impl Iterator<Item = &'c CellResult>,
    ratio: impl Fn(&CellResult) -> Option<f64>,
    higher_is_worse: bool,
) -> Option<(f64, &'c CellResult)> {
    let key = |v: f64| if higher_is_worse { v } else { -v };
    cells.filter_map(|c| Some((ratio(c)?, c))).max_by(|a, b| key(a.0).total_cmp(&key(b.0)))
}

fn single_node(r: &Results) -> Goal {
    const GOAL: &str = "1-node cluster: at least 0.95x a standalone server's write TPS";
    let Some(s) = r.single_node.as_ref().filter(|s| s.skipped.is_none()) else { return not_measured(GOAL) };
    let Some((t, cell)) = worst(s.cells.iter(), |c| c.tps_vs(Tandem, Standalone), false) else {
        return not_measured(GOAL);
    };
    let galera = cell.tps_vs(Galera, Standalone).map_or(String::new(), |g| format!(" (Galera {g:.2}x)"));
    Goal {
        goal: GOAL,
        measured: format!(
            "lowest {t:.2}x, at {} thread{}{galera}",
            cell.cell.threads,
            if cell.cell.threads == 1 { "" } else { "s" }
        ),
        met: Some(s.cells.iter().filter_map(|c| c.tps_vs(Tandem, Standalone)).all(|v| v >= 0.95)),
    }
}

fn own_cost(r: &Results) -> Goal {
    const GOAL: &str =
        "1-node cluster: Tandem's own CPU per transaction at most 0.5x Galera's own (minus the null provider's)";
    let Some(s) = r.single_node.as_ref().filter(|s| s.skipped.is_none()) else { return not_measured(GOAL) };
    let Some((t, cell)) = worst(s.cells.iter(), |c| c.own_cpu_vs(Tandem, Galera), true) else {
        return not_measured(GOAL);
    };
    let us = |k| cell.own_cpu_us_per_trx(k).map_or("–".into(), |v| format!("{v:.0}"));
    let floor = cell.cpu_us_per_trx(Null).map_or("–".into(), |v| format!("{v:.0}"));
    Goal {
        goal: GOAL,
        measured: format!(
            "highest {t:.2}x, at {} thread{} (own µs/trx Tandem {}, Galera {}; null {floor})",
            cell.cell.threads,
            if cell.cell.threads == 1 { "" } else { "s" },
            us(Tandem),
            us(Galera)
        ),
        met: Some(s.cells.iter().filter_map(|c| c.own_cpu_vs(Tandem, Galera)).all(|v| v <= 0.5)),
    }
}

fn three_nodes(r: &Results) -> impl Iterator<Item = &CellResult> {
    r.cells.iter().filter(move |_| r.settings.matrix.nodes >= 3)
}

fn single_client(r: &Results) -> Goal {
    const GOAL: &str = "3 nodes, 1 client: at least 1.1x Galera's TPS, p95 at or below Galera's";
    let cells: Vec<&CellResult> = three_nodes(r).filter(|c| c.cell.threads == 1).collect();
    let tps = worst(cells.iter().copied(), CellResult::tps_ratio, false);
    let p95 = worst(cells.iter().copied(), CellResult::p95_ratio, true);
    let (Some((t, tc)), Some((p, pc))) = (tps, p95) else { return not_measured(GOAL) };
    Goal {
        goal: GOAL,
        measured: format!(
            "TPS lowest {t:.2}x ({}), p95 highest {p:.2}x ({}), over {} cells",
            tc.cell.label(),
            pc.cell.label(),
            cells.len()
        ),
        met: Some(t >= 1.1 && p <= 1.0),
    }
}

fn p95_everywhere(r: &Results) -> Goal {
    const GOAL: &str = "p95 at or below Galera's in every cell";
    let ratios: Vec<f64> = three_nodes(r).filter_map(CellResult::p95_ratio).collect();
    let Some((p, pc)) = worst(three_nodes(r), CellResult::p95_ratio, true) else { return not_measured(GOAL) };
    let at_or_below = ratios.iter().filter(|&&v| v <= 1.0).count();
    Goal {
        goal: GOAL,
        measured: format!("{at_or_below} of {} cells; highest {p:.2}x ({})", ratios.len(), pc.cell.label()),
        met: Some(at_or_below == ratios.len()),
    }
}

fn many_threads(r: &Results) -> Goal {
    const GOAL: &str = "at least 1.2x Galera's TPS from 16 threads up";
    let cells: Vec<&CellResult> = three_nodes(r).filter(|c| c.cell.threads >= 16).collect();
    let Some((t, tc)) = worst(cells.iter().copied(), CellResult::tps_ratio, false) else { return not_measured(GOAL) };
    Goal {
        goal: GOAL,
        measured: format!("lowest {t:.2}x ({}), over {} cells", tc.cell.label(), cells.len()),
        met: Some(t >= 1.2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::{Cell, Placement, Workload};
    use crate::bench::results::{tests::measurement, SingleNode};

    fn cell(threads: u32, tandem: (f64, f64), galera: (f64, f64)) -> CellResult {
        CellResult {
            cell: Cell { workload: Workload::OltpWriteOnly, threads, placement: Placement::Node1 },
            runs: vec![measurement(Tandem, tandem.0, tandem.1), measurement(Galera, galera.0, galera.1)],
        }
    }

    fn results(nodes: usize, cells: Vec<CellResult>) -> Results {
        let mut r = crate::bench::results::tests::sample([1.0, 1.0]);
        r.cells = cells;
        r.settings.matrix.nodes = nodes;
        r
    }

    #[test]
    fn each_goal_reads_its_own_cells_and_says_whether_it_is_met() {
        // 1 thread: 1.2x TPS but p95 1.5x; 16 threads: 1.3x TPS; 64: 1.1x.
        let r = results(
            3,
            vec![
                cell(1, (1200.0, 3.0), (1000.0, 2.0)),
                cell(16, (1300.0, 1.0), (1000.0, 2.0)),
                cell(64, (1100.0, 2.0), (1000.0, 2.0)),
            ],
        );
        let g = goals(&r);
        assert_eq!(g[0].met, None, "no 1-node cell in this run");
        assert_eq!(g[1].met, Some(false), "p95 above Galera's: {:?}", g[1]);
        assert!(
            g[1].measured.contains("TPS lowest 1.20x") && g[1].measured.contains("p95 highest 1.50x"),
            "{:?}",
            g[1]
        );
        assert_eq!(g[2].met, Some(false));
        assert!(g[2].measured.starts_with("2 of 3 cells; highest 1.50x"), "{:?}", g[2]);
        assert_eq!(g[3].met, Some(false), "64 threads: 1.1x");
        assert!(g[3].measured.starts_with("lowest 1.10x") && g[3].measured.contains("over 2 cells"), "{:?}", g[3]);
    }

    #[test]
    fn goals_met_are_said_so_and_one_node_runs_measure_no_three_node_goal() {
        let r = results(3, vec![cell(1, (1200.0, 1.0), (1000.0, 2.0)), cell(16, (1300.0, 1.0), (1000.0, 2.0))]);
        let g = goals(&r);
        assert_eq!((g[1].met, g[2].met, g[3].met), (Some(true), Some(true), Some(true)), "{g:?}");

        let one = results(1, vec![cell(1, (1200.0, 1.0), (1000.0, 2.0))]);
        assert!(goals(&one)[1..].iter().all(|g| g.met.is_none()), "a 1-node matrix is not the 3-node goal");
    }

    #[test]
    fn the_one_node_goal_takes_the_worst_thread_count() {
        let mut r = results(3, vec![]);
        let mut c = cell(1, (960.0, 1.0), (800.0, 1.0));
        c.runs.push(measurement(Standalone, 1000.0, 1.0));
        let mut d = cell(16, (900.0, 1.0), (700.0, 1.0));
        d.runs.push(measurement(Standalone, 1000.0, 1.0));
        r.single_node = Some(SingleNode { skipped: None, cells: vec![c, d] });
        let g = &goals(&r)[0];
        assert_eq!(g.met, Some(false), "{g:?}");
        assert_eq!(g.measured, "lowest 0.90x, at 16 threads (Galera 0.70x)");
        let mut out = String::new();
        render(&mut out, &r);
        assert!(out.contains("| 1-node cluster: at least 0.95x a standalone server's write TPS | lowest 0.90x, at 16 threads (Galera 0.70x) | **no** |"), "{out}");
        assert_eq!(goals(&r)[4].met, None, "no null provider run: no own cost");
    }

    #[test]
    fn the_own_cost_goal_takes_the_worst_thread_count_against_the_floor() {
        let costing = |target, cpu_us: f64| crate::bench::results::Measurement {
            transactions: 1000,
            cpu_s: cpu_us * 1000.0 / 1e6,
            ..measurement(target, 100.0, 1.0)
        };
        let cell = |threads, tandem, galera, null| CellResult {
            cell: Cell { workload: Workload::OltpWriteOnly, threads, placement: Placement::Node1 },
            runs: vec![costing(Tandem, tandem), costing(Galera, galera), costing(Null, null)],
        };
        let mut r = results(3, vec![]);
        // Own: 1 thread 40 / 100 = 0.40x; 4 threads 120 / 80 = 1.50x.
        r.single_node =
            Some(SingleNode { skipped: None, cells: vec![cell(1, 300.0, 360.0, 260.0), cell(4, 380.0, 340.0, 260.0)] });
        let g = &goals(&r)[4];
        assert_eq!(g.met, Some(false), "{g:?}");
        assert_eq!(g.measured, "highest 1.50x, at 4 threads (own µs/trx Tandem 120, Galera 80; null 260)");
        r.single_node.as_mut().unwrap().cells.truncate(1);
        assert_eq!(goals(&r)[4].met, Some(true));
    }
}
