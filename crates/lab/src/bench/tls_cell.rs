//! The TLS cell: what encrypting the group channel costs each provider,
//! measured inside one run.
//!
//! Two runs, one with `--tls` and one without, cannot tell a 5% cost from
//! the machine's drift between them (on the 2-core VM the same cell moved
//! more than that from one run to the next). So this cell starts a second,
//! TLS cluster of each replicated provider next to the plaintext one the
//! matrix used, loads the same tables, and measures one cell on all four in
//! rounds: a provider's plaintext and TLS runs back to back, who goes first
//! swapping every round. The cost is the provider's own TLS / plaintext
//! ratio from the same minutes.

use super::plan::{Cell, Placement, Workload};
use super::results::{CellResult, Combined, Measurement};
use super::runner::Bench;
use crate::progress::Progress;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use tandem::cluster::{Cluster, ProviderKind};

/// The cell: writes from every node, where the group channel
/// carries the most.
pub const CELL: Cell = Cell { workload: Workload::OltpWriteOnly, threads: 16, placement: Placement::Spread };

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TlsCell {
    /// Why it was not measured (a TLS cluster that would not start, ...).
    pub skipped: Option<String>,
    /// The cell on the plaintext clusters, and on the TLS ones.
    pub plain: Option<CellResult>,
    pub tls: Option<CellResult>,
}

impl TlsCell {
    /// `kind`'s TLS TPS / plaintext TPS: 0.95 is a 5% cost.
    pub fn tls_ratio(&self, kind: ProviderKind) -> Option<f64> {
        let plain = self.plain.as_ref()?.of(kind)?.tps;
        let tls = self.tls.as_ref()?.of(kind)?.tps;
        (plain > 0.0).then(|| tls / plain)
    }

