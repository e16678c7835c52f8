//! The report's 1-node cell: each replicated cluster shrunk to node 1,
//! against the standalone server and the null provider (the floor), with
//! server CPU per transaction as the primary figure.

use super::{p95, ratio, round_label, round_spread, tps, Figures};
use crate::bench::results::{Results, SingleNode};
use std::fmt::Write;
use tandem::cluster::ProviderKind;

pub(super) fn single_node_section(out: &mut String, r: &Results, s: &SingleNode) {
    let _ = writeln!(out, "## 1-node cluster against standalone MariaDB and the null provider\n");
    if let Some(why) = &s.skipped {
        let _ = writeln!(out, "Not run: {why}.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Last, every node but node 1 of each replicated cluster is stopped gracefully: each leaves the membership, so\n\
         node 1 is a primary component of its own (`wsrep_cluster_size` 1) with the same data, and nothing is\n\
         replicated. `oltp_write_only` runs on it, on the standalone server (one MariaDB without wsrep) and on one\n\
         node with the null provider (crates/null-provider: commits ordered by a local counter, no group, no log, so\n\
         what it costs is the server's own wsrep work), same settings, {} s warm-up then {} s measured, in {} round(s)\n\
         like the matrix. CPU: user + system time of every `mariadbd` of the target, per transaction. *Own*: a\n\
         provider's CPU per transaction minus the null provider's, what the provider itself costs. *X/S*: X /\n\
         standalone.\n",
        r.settings.warmup_s, r.settings.duration_s, r.settings.matrix.rounds
    );
    single_node_cpu(out, s);
    let _ = writeln!(
        out,
        "| Threads | Standalone TPS | Null TPS | Galera TPS | Tandem TPS | G/S TPS | T/S TPS | T/G TPS | Standalone p95 | Galera p95 | Tandem p95 | G/S p95 | T/S p95 | rounds ± S / N / G / T |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let (sa, na, ga, ta) = (ProviderKind::Standalone, ProviderKind::Null, ProviderKind::Galera, ProviderKind::Tandem);
    for c in &s.cells {
        let get = |k| Figures { ran: c.ran(k), combined: c.of(k) };
        let (fs, fn_, fg, ft) = (get(sa), get(na), get(ga), get(ta));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} |",
            c.cell.threads,
            tps(&fs),
            tps(&fn_),
            tps(&fg),
            tps(&ft),
            ratio(c.tps_vs(ga, sa)),
            ratio(c.tps_vs(ta, sa)),
            ratio(c.tps_vs(ta, ga)),
            p95(&fs),
            p95(&fg),
            p95(&ft),
            ratio(c.p95_vs(ga, sa)),
            ratio(c.p95_vs(ta, sa)),
            round_spread(&fs),
            round_spread(&fn_),
            round_spread(&fg),
            round_spread(&ft),
        );
    }
    out.push('\n');
    failures(out, r, s);
}

/// The runs that failed or ran twice, one line each.
fn failures(out: &mut String, r: &Results, s: &SingleNode) {
    let mut listed = false;
    for c in &s.cells {
        for m in &c.runs {
            let round = round_label(r, m.round);
            if let (Some(target), Some(e)) = (m.target, &m.error) {
                let _ = writeln!(out, "* {target}, 1-node {}{round}: **failed**: {e}", c.cell.label());
                listed = true;
            }
            if let (Some(target), Some(e)) = (m.target, &m.retried_after) {
                let _ = writeln!(
                    out,
                    "* {target}, 1-node {}{round}: run twice, the figures are the second run's; the first failed: {e}",
                    c.cell.label()
                );
                listed = true;
            }
        }
    }
    if listed {
        out.push('\n');
    }
}

/// The 1-node cell's primary figure: server CPU per transaction, and each
/// provider's own share of it (minus the null provider's).
fn single_node_cpu(out: &mut String, s: &SingleNode) {
    let _ = writeln!(
        out,
        "| Threads | CPU µs/trx standalone | null | Galera | Tandem | own µs/trx Galera | own Tandem | T/G own |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    let us = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.0}"));
    let (sa, na, ga, ta) = (ProviderKind::Standalone, ProviderKind::Null, ProviderKind::Galera, ProviderKind::Tandem);
    for c in &s.cells {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.cell.threads,
            us(c.cpu_us_per_trx(sa)),
            us(c.cpu_us_per_trx(na)),
            us(c.cpu_us_per_trx(ga)),
            us(c.cpu_us_per_trx(ta)),
            us(c.own_cpu_us_per_trx(ga)),
            us(c.own_cpu_us_per_trx(ta)),
            ratio(c.own_cpu_vs(ta, ga)),
        );
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::super::render;
    use crate::bench::results::tests::{measurement, sample};
    use crate::bench::results::{Measurement, SingleNode};
    use tandem::cluster::ProviderKind::{self, *};

    /// `tps` for 10 s, at `cpu_us` of server CPU per transaction.
    fn costing(target: ProviderKind, tps: f64, cpu_us: f64) -> Measurement {
        let transactions = (tps * 10.0) as u64;
        Measurement { transactions, cpu_s: cpu_us * transactions as f64 / 1e6, ..measurement(target, tps, 2.0) }
    }

    #[test]
    fn the_cell_compares_with_standalone_and_shows_each_providers_own_cost() {
        let mut r = sample([120.0, 80.0]);
        let mut cells = sample([200.0, 50.0]).cells;
        cells[0].runs =
            vec![costing(Tandem, 200.0, 400.0), costing(Galera, 250.0, 360.0), costing(Standalone, 400.0, 200.0)];
        cells[0].runs.push(costing(Null, 300.0, 280.0));
        cells[1].runs[1].error = Some("FATAL: gone".into());
        r.single_node = Some(SingleNode { skipped: None, cells });
        let md = render(&r, None);
        assert!(md.contains("## 1-node cluster against standalone MariaDB and the null provider"), "{md}");
        // Own: Galera 360 - 280 = 80, Tandem 400 - 280 = 120, so 1.50x.
        assert!(md.contains("| 1 | 200 | 280 | 360 | 400 | 80 | 120 | 1.50 |"), "{md}");
        // No null run in the 16-thread cell: no own cost, CPU per transaction still shown.
        assert!(md.contains("| 16 | 1000 | – | – | 1000 | – | – | – |"), "{md}");
        assert!(md.contains("| 1 | 400 | 300 | 250 | 200 | 0.62 | 0.50 | 0.80 |"), "{md}");
        assert!(md.contains("| 16 | 400 | – | failed | 50 | – | 0.12 | – |"), "{md}");
        assert!(md.contains("* galera, 1-node oltp_write_only 16 thr node 1: **failed**: FATAL: gone"), "{md}");
        assert!(md.find("## 1-node").unwrap() < md.find("## Resources").unwrap());
    }

    #[test]
    fn an_own_cost_at_or_below_the_floor_is_no_ratio() {
        let mut cells = sample([200.0, 50.0]).cells;
        cells[0].runs = vec![costing(Tandem, 200.0, 270.0), costing(Galera, 250.0, 360.0), costing(Null, 300.0, 280.0)];
        let c = &cells[0];
        assert_eq!(c.own_cpu_us_per_trx(Tandem).map(f64::round), Some(-10.0), "noise shown as measured");
        assert_eq!(c.own_cpu_vs(Tandem, Galera), None);
        assert_eq!(c.own_cpu_vs(Galera, Galera), Some(1.0));
    }
}
