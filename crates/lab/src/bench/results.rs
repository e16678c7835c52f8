//! What a benchmark run produced, kept as JSON next to the Markdown report so
//! that the next run can compare its ratios with this one (repeatability).

use super::plan::{Cell, Matrix};
use serde::{Deserialize, Serialize};
use tandem::cluster::ProviderKind;

/// Bumped when the layout changes; an older file is then not compared against.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    pub format: u32,
    /// UTC, `YYYY-MM-DD HH:MM`.
    pub date: String,
    pub command: String,
    pub machine: Machine,
    pub versions: Versions,
    pub settings: Settings,
    pub cells: Vec<CellResult>,
    pub resources: Vec<Resources>,
    pub elapsed_s: f64,
    /// The rejoin scenario; none with `--no-rejoin` and in files from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejoin: Option<Rejoin>,
    /// The 1-node cell; none with `--no-single-node` and in files from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_node: Option<SingleNode>,
    /// The TLS cell (`--tls-cell`); none without it and in files from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cell: Option<super::tls_cell::TlsCell>,
    /// The causal-read cell (`--causal-cell`); none without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causal_cell: Option<super::causal_cell::CausalCell>,
    /// The flow-control cell (`--fc-cell`); none without it.
    #[serde(default)]
    pub fc_cell: Option<super::fc_cell::FcCell>,
    /// The streaming cell (`--stream-cell`); none without it.
    #[serde(default)]
    pub stream_cell: Option<super::stream_cell::StreamCell>,
    /// The SST cell (`--sst-cell`); none without it.
    #[serde(default)]
    pub sst_cell: Option<super::sst_cell::SstCell>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    pub host: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub cpu: String,
    pub kernel: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Versions {
    pub mariadb: String,
    pub galera: String,
    pub sysbench: String,
    /// Package version and md5 of the library that was loaded.
    pub tandem: String,
}

/// Everything that must be equal for two runs' ratios to be comparable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub matrix: Matrix,
    pub tables: u32,
    pub table_size: u32,
    pub warmup_s: u32,
    pub duration_s: u32,
    pub slave_threads: usize,
    pub mysqld_options: Vec<(String, String)>,
    /// `wsrep_provider_options` items of both providers (gcache.size for the
    /// rejoin scenario); empty in files from before they were set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_options: Vec<(String, String)>,
    /// `wsrep_provider_options` items of Tandem alone (`--tandem-option`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tandem_options: Vec<(String, String)>,
    /// Both providers encrypted their group channel (`--tls`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// The Tandem measured had flow control (false in results from before
    /// it): without it a slow applier is not throttled, so the ratios of the
    /// two kinds of run are not comparable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tandem_flow_control: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellResult {
    pub cell: Cell,
    pub runs: Vec<Measurement>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Measurement {
    pub target: Option<ProviderKind>,
    /// Which of the cell's rounds (from 0).
    #[serde(default)]
    pub round: u32,
    pub tps: f64,
    pub p95_ms: Option<f64>,
    pub transactions: u64,
    /// sysbench's retried errors (a certification failure is a deadlock error to the client).
    pub ignored_errors: u64,
    /// Sum over nodes of the `wsrep_local_cert_failures` increase; none when standalone.
    pub cert_failures: Option<u64>,
    /// CPU seconds of all the target's servers, from the start of the run
    /// until every node had applied everything.
    pub cpu_s: f64,
    /// Seconds after the clients stopped until every node had applied everything.
    pub drain_s: f64,
    /// Set when the run failed; the figures are then zero.
    pub error: Option<String>,
    /// Set when a first attempt failed and these figures are the second's.
    #[serde(default)]
    pub retried_after: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Resources {
    pub target: ProviderKind,
    /// Peak RSS (VmHWM) of each node's mariadbd over the whole benchmark.
    pub peak_rss_mib: Vec<f64>,
    /// RSS of each node when the matrix ended, anonymous memory (heap) and
    /// file pages mapped into the process (Galera maps its gcache file); MiB.
    #[serde(default)]
    pub rss_anon_mib: Vec<f64>,
    #[serde(default)]
    pub rss_file_mib: Vec<f64>,
    pub cpu_s: f64,
    pub transactions: u64,
}

impl Resources {
    pub fn cpu_per_1000(&self) -> Option<f64> {
        (self.transactions > 0).then(|| self.cpu_s * 1000.0 / self.transactions as f64)
    }
}

/// A target's rounds of one cell taken together. TPS and p95 are the
/// median round's (one stalled round of three cannot move them); counts and
/// CPU are sums, so that per-transaction figures weigh every round.
#[derive(Clone, Debug, PartialEq)]
pub struct Combined {
    pub tps: f64,
    pub p95_ms: Option<f64>,
    pub transactions: u64,
    pub cert_failures: Option<u64>,
    pub cpu_s: f64,
    /// The longest drain of the rounds.
    pub drain_s: f64,
    /// Rounds measured (failed ones are not).
    pub rounds: usize,
    /// (max - min) / median of the rounds' TPS, percent: how noisy the cell was.
    pub round_spread_pct: f64,
}

impl Combined {
    fn of(rounds: &[&Measurement]) -> Option<Combined> {
        let tps = sorted(rounds.iter().map(|m| m.tps));
        let mid = median(&tps);
        let p95 = sorted(rounds.iter().filter_map(|m| m.p95_ms));
        let cert: Vec<u64> = rounds.iter().filter_map(|m| m.cert_failures).collect();
        Some(Combined {
            tps: mid,
            p95_ms: (!p95.is_empty()).then(|| median(&p95)),
            transactions: rounds.iter().map(|m| m.transactions).sum(),
            cert_failures: (!cert.is_empty()).then(|| cert.iter().sum()),
            cpu_s: rounds.iter().map(|m| m.cpu_s).sum(),
            drain_s: rounds.iter().map(|m| m.drain_s).fold(0.0, f64::max),
            rounds: rounds.len(),
            round_spread_pct: if mid > 0.0 { (tps.last()? - tps.first()?) / mid * 100.0 } else { 0.0 },
        })
    }
}

pub(crate) fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v
}