    /// TLS TPS over plaintext TPS round by round (the two runs of a round
    /// ran back to back, so drift of the machine between rounds cancels
    /// out), sorted; rounds where either run failed are left out.
    pub fn paired_ratios(&self, kind: ProviderKind) -> Vec<f64> {
        let ok = |c: &Option<CellResult>| -> Vec<(u32, f64)> {
            let runs = c.iter().flat_map(|c| &c.runs);
            runs.filter(|m| m.target == Some(kind) && m.error.is_none()).map(|m| (m.round, m.tps)).collect()
        };
        let plain = ok(&self.plain);
        let mut ratios: Vec<f64> = ok(&self.tls)
            .into_iter()
            .filter_map(|(round, tls)| {
                let (_, p) = plain.iter().find(|(r, _)| *r == round)?;
                (*p > 0.0).then(|| tls / p)
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios
    }

    /// The servers' CPU per transaction over every successful run of `kind`
    /// on the TLS clusters (`tls`) or the plaintext ones, µs. On a machine
    /// whose cores the cell saturates this is what TLS costs in throughput,
    /// with less of the noise of TPS.
    pub fn cpu_us_per_trx(&self, kind: ProviderKind, tls: bool) -> Option<f64> {
        let cell = if tls { &self.tls } else { &self.plain };
        let runs = cell.iter().flat_map(|c| &c.runs).filter(|m| m.target == Some(kind) && m.error.is_none());
        let (cpu, trx) = runs.fold((0.0, 0u64), |(c, t), m| (c + m.cpu_s, t + m.transactions));
        (trx > 0 && cpu > 0.0).then(|| cpu / trx as f64 * 1e6)
    }

    pub fn failed(&self) -> usize {
        let runs = [&self.plain, &self.tls].into_iter().flatten().flat_map(|c| &c.runs);
        runs.filter(|m| m.error.is_some()).count() + usize::from(self.skipped.is_some())
    }
}

/// One measurement of the cell: which provider, encrypted or not, which round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub kind: ProviderKind,
    pub tls: bool,
    pub round: u32,
}

/// Every run in order: per round, each provider's two runs back to back;
/// within a provider plaintext and TLS swap who goes first every round, and
/// the providers swap too, so neither side always follows the other.
pub fn runs(kinds: &[ProviderKind], rounds: u32) -> Vec<Run> {
    let mut out = Vec::new();
    for round in 0..rounds.max(1) {
        let mut order = kinds.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        for kind in order {
            let tls_first = round % 2 == 1;
            for tls in [tls_first, !tls_first] {
                out.push(Run { kind, tls, round });
            }
        }
    }
    out
}

/// Measures the cell. `plain` are the matrix's clusters, `tls` the TLS ones
/// (same providers, same data).
pub fn run(
    bench: &Bench,
    plain: &[(ProviderKind, Cluster)],
    tls: &[(ProviderKind, Cluster)],
    rounds: u32,
    progress: &mut Progress,
) -> TlsCell {
    let kinds: Vec<ProviderKind> = tls.iter().map(|c| c.0).collect();
    let mut out = TlsCell {
        skipped: None,
        plain: Some(CellResult { cell: CELL, runs: Vec::new() }),
        tls: Some(CellResult { cell: CELL, runs: Vec::new() }),
    };
    for run in runs(&kinds, rounds) {
        let (clusters, label, results) =
            if run.tls { (tls, "TLS", out.tls.as_mut()) } else { (plain, "plaintext", out.plain.as_mut()) };
        let what = format!("{} {label} {} (round {}/{rounds})", run.kind, CELL.label(), run.round + 1);
        progress.start(&what);
        let measured = match clusters.iter().find(|c| c.0 == run.kind) {
            // The same seed for all four runs of a round.
            Some((_, cluster)) => bench.measure(run.kind, cluster, &CELL, run.round, 700 + run.round),
            None => Measurement {
                target: Some(run.kind),
                round: run.round,
                error: Some(format!("no {label} {} cluster", run.kind)),
                ..Measurement::default()
            },
        };
        progress.finish(&match &measured.error {
            None => format!("{what}: {:.0} tps", measured.tps),
            Some(e) => format!("{what}: FAILED: {e}"),
        });
        results.expect("both set above").runs.push(measured);
    }
    out
}

/// The report's section.
pub fn render(out: &mut String, t: &TlsCell, rounds: u32) {
    let _ = writeln!(out, "## What TLS costs\n");
    if let Some(why) = &t.skipped {
        let _ = writeln!(out, "Not run: {why}.\n");
        return;
    }
    let _ = writeln!(
        out,
        "A second cluster of each provider runs with TLS on the group channel (`socket.ssl=YES`, one CA, a\n\
         certificate per node, as `tandem cluster up --tls` makes them) next to the plaintext one, with the same\n\
         tables. `{}` runs on all four in {rounds} round(s); each provider's\n\
         plaintext and TLS runs are back to back, who goes first swapping every round. *TLS/plain*: the\n\
         provider's TLS TPS over its plaintext TPS (medians of the rounds); 0.95 is a 5% cost. *per round*:\n\
         the same ratio taken within each round (its two runs back to back), median and range over the rounds;\n\
         *mean ± SE*: their mean and its standard error. *CPU µs/trx*: the provider's servers' CPU time per\n\
         transaction over all rounds, plaintext / TLS (the cell keeps the cores busy, so this is TLS's cost in\n\
         throughput, less noisy than TPS).\n",
        CELL.label()
    );
    let _ = writeln!(
        out,
        "| Provider | Plaintext TPS | TLS TPS | TLS/plain | per round | mean ± SE | CPU µs/trx | rounds ± plain / TLS |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for kind in [ProviderKind::Galera, ProviderKind::Tandem] {
        let get = |c: &Option<CellResult>| c.as_ref().and_then(|c| c.of(kind));
        let (p, s) = (get(&t.plain), get(&t.tls));
        if p.is_none() && s.is_none() && !ran(t, kind) {
            continue;
        }
        let tps = |c: &Option<Combined>| c.as_ref().map_or("failed".into(), |m| format!("{:.0}", m.tps));
        let spread = |c: &Option<Combined>| {
            c.as_ref().filter(|m| m.rounds > 1).map_or("–".into(), |m| format!("{:.0}%", m.round_spread_pct))
        };
        let ratio = t.tls_ratio(kind).map_or("–".into(), |r| format!("{r:.2}"));
        let paired = t.paired_ratios(kind);
        let per_round = match paired.as_slice() {
            [] => "–".to_string(),
            [only] => format!("{only:.2}"),
            [low, .., high] => format!("{:.2} ({low:.2}–{high:.2})", super::results::median(&paired)),
        };
        let mean_se = mean_and_standard_error(&paired).map_or("–".into(), |(m, se)| format!("{m:.2} ± {se:.2}"));
        let cpu = |tls| t.cpu_us_per_trx(kind, tls).map_or("–".into(), |c| format!("{c:.0}"));
        let _ = writeln!(
            out,
            "| {kind} | {} | {} | {ratio} | {per_round} | {mean_se} | {} / {} | {} / {} |",
            tps(&p),
            tps(&s),
            cpu(false),
            cpu(true),
            spread(&p),
            spread(&s)
        );
    }
    out.push('\n');
    let mut listed = false;
    for (label, c) in [("plaintext", &t.plain), ("TLS", &t.tls)] {
        for m in c.iter().flat_map(|c| &c.runs) {
            if let (Some(kind), Some(e)) = (m.target, &m.error) {
                let _ = writeln!(out, "* {kind} {label}, round {}: **failed**: {e}", m.round + 1);
                listed = true;
            }
        }
    }
    if listed {
        out.push('\n');
    }
}

/// The mean of `xs` and its standard error (sample deviation / sqrt n);
/// none for fewer than two values.
fn mean_and_standard_error(xs: &[f64]) -> Option<(f64, f64)> {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n;
    let variance = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, (variance / n).sqrt()))
}

