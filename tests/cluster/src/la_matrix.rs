//! The list-append matrix (issue 49): each cell a fault, a flush setting
//! and an isolation, run on a fresh 3-node cluster of either provider with
//! the same clients, checked by `tandem_verify`, and written as a row of
//! docs/consistency.md's table. `run` is also what the short runs of
//! `make test` call.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;
use tandem::cluster::Cluster;
use tandem_verify::{check, Kind, Op, Outcome, Report};

use crate::la_faults::Fault;
use crate::list_append::{self, Clients};
use crate::netns::Net;

/// One run's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub fault: Fault,
    /// `innodb_flush_log_at_trx_commit`.
    pub flush: u8,
    /// `innodb_snapshot_isolation=ON`; REPEATABLE READ without it.
    pub snapshot_isolation: bool,
}

impl Cell {
    pub const fn new(fault: Fault) -> Cell {
        Cell { fault, flush: 1, snapshot_isolation: true }
    }

    /// The server options of the cell.
    pub fn options(&self) -> Vec<(String, String)> {
        let si = if self.snapshot_isolation { "ON" } else { "OFF" };
        vec![
            ("innodb_snapshot_isolation".into(), si.into()),
            ("innodb_flush_log_at_trx_commit".into(), self.flush.to_string()),
        ]
    }

    /// What Tandem must never show in this cell: every violation but write
    /// skew (G2), which snapshot isolation allows, and, under REPEATABLE
    /// READ without it, what InnoDB's REPEATABLE READ does on any
    /// provider: lost updates and read skew (G-single), and internal
    /// inconsistency (an UPDATE reads the latest version, not the
    /// transaction's snapshot, so an append takes in another's newer
    /// append, which the transaction's next read then shows).
    pub fn promised(&self) -> Vec<Kind> {
        let innodb_rr = |k: &Kind| matches!(k, Kind::GSingle | Kind::Internal);
        let allowed = |k: &Kind| *k == Kind::G2 || (!self.snapshot_isolation && innodb_rr(k));
        Kind::ALL.into_iter().filter(|k| k.is_violation() && !allowed(k)).collect()
    }
}

/// Every cell of the matrix: each fault at flush 1 with snapshot
/// isolation; the crashes also at the flush settings that lose InnoDB's
/// last commits (0: written and flushed once a second; 2: written at
/// commit, flushed once a second); no fault and a kill with REPEATABLE
/// READ alone.
pub fn cells() -> Vec<Cell> {
    let mut cells: Vec<Cell> = Fault::ALL.into_iter().map(Cell::new).collect();
    for flush in [0, 2] {
        cells.push(Cell { flush, ..Cell::new(Fault::KillAll) });
        cells.push(Cell { flush, ..Cell::new(Fault::KillMajority) });
    }
    for fault in [Fault::None, Fault::KillOne] {
        cells.push(Cell { snapshot_isolation: false, ..Cell::new(fault) });
    }
    cells
}

/// What a run gave.
pub struct Run {
    pub committed: usize,
    pub aborted: usize,
    pub unknown: usize,
    /// Acknowledged appends, and acknowledged reads the server synced.
    pub appends: usize,
    pub synced_reads: usize,
    pub errors: BTreeMap<String, u64>,
    pub report: Report,
}

impl Run {
    /// The kinds of `promised` the run found, with their counts.
    pub fn broken(&self, promised: &[Kind]) -> Vec<(Kind, usize)> {
        promised.iter().map(|k| (*k, self.report.count(*k))).filter(|(_, n)| *n > 0).collect()
    }

    /// Enough history to say something: a run whose clients got nothing
    /// through checks nothing.
    pub fn worth_checking(&self) -> bool {
        self.appends >= 100 && self.synced_reads >= 50
    }
}

