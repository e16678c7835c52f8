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
use crate::cluster::{Cluster, ProviderKind};
use crate::progress::Progress;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

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
         the same ratio taken within each round (its two runs back to back), median and range over the rounds.\n",
        CELL.label()
    );
    let _ = writeln!(out, "| Provider | Plaintext TPS | TLS TPS | TLS/plain | per round | rounds ± plain / TLS |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
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
        let _ = writeln!(
            out,
            "| {kind} | {} | {} | {ratio} | {per_round} | {} / {} |",
            tps(&p),
            tps(&s),
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
        assert!(md.contains("| tandem | 1000 | 960 | 0.96 | 0.96 | – / – |"), "{md}");
        assert!(md.contains("| galera | 800 | failed | – | – | – / – |"), "{md}");
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
        assert!(md.contains("| 0.97 (0.95–1.00) |"), "{md}");
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