fn ran(t: &TlsCell, kind: ProviderKind) -> bool {
    [&t.plain, &t.tls].into_iter().flatten().any(|c| c.ran(kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderKind::*;

    #[test]
    fn each_provider_runs_plain_and_tls_back_to_back_swapping_who_goes_first() {
        let r = runs(&[Tandem, Galera], 2);
        let seq: Vec<(ProviderKind, bool)> = r.iter().map(|r| (r.kind, r.tls)).collect();
        assert_eq!(
            seq,
            [
                (Tandem, false),
                (Tandem, true),
                (Galera, false),
                (Galera, true),
                (Galera, true),
                (Galera, false),
                (Tandem, true),
                (Tandem, false)
            ]
        );
        assert_eq!(r.iter().filter(|r| r.round == 1).count(), 4);
    }

    fn measured(kind: ProviderKind, tps: f64, round: u32) -> Measurement {
        Measurement { target: Some(kind), round, tps, ..Measurement::default() }
    }

    #[test]
    fn the_cost_is_each_providers_own_ratio_and_the_report_shows_it() {
        let cell = |runs| Some(CellResult { cell: CELL, runs });
        let t = TlsCell {
            skipped: None,
            plain: cell(vec![measured(Tandem, 1000.0, 0), measured(Galera, 800.0, 0)]),
            tls: cell(vec![
                measured(Tandem, 960.0, 0),
                Measurement { error: Some("node 2 not Synced".into()), ..measured(Galera, 0.0, 0) },
            ]),
        };
        assert_eq!(t.tls_ratio(Tandem), Some(0.96));
        assert_eq!(t.tls_ratio(Galera), None, "its only TLS round failed");
        assert_eq!(t.failed(), 1);
        let mut md = String::new();
        render(&mut md, &t, 1);
        assert!(md.contains("| tandem | 1000 | 960 | 0.96 | 0.96 | – | – / – | – / – |"), "{md}");
        assert!(md.contains("| galera | 800 | failed | – | – | – | – / – | – / – |"), "{md}");
        assert!(md.contains("* galera TLS, round 1: **failed**: node 2 not Synced"), "{md}");
    }

    /// The per-round ratio pairs each TLS run with the plaintext run of its
    /// own round: a fast round and a slow round do not mix.
    #[test]
    fn per_round_ratios_pair_the_runs_of_each_round() {
        let cell = |runs| Some(CellResult { cell: CELL, runs });
        let t = TlsCell {
            skipped: None,
            plain: cell(vec![measured(Tandem, 1000.0, 0), measured(Tandem, 2000.0, 1), measured(Tandem, 1500.0, 2)]),
            tls: cell(vec![
                measured(Tandem, 950.0, 0),
                measured(Tandem, 2000.0, 1),
                Measurement { error: Some("lost".into()), ..measured(Tandem, 0.0, 2) },
            ]),
        };
        assert_eq!(t.paired_ratios(Tandem), vec![0.95, 1.0], "round 3 failed and is left out");
        assert_eq!(t.paired_ratios(Galera), Vec::<f64>::new());
        let mut md = String::new();
        render(&mut md, &t, 3);
        assert!(md.contains("| 0.97 (0.95–1.00) | 0.97 ± 0.03 |"), "{md}");
    }

    /// CPU per transaction adds up every successful run of one side, and
    /// keeps the two sides and the providers apart.
    #[test]
    fn cpu_per_transaction_is_each_sides_total_over_its_runs() {
        let cell = |runs| Some(CellResult { cell: CELL, runs });
        let run = |kind, cpu_s, transactions, round| Measurement {
            cpu_s,
            transactions,
            ..measured(kind, transactions as f64 / 10.0, round)
        };
        let t = TlsCell {
            skipped: None,
            plain: cell(vec![run(Tandem, 1.0, 1000, 0), run(Tandem, 3.0, 1000, 1), run(Galera, 2.0, 1000, 0)]),
            tls: cell(vec![
                run(Tandem, 5.0, 2000, 0),
                Measurement { error: Some("lost".into()), ..run(Tandem, 9.0, 10, 1) },
            ]),
        };
        assert_eq!(t.cpu_us_per_trx(Tandem, false), Some(2000.0));
        assert_eq!(t.cpu_us_per_trx(Tandem, true), Some(2500.0), "the failed run is left out");
        assert_eq!(t.cpu_us_per_trx(Galera, false), Some(2000.0));
        assert_eq!(t.cpu_us_per_trx(Galera, true), None);
        let mut md = String::new();
        render(&mut md, &t, 2);
        assert!(md.contains("| 2000 / 2500 |"), "{md}");
    }

    #[test]
    fn the_standard_error_is_of_the_mean() {
        assert_eq!(mean_and_standard_error(&[1.0]), None);
        let (mean, se) = mean_and_standard_error(&[0.9, 1.0, 1.1, 1.0]).unwrap();
        assert!((mean - 1.0).abs() < 1e-12);
        // sample deviation sqrt(0.02 / 3), over sqrt(4)
        assert!((se - (0.02f64 / 3.0).sqrt() / 2.0).abs() < 1e-12, "{se}");
    }

    #[test]
    fn a_skipped_cell_says_why() {
        let t = TlsCell { skipped: Some("the galera TLS cluster did not start".into()), ..TlsCell::default() };
        assert_eq!(t.failed(), 1);
        let mut md = String::new();
        render(&mut md, &t, 3);
        assert!(md.contains("Not run: the galera TLS cluster did not start."), "{md}");
    }
}