/// Clients on every node of `c` while `cell`'s fault runs and heals, then
/// the history, every node synced, checked.
pub fn run(c: &mut Cluster, net: Option<&Net>, cell: Cell, galera: bool, seed: u64) -> Result<Run> {
    list_append::open(c.node(1))?;
    let clients = Clients::start(c, 2, seed);
    let injected = cell.fault.inject(c, net, galera);
    let (txns, errors) = clients.stop();
    injected?;
    for i in 1..=c.len() {
        c.wait_synced(i, Duration::from_secs(300))?;
    }
    let history = list_append::history(txns, c)?;
    let report = check(&history);
    let ended = |o: Outcome| history.txns.iter().filter(|t| t.outcome == o).count();
    let acked = history.txns.iter().filter(|t| t.outcome == Outcome::Ok);
    let run = Run {
        committed: ended(Outcome::Ok),
        aborted: ended(Outcome::Aborted),
        unknown: ended(Outcome::Unknown),
        appends: acked.clone().flat_map(|t| t.appends()).count(),
        synced_reads: acked.filter(|t| matches!(t.ops[0], Op::Read { .. })).count(),
        errors,
        report,
    };
    eprintln!(
        "{} flush {} si {}: seed {seed}: {} committed, {} rolled back, {} unknown; errors {:?}\n{}",
        cell.fault.name(),
        cell.flush,
        cell.snapshot_isolation,
        run.committed,
        run.aborted,
        run.unknown,
        run.errors,
        run.report
    );
    Ok(run)
}

/// The table's head (docs/consistency.md).
pub const TABLE_HEAD: &str =
    "| Provider | Fault | Flush | Isolation | Committed / rolled back / unknown | Findings |\n\
                              |---|---|---|---|---|---|\n";

/// A row of the table; a run that failed says why in its last column.
pub fn row(provider: &str, cell: Cell, run: Result<&Run, &str>) -> String {
    let isolation = if cell.snapshot_isolation { "SI" } else { "RR" };
    let fault = format!("`{}`: {}", cell.fault.name(), cell.fault.words());
    let mut out = format!("| {provider} | {fault} | {} | {isolation} | ", cell.flush);
    match run {
        Ok(run) => {
            let _ = write!(out, "{} / {} / {} | {} |", run.committed, run.aborted, run.unknown, findings(run, cell));
        }
        Err(e) => {
            let first = e.lines().next().unwrap_or_default();
            let _ = write!(out, "- | **run failed**: {} |", first.replace('|', "/"));
        }
    }
    out
}

/// What Galera's flush-0 crash says of the checker: the control is only
/// a control when it shows Galera's known losses (MDEV-38974).
pub fn control_verdict(lost: usize) -> String {
    if lost > 0 {
        format!("the checker found Galera's flush-0 losses ({lost} acknowledged appends lost)")
    } else {
        "the checker found no loss in Galera's flush-0 crash: the fault was too weak this time to show \
         what it is meant to show; this run proves nothing about lost writes"
            .into()
    }
}

const BEGIN: &str = "<!-- matrix: begin (written by make consistency) -->";
const END: &str = "<!-- matrix: end -->";

/// The table of `rows` into the file at `path`, between its matrix
/// markers, or printed when no path is given. A row replaces the row of
/// the same provider, fault, flush and isolation already there, so that a
/// run of some cells (`TANDEM_LA_FAULTS`) leaves the others' rows.
pub fn write_table(path: Option<std::path::PathBuf>, rows: &[String]) -> Result<()> {
    let Some(path) = path else {
        println!("{TABLE_HEAD}{}", rows.join("\n"));
        return Ok(());
    };
    let doc = std::fs::read_to_string(&path)?;
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        anyhow::bail!("{} has no matrix markers ({BEGIN} ... {END})", path.display());
    };
    let old = doc[b + BEGIN.len()..e].lines().filter(|l| l.starts_with("| ") && !TABLE_HEAD.starts_with(*l));
    let mut merged: Vec<String> = old.map(str::to_string).collect();
    for row in rows {
        match merged.iter_mut().find(|old| row_key(old) == row_key(row)) {
            Some(old) => old.clone_from(row),
            None => merged.push(row.clone()),
        }
    }
    let spliced = format!("{}{BEGIN}\n{TABLE_HEAD}{}\n{}", &doc[..b], merged.join("\n"), &doc[e..]);
    std::fs::write(&path, spliced)?;
    println!("table written to {}", path.display());
    Ok(())
}

/// A row's provider, fault, flush and isolation.
fn row_key(row: &str) -> Vec<&str> {
    row.split('|').skip(1).take(4).map(str::trim).collect()
}