impl CellResult {
    /// The target's successful rounds combined; none if every round failed
    /// (or the target did not run this cell).
    pub fn of(&self, target: ProviderKind) -> Option<Combined> {
        let ok: Vec<&Measurement> =
            self.runs.iter().filter(|m| m.target == Some(target) && m.error.is_none()).collect();
        if ok.is_empty() {
            return None;
        }
        Combined::of(&ok)
    }

    /// Whether the target ran this cell at all (failed or not).
    pub fn ran(&self, target: ProviderKind) -> bool {
        self.runs.iter().any(|m| m.target == Some(target))
    }

    /// Tandem TPS / Galera TPS: above 1 means Tandem is faster.
    pub fn tps_ratio(&self) -> Option<f64> {
        self.tps_vs(ProviderKind::Tandem, ProviderKind::Galera)
    }

    /// Tandem p95 / Galera p95: below 1 means Tandem's latency is lower.
    pub fn p95_ratio(&self) -> Option<f64> {
        self.p95_vs(ProviderKind::Tandem, ProviderKind::Galera)
    }

    /// `a`'s TPS / `b`'s TPS.
    pub fn tps_vs(&self, a: ProviderKind, b: ProviderKind) -> Option<f64> {
        let (a, b) = (self.of(a)?, self.of(b)?);
        (b.tps > 0.0).then(|| a.tps / b.tps)
    }

    /// Server CPU per transaction of `target` over its rounds, µs: every
    /// `mariadbd` of the target, user + system (/proc), over the
    /// transactions sysbench completed. On a shared machine it moves far
    /// less than TPS does.
    pub fn cpu_us_per_trx(&self, target: ProviderKind) -> Option<f64> {
        let m = self.of(target)?;
        (m.transactions > 0).then(|| m.cpu_s * 1e6 / m.transactions as f64)
    }