/// The kinds found with their counts, those Tandem promises in bold;
/// "none" when clean.
fn findings(run: &Run, cell: Cell) -> String {
    let promised = cell.promised();
    let found: Vec<String> = run
        .report
        .counts()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| if promised.contains(&k) { format!("**{} {n}**", k.name()) } else { format!("{} {n}", k.name()) })
        .collect();
    let mut out = if found.is_empty() { "none".to_string() } else { found.join(", ") };
    if !run.worth_checking() {
        let _ = write!(out, " (too little history: {} appends, {} synced reads)", run.appends, run.synced_reads);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(findings: &[(Kind, usize)]) -> Run {
        let mut report = Report::default();
        for (kind, n) in findings {
            (0..*n).for_each(|i| report.add(*kind, vec![i as u64], String::new()));
        }
        Run { committed: 10, aborted: 2, unknown: 1, appends: 200, synced_reads: 80, errors: BTreeMap::new(), report }
    }

    #[test]
    fn repeatable_read_allows_what_innodb_does_and_snapshot_isolation_does_not() {
        let si = Cell::new(Fault::None);
        let rr = Cell { snapshot_isolation: false, ..si };
        assert!(si.promised().contains(&Kind::GSingle) && si.promised().contains(&Kind::Internal));
        assert!(!rr.promised().contains(&Kind::GSingle) && !rr.promised().contains(&Kind::Internal));
        for cell in [si, rr] {
            assert!(!cell.promised().contains(&Kind::G2));
            assert!(!cell.promised().contains(&Kind::StaleUnsynced));
            assert!(cell.promised().contains(&Kind::Lost));
        }
        let run = run_with(&[(Kind::GSingle, 3), (Kind::G2, 1)]);
        assert_eq!(run.broken(&si.promised()), vec![(Kind::GSingle, 3)]);
        assert!(run.broken(&rr.promised()).is_empty());
    }

    #[test]
    fn rows_mark_what_breaks_a_promise() {
        let cell = Cell { flush: 0, ..Cell::new(Fault::KillAll) };
        let row = row("Galera", cell, Ok(&run_with(&[(Kind::Lost, 2), (Kind::G2, 1)])));
        assert!(
            row.starts_with("| Galera | `kill-all`: kill -9 all three at once, restart | 0 | SI | 10 / 2 / 1 | "),
            "{row}"
        );
        assert!(row.contains("**lost 2**") && row.contains("G2 1") && !row.contains("**G2"), "{row}");
        let clean = super::row("Tandem", cell, Ok(&run_with(&[])));
        assert!(clean.ends_with("| none |"), "{clean}");
        let failed = super::row("Tandem", cell, Err("not synced | after 300 s\nmore"));
        assert!(failed.ends_with("**run failed**: not synced / after 300 s |"), "{failed}");
    }

    #[test]
    fn the_table_goes_between_the_markers_and_nowhere_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("doc.md");
        std::fs::write(&path, format!("intro\n{BEGIN}\nold rows\n{END}\nafter\n")).unwrap();
        let (a, b) = ("| T | kill | 1 | SI | 1 / 0 / 0 | none |", "| G | kill | 1 | SI | 2 / 0 / 0 | none |");
        write_table(Some(path.clone()), &[a.into(), b.into()]).unwrap();
        let doc = std::fs::read_to_string(&path).unwrap();
        assert_eq!(doc, format!("intro\n{BEGIN}\n{TABLE_HEAD}{a}\n{b}\n{END}\nafter\n"));
        // A later run of one cell replaces its row and keeps the others.
        let (a2, c) = ("| T | kill | 1 | SI | 3 / 0 / 0 | lost 1 |", "| T | kill | 0 | SI | 4 / 0 / 0 | none |");
        write_table(Some(path.clone()), &[a2.into(), c.into()]).unwrap();
        let doc = std::fs::read_to_string(&path).unwrap();
        assert_eq!(doc, format!("intro\n{BEGIN}\n{TABLE_HEAD}{a2}\n{b}\n{c}\n{END}\nafter\n"));
        std::fs::write(&path, "no markers\n").unwrap();
        assert!(write_table(Some(path), &[]).is_err());
    }

    #[test]
    fn the_matrix_has_every_fault_and_the_crashes_at_every_flush() {
        let cells = cells();
        for fault in Fault::ALL {
            assert!(cells.contains(&Cell::new(fault)), "{fault:?}");
        }
        for flush in [0, 1, 2] {
            assert!(cells.contains(&Cell { flush, ..Cell::new(Fault::KillAll) }));
        }
        assert!(cells.iter().any(|c| !c.snapshot_isolation));
    }
}