    /// `target`'s own CPU per transaction: its CPU per transaction minus the
    /// null provider's, which is what the server's own wsrep work costs (the
    /// same on any provider). None without a null provider run.
    pub fn own_cpu_us_per_trx(&self, target: ProviderKind) -> Option<f64> {
        Some(self.cpu_us_per_trx(target)? - self.cpu_us_per_trx(ProviderKind::Null)?)
    }

    /// `a`'s own CPU per transaction / `b`'s; none unless both are positive
    /// (an own cost at or below the floor's is noise, not a ratio).
    pub fn own_cpu_vs(&self, a: ProviderKind, b: ProviderKind) -> Option<f64> {
        let (a, b) = (self.own_cpu_us_per_trx(a)?, self.own_cpu_us_per_trx(b)?);
        (a > 0.0 && b > 0.0).then(|| a / b)
    }

    /// `a`'s p95 / `b`'s p95.
    pub fn p95_vs(&self, a: ProviderKind, b: ProviderKind) -> Option<f64> {
        let (a, b) = (self.of(a)?.p95_ms?, self.of(b)?.p95_ms?);
        (b > 0.0).then(|| a / b)
    }
}

pub use super::rejoin_results::{Rejoin, RejoinRun, RejoinSummary, RejoinVariant};

/// Each replicated cluster shrunk to node 1 alone (the others left
/// gracefully), against the standalone server.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SingleNode {
    /// Why the cell did not run at all.
    pub skipped: Option<String>,
    pub cells: Vec<CellResult>,
}

impl SingleNode {
    pub fn failed(&self) -> usize {
        self.cells.iter().flat_map(|c| &c.runs).filter(|m| m.error.is_some()).count()
    }
}

impl Results {
    /// Per target: CPU seconds and transactions over every successful run.
    pub fn totals(&self, target: ProviderKind) -> (f64, u64) {
        self.cells
            .iter()
            .filter_map(|c| c.of(target))
            .fold((0.0, 0), |(cpu, trx), m| (cpu + m.cpu_s, trx + m.transactions))
    }
}

/// Geometric mean; none for an empty set.
pub fn geomean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let logs: Vec<f64> = values.into_iter().filter(|v| *v > 0.0).map(f64::ln).collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// How far this run's Tandem/Galera TPS ratios moved from an earlier run's.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    pub previous_date: String,
    /// Cell by cell, the Tandem/Galera TPS ratio.
    pub ratios: Moves,
    /// The summary table's figures (geometric mean of the ratios per
    /// workload and placement, then over all cells), over the cells measured
    /// in both runs.
    pub groups: Vec<GroupMove>,
    /// Cell by cell, the standalone server's own TPS: no provider is involved,
    /// so this is how much the machine itself moved between the two runs.
    pub standalone: Option<Moves>,
}

/// How far a set of per-cell figures moved between two runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Moves {
    pub cells: usize,
    pub median_abs_pct: f64,
    pub max_abs_pct: f64,
    /// The cell that moved most, with its signed move.
    pub worst: String,
    pub within_15_pct: usize,
}

impl Moves {
    /// From (cell, figure now, figure before); none without a cell.
    fn of(both: &[(&Cell, f64, f64)]) -> Option<Moves> {
        let mut diffs: Vec<(f64, String)> =
            both.iter().map(|(c, now, prev)| ((now / prev - 1.0) * 100.0, c.label())).collect();
        diffs.sort_by(|a, b| a.0.abs().total_cmp(&b.0.abs()));
        let abs: Vec<f64> = diffs.iter().map(|d| d.0.abs()).collect();
        let (max, worst) = diffs.last().cloned()?;
        Some(Moves {
            cells: diffs.len(),
            median_abs_pct: median(&abs),
            max_abs_pct: max.abs(),
            worst: format!("{worst} ({max:+.1}%)"),
            within_15_pct: abs.iter().filter(|d| **d <= 15.0).count(),
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GroupMove {
    pub label: String,
    pub previous: f64,
    pub now: f64,
}

impl GroupMove {
    pub fn moved_pct(&self) -> f64 {
        (self.now / self.previous - 1.0) * 100.0
    }
}

/// Compares cell by cell; none when the settings differ (ratios of different
/// experiments say nothing about repeatability) or no cell has both ratios.
/// Whether the null provider ran is no difference: it changes no other
/// target's runs, and runs from before it existed still compare.
pub fn spread(previous: &Results, now: &Results) -> Option<Spread> {
    let without_null = |s: &Settings| {
        let mut s = s.clone();
        s.matrix.targets.retain(|&t| t != ProviderKind::Null);
        s
    };
    if previous.format != FORMAT || without_null(&previous.settings) != without_null(&now.settings) {
        return None;
    }
    let pairs = || now.cells.iter().zip(&previous.cells).filter(|(a, b)| a.cell == b.cell);
    // (cell, figure now, figure before) for the cells measured in both runs.
    let ratios: Vec<(&Cell, f64, f64)> =
        pairs().filter_map(|(a, b)| Some((&a.cell, a.tps_ratio()?, b.tps_ratio()?))).collect();
    let standalone: Vec<(&Cell, f64, f64)> = pairs()
        .filter_map(|(a, b)| {
            let tps = |c: &CellResult| c.of(ProviderKind::Standalone).map(|m| m.tps).filter(|t| *t > 0.0);
            Some((&a.cell, tps(a)?, tps(b)?))
        })
        .collect();
    Some(Spread {
        previous_date: previous.date.clone(),
        ratios: Moves::of(&ratios)?,
        groups: group_moves(&now.settings.matrix, &ratios),
        standalone: Moves::of(&standalone),
    })
}

/// Median over the cells of each target's round spread ((max - min) / median
/// TPS of its rounds): how noisy a single run is on this machine. None with
/// one round.
pub fn round_noise(results: &Results, target: ProviderKind) -> Option<f64> {
    let v =
        sorted(results.cells.iter().filter_map(|c| c.of(target)).filter(|m| m.rounds > 1).map(|m| m.round_spread_pct));
    (!v.is_empty()).then(|| median(&v))
}

fn group_moves(matrix: &Matrix, both: &[(&Cell, f64, f64)]) -> Vec<GroupMove> {
    let mean = |pick: &dyn Fn(&Cell) -> bool| {
        let chosen: Vec<_> = both.iter().filter(|(c, _, _)| pick(c)).collect();
        Some((geomean(chosen.iter().map(|x| x.2))?, geomean(chosen.iter().map(|x| x.1))?))
    };
    let mut groups = Vec::new();
    for &w in &matrix.workloads {
        for p in matrix.placements() {
            if let Some((previous, now)) = mean(&|c: &Cell| c.workload == w && c.placement == p) {
                groups.push(GroupMove { label: format!("{} {}", w.script(), p.label()), previous, now });
            }
        }
    }
    if let Some((previous, now)) = mean(&|_: &Cell| true) {
        groups.push(GroupMove { label: "all cells".into(), previous, now });
    }
    groups
}

/// Median of an ascending, non-empty slice.
pub(crate) fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bench::plan::{Placement, Workload};
    use crate::bench::transfer::Transfer;
    use ProviderKind::*;

    pub(crate) fn measurement(target: ProviderKind, tps: f64, p95: f64) -> Measurement {
        Measurement {
            target: Some(target),
            tps,
            p95_ms: Some(p95),
            transactions: (tps * 10.0) as u64,
            cert_failures: (target != Standalone).then_some(3),
            cpu_s: tps / 100.0,
            drain_s: 0.2,
            ..Measurement::default()
        }
    }

    pub(crate) fn sample(tandem_tps: [f64; 2]) -> Results {
        let matrix = Matrix {
            workloads: vec![Workload::OltpWriteOnly],
            threads: vec![1, 16],
            placements: vec![Placement::Node1],
            targets: vec![Tandem, Galera, Standalone],
            nodes: 3,
            rounds: 1,
        };
        let cells = matrix
            .cells()
            .into_iter()
            .zip(tandem_tps)
            .map(|(cell, t)| CellResult {
                cell,
                runs: vec![
                    measurement(Tandem, t, 4.0),
                    measurement(Galera, 100.0, 5.0),
                    measurement(Standalone, 400.0, 1.0),
                ],
            })
            .collect();
        Results {
            format: FORMAT,
            date: "2026-11-22 10:00".into(),
            command: "tandem bench".into(),
            machine: Machine::default(),
            versions: Versions::default(),
            settings: Settings {
                matrix,
                tables: 8,
                table_size: 1000,
                warmup_s: 1,
                duration_s: 5,
                slave_threads: 4,
                mysqld_options: vec![],
                provider_options: vec![],
                tandem_options: vec![],
                tls: false,
                tandem_flow_control: true,
            },
            cells,
            resources: vec![],
            elapsed_s: 60.0,
            rejoin: None,
            single_node: None,
            tls_cell: None,
            causal_cell: None,
            fc_cell: None,
            stream_cell: None,
            sst_cell: None,
        }
    }

    #[test]
    fn ratios_are_tandem_over_galera() {
        let r = sample([120.0, 80.0]);
        assert_eq!(r.cells[0].tps_ratio(), Some(1.2));
        assert_eq!(r.cells[0].p95_ratio(), Some(0.8));
        assert_eq!(r.cells[1].tps_ratio(), Some(0.8));
    }

    #[test]
    fn failed_runs_have_no_ratio() {
        let mut r = sample([120.0, 80.0]);
        r.cells[0].runs[1].error = Some("sysbench failed".into());
        assert_eq!(r.cells[0].tps_ratio(), None);
        assert_eq!(r.totals(Galera).1, 1000);
    }

    #[test]
    fn rounds_combine_to_the_median_and_sums() {
        let mut r = sample([120.0, 80.0]);
        let cell = &mut r.cells[0];
        cell.runs = [(0, 90.0), (1, 30.0), (2, 100.0)]
            .into_iter()
            .map(|(round, tps)| Measurement { round, ..measurement(Galera, tps, tps / 10.0) })
            .chain([measurement(Tandem, 120.0, 4.0)])
            .collect();
        cell.runs[2].drain_s = 1.5;
        let g = cell.of(Galera).unwrap();
        // The stalled round (30 tps) is outvoted.
        assert_eq!(g.tps, 90.0);
        assert_eq!(g.p95_ms, Some(9.0));
        assert_eq!(g.transactions, 900 + 300 + 1000);
        assert_eq!(g.cert_failures, Some(9));
        assert!((g.cpu_s - 2.2).abs() < 1e-9);
        assert_eq!(g.drain_s, 1.5);
        assert_eq!(g.rounds, 3);
        assert!((g.round_spread_pct - 70.0 / 90.0 * 100.0).abs() < 1e-9);
        assert_eq!(cell.tps_ratio(), Some(120.0 / 90.0));
        // An even number of rounds takes the mean of the middle two.
        cell.runs[1].error = Some("stall".into());
        assert_eq!(cell.of(Galera).unwrap().tps, 95.0);
        assert_eq!(cell.of(Galera).unwrap().rounds, 2);
    }

    #[test]
    fn a_target_whose_rounds_all_failed_has_no_figures() {
        let mut r = sample([120.0, 80.0]);
        r.cells[0].runs[0].error = Some("x".into());
        assert!(r.cells[0].of(Tandem).is_none());
        assert!(r.cells[0].ran(Tandem));
        assert!(r.cells[0].of(Galera).is_some());
        assert_eq!(r.cells[0].tps_ratio(), None);
        r.cells[0].runs.retain(|m| m.target != Some(Galera));
        assert!(!r.cells[0].ran(Galera));
    }

    #[test]
    fn geomean_of_ratios() {
        assert!((geomean([2.0, 0.5]).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(geomean(Vec::<f64>::new()), None);
    }

    #[test]
    fn spread_between_two_runs() {
        let a = sample([120.0, 80.0]);
        let b = sample([132.0, 80.0]);
        let s = spread(&a, &b).unwrap();
        let r = &s.ratios;
        assert_eq!(r.cells, 2);
        assert!((r.max_abs_pct - 10.0).abs() < 1e-9, "{s:?}");
        assert!((r.median_abs_pct - 5.0).abs() < 1e-9);
        assert_eq!(r.within_15_pct, 2);
        assert!(r.worst.starts_with("oltp_write_only 1 thr"), "{}", r.worst);
        // One workload and placement: its group and "all cells" are the
        // geometric means of (1.2, 0.8) and (1.32, 0.8).
        assert_eq!(s.groups.len(), 2, "{:?}", s.groups);
        let want = ((1.32f64 * 0.8).sqrt() / (1.2f64 * 0.8).sqrt() - 1.0) * 100.0;
        for g in &s.groups {
            assert!((g.moved_pct() - want).abs() < 1e-9, "{g:?}");
        }
        assert_eq!(s.groups[1].label, "all cells");
    }

    #[test]
    fn the_standalone_servers_own_move_is_the_machines() {
        let a = sample([120.0, 80.0]);
        let mut b = sample([120.0, 80.0]);
        b.cells[1].runs[2].tps = 300.0;
        let s = spread(&a, &b).unwrap();
        let m = s.standalone.unwrap();
        assert_eq!(m.cells, 2);
        assert!((m.max_abs_pct - 25.0).abs() < 1e-9, "{m:?}");
        assert_eq!(m.within_15_pct, 1);
        assert_eq!(m.worst, "oltp_write_only 16 thr node 1 (-25.0%)");
        assert_eq!(s.ratios.max_abs_pct, 0.0);
        // Without a standalone target there is no yardstick, but ratios still compare.
        let strip = |mut r: Results| {
            r.cells.iter_mut().for_each(|c| c.runs.retain(|m| m.target != Some(Standalone)));
            r
        };
        let s = spread(&strip(a), &strip(b)).unwrap();
        assert_eq!(s.standalone, None);
    }

    #[test]
    fn round_noise_is_the_median_cells_round_spread() {
        let mut r = sample([120.0, 80.0]);
        assert_eq!(round_noise(&r, Galera), None, "one round: nothing to compare");
        for (cell, spread) in r.cells.iter_mut().zip([10.0, 30.0]) {
            let g = cell.runs[1].clone();
            cell.runs.push(Measurement { round: 1, tps: g.tps + spread, ..g });
        }
        // Two rounds: medians 105 and 115, spreads 10/105 and 30/115.
        let want = (10.0 / 105.0 * 100.0 + 30.0 / 115.0 * 100.0) / 2.0;
        assert!((round_noise(&r, Galera).unwrap() - want).abs() < 1e-9);
        assert_eq!(round_noise(&r, Tandem), None);
    }

    #[test]
    fn different_settings_are_not_compared() {
        let a = sample([120.0, 80.0]);
        let mut b = sample([120.0, 80.0]);
        b.settings.duration_s = 30;
        assert_eq!(spread(&a, &b), None);
    }

    #[test]
    fn a_run_with_the_null_provider_compares_with_one_without() {
        let a = sample([120.0, 80.0]);
        let mut b = sample([132.0, 80.0]);
        b.settings.matrix.targets.push(Null);
        assert_eq!(spread(&a, &b).map(|s| s.ratios.cells), Some(2));
        b.settings.matrix.targets.retain(|&t| t != Standalone);
        assert_eq!(spread(&a, &b), None, "a target left out is a different run");
    }

    pub(crate) fn rejoin_run(target: ProviderKind, variant: RejoinVariant, round: u32, synced_s: f64) -> RejoinRun {
        RejoinRun {
            target: Some(target),
            variant: Some(variant),
            round,
            writes: 100_000,
            write_s: 50.0,
            write_mib: if target == Galera { 169.0 } else { 153.0 },
            transfer: Transfer::Ist,
            evidence: Some("WSREP: Resuming at local seqno 5".into()),
            synced_s,
            error: None,
        }
    }

    pub(crate) fn rejoin(runs: Vec<RejoinRun>) -> Rejoin {
        Rejoin {
            writes: 100_000,
            rounds: 3,
            threads: 16,
            downtime_s: 60,
            rate: 1000,
            node: 3,
            data_mib: Some(190.0),
            skipped: None,
            runs,
        }
    }

    #[test]
    fn rejoin_rounds_combine_to_the_median_time_and_count_transfers() {
        use RejoinVariant::*;
        let mut runs = vec![
            rejoin_run(Galera, Stop, 0, 30.0),
            rejoin_run(Galera, Stop, 1, 20.0),
            rejoin_run(Galera, Stop, 2, 25.0),
            rejoin_run(Tandem, Stop, 0, 10.0),
            rejoin_run(Tandem, Stop, 1, 12.0),
            rejoin_run(Tandem, Stop, 2, 8.0),
            rejoin_run(Tandem, Kill, 0, 9.0),
        ];
        runs[1].transfer = Transfer::Sst;
        runs[5].error = Some("node3 exited".into());
        let j = rejoin(runs);
        assert_eq!(j.variants(), [Stop, Kill]);
        let g = j.summary(Galera, Stop).unwrap();
        assert_eq!((g.synced_s, g.synced_min_s, g.synced_max_s), (25.0, 20.0, 30.0));
        assert!((g.spread_pct - 40.0).abs() < 1e-9);
        assert_eq!((g.ist, g.sst, g.unknown, g.rounds, g.failed), (2, 1, 0, 3, 0));
        assert_eq!(g.transfers(), "IST 2, SST 1");
        // The failed round is left out: the median of 10 and 12.
        let t = j.summary(Tandem, Stop).unwrap();
        assert_eq!((t.synced_s, t.rounds, t.failed), (11.0, 2, 1));
        assert_eq!(t.transfers(), "IST");
        assert_eq!(t.writes, 100_000.0);
        assert_eq!(j.ratio(Stop), Some(11.0 / 25.0));
        // Galera did not run kill -9: no ratio.
        assert!(j.ran(Tandem, Kill) && !j.ran(Galera, Kill));
        assert_eq!(j.ratio(Kill), None);
        assert_eq!(j.failed(), 1);
    }

    #[test]
    fn single_node_ratios_are_against_standalone() {
        let r = sample([120.0, 80.0]);
        let c = &r.cells[0];
        assert_eq!(c.tps_vs(Tandem, Standalone), Some(120.0 / 400.0));
        assert_eq!(c.tps_vs(Galera, Standalone), Some(0.25));
        assert_eq!(c.p95_vs(Tandem, Standalone), Some(4.0));
        let s = SingleNode { skipped: None, cells: r.cells.clone() };
        assert_eq!(s.failed(), 0);
    }

    /// docs/benchmarks.json of run 7, from before the rejoin scenario, the
    /// 1-node cell, provider options and the RSS split.
    pub(crate) const RUN7: &str = include_str!("testdata/results-run7-before-rejoin.json");

    #[test]
    fn results_from_before_the_new_sections_still_read() {
        let old: Results = serde_json::from_str(RUN7).unwrap();
        assert!(old.rejoin.is_none() && old.single_node.is_none());
        assert!(old.settings.provider_options.is_empty());
        assert!(old.resources.iter().all(|r| r.rss_anon_mib.is_empty() && !r.peak_rss_mib.is_empty()));
        // Written again, nothing new appears, so the same settings still compare.
        let again: Results = serde_json::from_str(&serde_json::to_string(&old).unwrap()).unwrap();
        assert_eq!(again.settings, old.settings);
        assert!(spread(&old, &again).is_some());
        let text = serde_json::to_string(&old).unwrap();
        assert!(!text.contains("provider_options") && !text.contains("\"rejoin\""), "{text:.300}");
    }

    #[test]
    fn json_round_trip() {
        let r = sample([120.0, 80.0]);
        let text = serde_json::to_string(&r).unwrap();
        let back: Results = serde_json::from_str(&text).unwrap();
        assert_eq!(back.cells[1].tps_ratio(), r.cells[1].tps_ratio());
        assert_eq!(back.settings, r.settings);
    }
}
